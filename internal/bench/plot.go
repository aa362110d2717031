package bench

import (
	"fmt"
	"image"
	"image/color"
	"image/draw"
	"image/png"
	"io"
	"math"

	"golang.org/x/image/font"
	"golang.org/x/image/font/basicfont"
	"golang.org/x/image/math/fixed"

	"system1/internal/calibration/fitting"
)

// Plot is a reliability diagram: per confidence bin, how often the
// answers were right against how confident they were.
type Plot struct {
	Title string
	// Raw are the bins as reported; Calibrated, when not nil, after the
	// fits, drawn beside them.
	Raw, Calibrated       []fitting.Bin
	RawECE, CalibratedECE float64
	CalibratedNote        string
}

// The diagram's geometry, in pixels.
const (
	plotLeft   = 70
	plotTop    = 64
	binWidth   = 50
	plotHeight = 480
	plotWidth  = fitting.NumBins * binWidth
	imgWidth   = plotLeft + plotWidth + 30
	imgHeight  = plotTop + plotHeight + 170
)

var (
	white     = color.RGBA{255, 255, 255, 255}
	black     = color.RGBA{0, 0, 0, 255}
	gridGray  = color.RGBA{225, 225, 225, 255}
	diagGray  = color.RGBA{130, 130, 130, 255}
	rawBlue   = color.RGBA{66, 114, 196, 255}
	calOrange = color.RGBA{237, 125, 49, 255}
	confRed   = color.RGBA{192, 0, 0, 255}
)

// WritePNG draws the diagram as a PNG: bars of accuracy per bin (raw, and
// calibrated beside it), a red tick at each bin's mean confidence, the
// diagonal a calibrated model follows, and under the axis the number of
// answers in each bin.
func (p Plot) WritePNG(w io.Writer) error {
	img := image.NewRGBA(image.Rect(0, 0, imgWidth, imgHeight))
	draw.Draw(img, img.Bounds(), image.NewUniform(white), image.Point{}, draw.Src)
	x := func(v float64) int { return plotLeft + int(math.Round(v*plotWidth)) }
	y := func(v float64) int { return plotTop + plotHeight - int(math.Round(v*plotHeight)) }

	for i := range 6 {
		v := float64(i) / 5
		fill(img, plotLeft, y(v), plotLeft+plotWidth, y(v), gridGray)
		fill(img, x(v), plotTop, x(v), plotTop+plotHeight, gridGray)
		label := fmt.Sprintf("%.1f", v)
		text(img, x(v)-width(label)/2, plotTop+plotHeight+16, label, black)
		text(img, plotLeft-8-width(label), y(v)+4, label, black)
	}
	// The diagonal, dashed.
	for i := range plotWidth {
		if (i/6)%2 == 0 {
			v := float64(i) / plotWidth
			img.SetRGBA(x(v), y(v), diagGray)
			img.SetRGBA(x(v), y(v)-1, diagGray)
		}
	}

	type bars struct {
		bins []fitting.Bin
		col  color.RGBA
		n    string // the label of its counts
	}
	series := []bars{{p.Raw, rawBlue, "n raw"}}
	if p.Calibrated != nil {
		series = append(series, bars{p.Calibrated, calOrange, "n cal"})
	}
	barW := (binWidth - 8) / len(series)
	for s, se := range series {
		for i, b := range se.bins {
			if b.Count == 0 {
				continue
			}
			x0 := plotLeft + i*binWidth + 4 + s*barW
			fill(img, x0, y(b.Accuracy), x0+barW-1, y(0), se.col)
			fill(img, x0, y(b.Accuracy), x0+barW-1, y(b.Accuracy), black)
			c := y(b.Confidence)
			fill(img, x0, c-1, x0+barW-1, c+1, confRed)
		}
	}
	// Axes.
	fill(img, plotLeft, y(0), plotLeft+plotWidth, y(0), black)
	fill(img, plotLeft, plotTop, plotLeft, plotTop+plotHeight, black)

	text(img, plotLeft, 20, p.Title, black)
	axis := "confidence: the probability of the predicted answer (15 bins)"
	text(img, plotLeft+plotWidth/2-width(axis)/2, plotTop+plotHeight+34, axis, black)
	text(img, 8, plotTop-8, "accuracy", black)

	// Counts under each bin.
	rowY := plotTop + plotHeight + 56
	for s, se := range series {
		text(img, 8, rowY+s*16, se.n, se.col)
		for i, b := range se.bins {
			c := fmt.Sprint(b.Count)
			text(img, plotLeft+i*binWidth+binWidth/2-width(c)/2, rowY+s*16, c, black)
		}
	}

	// Legend.
	ly := rowY + 2*16 + 14
	lx := plotLeft
	key := func(col color.RGBA, label string) {
		fill(img, lx, ly-10, lx+14, ly+2, col)
		text(img, lx+20, ly, label, black)
		lx += 20 + width(label) + 24
	}
	key(rawBlue, fmt.Sprintf("raw accuracy, ECE %.3f", p.RawECE))
	if p.Calibrated != nil {
		key(calOrange, fmt.Sprintf("calibrated accuracy, ECE %.3f", p.CalibratedECE))
	}
	key(confRed, "mean confidence")
	key(diagGray, "perfect calibration")
	if p.CalibratedNote != "" {
		text(img, plotLeft, ly+20, p.CalibratedNote, black)
	}
	return png.Encode(w, img)
}

// fill paints the rectangle from (x0, y0) to (x1, y1), both included: a
// line when it is one pixel wide.
func fill(img *image.RGBA, x0, y0, x1, y1 int, c color.RGBA) {
	draw.Draw(img, image.Rect(x0, y0, x1+1, y1+1), image.NewUniform(c), image.Point{}, draw.Src)
}

func text(img *image.RGBA, x, y int, s string, c color.RGBA) {
	d := font.Drawer{Dst: img, Src: image.NewUniform(c), Face: basicfont.Face7x13, Dot: fixed.P(x, y)}
	d.DrawString(s)
}

func width(s string) int {
	return font.MeasureString(basicfont.Face7x13, s).Round()
}
