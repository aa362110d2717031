package httpcall

import (
	"bytes"
	"errors"
	"io"
	"strings"
	"testing"
	"testing/iotest"
)

func TestReadAll(t *testing.T) {
	body := strings.Repeat("0123456789", 200) // 2,000 bytes
	broken := errors.New("connection reset")
	for _, c := range []struct {
		name     string
		r        func() io.Reader
		declared int64
		want     string
		err      error
	}{
		{"declared exactly", func() io.Reader { return strings.NewReader(body) }, 2000, body, nil},
		{"read a byte at a time", func() io.Reader { return iotest.OneByteReader(strings.NewReader(body)) }, 2000, body, nil},
		{"unknown length", func() io.Reader { return strings.NewReader(body) }, -1, body, nil},
		{"declared shorter than sent", func() io.Reader { return strings.NewReader(body) }, 100, body, nil},
		{"declared longer than sent", func() io.Reader { return strings.NewReader(body) }, 5000, body, nil},
		{"declared over the presized bound", func() io.Reader { return strings.NewReader(body) }, maxPresized + 1, body, nil},
		{"broken off", func() io.Reader { return io.MultiReader(strings.NewReader(body[:700]), iotest.ErrReader(broken)) }, 2000, body[:700], broken},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, err := ReadAll(c.r(), c.declared)
			if !errors.Is(err, c.err) {
				t.Fatalf("error %v, want %v", err, c.err)
			}
			if string(got) != c.want {
				t.Fatalf("read %d bytes, want %d", len(got), len(c.want))
			}
		})
	}
}

// A body of the declared length is read into one allocation.
func TestReadAllDeclaredIsOneAllocation(t *testing.T) {
	body := bytes.Repeat([]byte("x"), 2000)
	r := bytes.NewReader(body)
	allocs := testing.AllocsPerRun(100, func() {
		r.Reset(body)
		if b, err := ReadAll(r, int64(len(body))); err != nil || len(b) != len(body) {
			t.Fatalf("read %d bytes, %v", len(b), err)
		}
	})
	if allocs != 1 {
		t.Fatalf("%v allocations, want 1", allocs)
	}
}
