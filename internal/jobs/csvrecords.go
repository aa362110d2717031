package jobs

import (
	"bufio"
	"bytes"
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"os"
)

// csvRecords splits a CSV file into records (RFC 4180) by its physical
// lines, so that every line is accounted for: a record is one line, or
// the lines a quoted field runs over. A record that cannot be read is an
// error naming the line it starts on; when it ran over several lines (a
// stray quote opens a field that swallows the lines after it), only its
// first line is the error, and the reading starts again at the next line,
// so that a stray quote never costs the rows after it. A record is read
// whole into memory, never more than MaxLineBytes of it: a quoted field
// still open past that is its first line's error.
type csvRecords struct {
	lineReader
	buf  []byte // the record's text, lines joined by "\n"
	out  []byte // the record's fields, unquoted, back to back
	ends []int  // where each field ends in out
}

// csvRecord is one record: its fields, or why it cannot be read.
type csvRecord struct {
	Line   int // the line it starts on
	Fields []string
	Err    error
}

// errUnclosed is a quoted field still open at the end of the input or
// past MaxLineBytes.
var errUnclosed = errors.New("a quoted field opened on this line is not closed: " + csv.ErrQuote.Error())

// next returns the next record, or io.EOF after the last; any other error
// is the file's (it could not be read). width, when above zero, is how
// many fields a record must have.
func (r *csvRecords) next(width int) (csvRecord, error) {
	for {
		start, startLine := r.off, r.line+1
		text, n, tooLong, err := r.readLine()
		if err != nil {
			return csvRecord{}, err
		}
		if tooLong {
			return csvRecord{Line: startLine, Err: fmt.Errorf("line %d is longer than %d bytes", startLine, MaxLineBytes)}, nil
		}
		if len(text) == 0 {
			continue // an empty line is no record
		}
		first := start + int64(n)
		r.buf = append(r.buf[:0], text...)
		lines := 1
		for openQuote(r.buf) {
			// A quoted field runs on into the next line.
			more, _, tooLong, err := r.readLine()
			if errors.Is(err, io.EOF) || tooLong || len(r.buf)+1+len(more) > MaxLineBytes {
				return r.broken(startLine, first, errUnclosed)
			}
			if err != nil {
				return csvRecord{}, err
			}
			r.buf = append(append(r.buf, '\n'), more...)
			lines++
		}
		fields, err := r.split(r.buf)
		if err == nil && width > 0 && len(fields) != width {
			err = fmt.Errorf("%d fields, the header has %d", len(fields), width)
		}
		switch {
		case err != nil && lines > 1:
			return r.broken(startLine, first, err)
		case err != nil:
			return csvRecord{Line: startLine, Fields: fields, Err: fmt.Errorf("line %d: %w", startLine, err)}, nil
		}
		return csvRecord{Line: startLine, Fields: fields}, nil
	}
}

// broken is the error record of a record that ran over several lines from
// startLine: the reading starts again at the line after it, at offset
// next, so that those lines are read as records of their own.
func (r *csvRecords) broken(startLine int, next int64, err error) (csvRecord, error) {
	if _, serr := r.f.Seek(next, io.SeekStart); serr != nil {
		return csvRecord{}, serr
	}
	r.br.Reset(r.f)
	r.off, r.line = next, startLine
	return csvRecord{Line: startLine, Err: fmt.Errorf("line %d: %w (the record from this line on is skipped; the lines after it are read as rows)", startLine, err)}, nil
}

// lineReader reads a file's physical lines, for either format.
type lineReader struct {
	f   *os.File
	br  *bufio.Reader // reads f
	off int64         // the offset in the file of br's next byte
	// line is the number of the last line read, from 1.
	line int
}

func (r *lineReader) Close() error { return r.f.Close() }

// readLine returns the next line without its line ending, valid until
// the next call, and how many bytes it took with its ending; tooLong when
// it is longer than MaxLineBytes (its bytes are skipped, not kept, and
// its text is not to be read).
func (r *lineReader) readLine() (text []byte, n int, tooLong bool, err error) {
	var long []byte
	skipped := false
	for {
		chunk, err := r.br.ReadSlice('\n')
		n += len(chunk)
		r.off += int64(len(chunk))
		full := errors.Is(err, bufio.ErrBufferFull)
		if !full && err != nil && !errors.Is(err, io.EOF) {
			return nil, 0, false, err
		}
		if long == nil && !full && !skipped {
			// The common case: the whole line in the reader's buffer.
			if errors.Is(err, io.EOF) && len(chunk) == 0 {
				return nil, 0, false, io.EOF
			}
			r.line++
			return trimEOL(chunk), n, false, nil
		}
		if !skipped && len(long)+len(chunk) <= MaxLineBytes+2 {
			long = append(long, chunk...)
		} else {
			skipped, long = true, long[:0]
		}
		if full {
			continue
		}
		r.line++
		t := trimEOL(long) // empty when skipped
		return t, n, skipped || len(t) > MaxLineBytes, nil
	}
}

// openQuote reports whether text ends inside a quoted field: one that
// starts with a quote and has not been closed. A quote inside a field not
// quoted opens nothing (split refuses it).
func openQuote(text []byte) bool {
	for i := 0; i < len(text); {
		if text[i] == '"' {
			// A quoted field: to its closing quote, "" being a quote.
			for i++; ; i += 2 {
				j := bytes.IndexByte(text[i:], '"')
				if j < 0 {
					return true
				}
				i += j
				if i+1 >= len(text) || text[i+1] != '"' {
					i++
					break
				}
			}
		}
		j := bytes.IndexByte(text[i:], ',')
		if j < 0 {
			return false
		}
		i += j + 1
	}
	return false
}

// split reads one record's fields as RFC 4180 says: separated by commas,
// a field quoted when it starts with a quote, "" a quote inside it; a
// quote in a field not quoted, or anything but a comma after a closing
// quote, is an error (encoding/csv's, without LazyQuotes).
func (r *csvRecords) split(text []byte) ([]string, error) {
	r.out, r.ends = r.out[:0], r.ends[:0]
	for i := 0; ; {
		if i < len(text) && text[i] == '"' {
			i++
			for {
				j := bytes.IndexByte(text[i:], '"')
				if j < 0 {
					return nil, csv.ErrQuote
				}
				r.out = append(r.out, text[i:i+j]...)
				i += j + 1
				if i < len(text) && text[i] == '"' {
					r.out = append(r.out, '"')
					i++
					continue
				}
				break
			}
			if i < len(text) && text[i] != ',' {
				return nil, csv.ErrQuote
			}
		} else {
			j := bytes.IndexByte(text[i:], ',')
			if j < 0 {
				j = len(text) - i
			}
			if bytes.IndexByte(text[i:i+j], '"') >= 0 {
				return nil, csv.ErrBareQuote
			}
			r.out = append(r.out, text[i:i+j]...)
			i += j
		}
		r.ends = append(r.ends, len(r.out))
		if i >= len(text) {
			break
		}
		i++ // the comma
	}
	// One string for the record, sliced into its fields, as encoding/csv
	// does.
	all := string(r.out)
	fields := make([]string, len(r.ends))
	prev := 0
	for k, end := range r.ends {
		fields[k] = all[prev:end]
		prev = end
	}
	return fields, nil
}
