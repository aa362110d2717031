//go:build ignore

// Draws the plugin's icon, .claude-plugin/icon.png: a white "1" on a
// dark blue disc, 512 px square (the size Claude Code's plugin directory
// asks for at least). Run from the repository root:
//
//	go run scripts/icon.go
package main

import (
	"image"
	"image/color"
	"image/png"
	"log"
	"os"
)

func main() {
	const size = 512
	img := image.NewNRGBA(image.Rect(0, 0, size, size))
	blue := color.NRGBA{0x1d, 0x3b, 0x6e, 0xff}
	white := color.NRGBA{0xff, 0xff, 0xff, 0xff}
	in := func(x, y, x0, y0, x1, y1 int) bool { return x >= x0 && x < x1 && y >= y0 && y < y1 }
	stem := func(x, y int) bool { return in(x, y, 232, 112, 296, 400) }
	foot := func(x, y int) bool { return in(x, y, 176, 352, 352, 400) }
	flag := func(x, y int) bool { return in(x, y, 176, 112, 232, 160) && y-112 >= (232-x)*48/56 }
	for y := 0; y < size; y++ {
		for x := 0; x < size; x++ {
			dx, dy := x-size/2, y-size/2
			switch {
			case dx*dx+dy*dy > 250*250:
				// transparent outside the disc
			case stem(x, y), foot(x, y), flag(x, y):
				img.SetNRGBA(x, y, white)
			default:
				img.SetNRGBA(x, y, blue)
			}
		}
	}
	f, err := os.Create(".claude-plugin/icon.png")
	if err != nil {
		log.Fatal(err)
	}
	if err := png.Encode(f, img); err != nil {
		log.Fatal(err)
	}
	if err := f.Close(); err != nil {
		log.Fatal(err)
	}
}
