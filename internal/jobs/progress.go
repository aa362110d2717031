package jobs

import (
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/term"
)

// progress shows a run's progress: rows written of the total, this run's
// rate, the time left at that rate and the errors so far. On a terminal
// one line is redrawn in place a few times a second; on any other writer
// (a log file, a CI console) a plain line is written every so often.
type progress struct {
	w       io.Writer
	term    bool
	every   time.Duration
	total   int
	resumed int
	begin   time.Time

	written atomic.Int64 // rows in the output, resumed ones included
	errors  atomic.Int64
}

func newProgress(w io.Writer, every time.Duration, total, resumed int, begin time.Time) *progress {
	p := &progress{w: w, every: every, total: total, resumed: resumed, begin: begin}
	p.written.Store(int64(resumed))
	if f, ok := w.(interface{ Fd() uintptr }); ok && term.IsTerminal(int(f.Fd())) {
		p.term, p.every = true, 200*time.Millisecond
	}
	return p
}

// start draws until the returned function is called, which draws the
// last state and returns once drawing has stopped.
func (p *progress) start() (stop func()) {
	if p.w == nil {
		return func() {}
	}
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		tick := time.NewTicker(p.every)
		defer tick.Stop()
		for {
			select {
			case <-tick.C:
				p.draw(false)
			case <-done:
				p.draw(true)
				return
			}
		}
	})
	return func() {
		close(done)
		wg.Wait()
	}
}

// line is the progress as one line of text.
func (p *progress) line(now time.Time) string {
	written := int(p.written.Load())
	elapsed := now.Sub(p.begin)
	s := fmt.Sprintf("%d/%d rows", written, p.total)
	if p.total > 0 {
		s += fmt.Sprintf(" (%.1f%%)", 100*float64(written)/float64(p.total))
	}
	rate := 0.0
	if secs := elapsed.Seconds(); secs > 0 {
		rate = float64(written-p.resumed) / secs
	}
	s += fmt.Sprintf(", %.1f rows/s", rate)
	if left := p.total - written; left > 0 && rate > 0 {
		s += ", ETA " + time.Duration(float64(left)/rate*float64(time.Second)).Round(time.Second).String()
	}
	return s + fmt.Sprintf(", %d errors", p.errors.Load())
}

func (p *progress) draw(last bool) {
	text := p.line(time.Now())
	switch {
	case p.term && last:
		fmt.Fprintf(p.w, "\r\033[K%s\n", text)
	case p.term:
		fmt.Fprintf(p.w, "\r\033[K%s", text)
	default:
		fmt.Fprintln(p.w, text)
	}
}
