package jobs

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"system1/internal/decision"
	"system1/internal/jsonx"
	"system1/internal/systemone"
)

// Error row types: the "type" of an error row's "error".
const (
	// ErrorInvalidRow is an input row that could not be read or asked.
	ErrorInvalidRow = "invalid_row"
	// ErrorRejected is a row the decider refused (a 4xx: a state over a
	// limit, a question its model cannot take).
	ErrorRejected = "rejected"
	// ErrorMalformedReply is an answer that failed the wire's checks.
	ErrorMalformedReply = "malformed_reply"
	// ErrorFailed is any other failure of the row.
	ErrorFailed = "failed"
)

// rowError is the "error" of an error row.
type rowError struct {
	Type    string `json:"type"`
	Message string `json:"message"`
	// Status is the HTTP status a remote decider answered, if any.
	Status int `json:"status,omitempty"`
	// Line is the row's line in the input.
	Line int `json:"line"`
}

// classify names a row's failure for its error row.
func classify(row inputRow, err error) rowError {
	e := rowError{Type: ErrorFailed, Message: err.Error(), Line: row.Line}
	var se *systemone.StatusError
	switch {
	case row.Err != nil:
		e.Type = ErrorInvalidRow
	case errors.As(err, &se):
		e.Status, e.Message = se.Code, se.Message
		// A 5xx that outlived the retries (a 500: see
		// RemoteDecider.Retries) broke the decider: no refusal of the row.
		if se.Code < 500 {
			e.Type = ErrorRejected
		}
	case errors.Is(err, systemone.ErrMalformed):
		e.Type = ErrorMalformedReply
	}
	return e
}

// lineStart is how every line a run writes begins, answer or error, as
// resume knows a torn one by.
var lineStart = []byte(`{"id":`)

// appendAnswerLine writes a row's answer line: the Jev response (model,
// answers, usage, latency_ms) with the row's id first.
func appendAnswerLine(b []byte, id json.RawMessage, job decision.Request, res Result, latency time.Duration) []byte {
	b = append(b, lineStart...)
	b = append(b, id...)
	b = append(b, ',')
	start := len(b)
	resp := systemone.Response{Model: res.Model, Questions: job.Questions, Answers: res.Answers, Usage: res.Usage, Latency: latency}
	b = resp.AppendJSON(b)
	// The response opens its own object; the line's is already open.
	b = append(b[:start], b[start+1:]...)
	return append(b, '\n')
}

// appendErrorLine writes a row's error line: {"id", "error"}, the id null
// when the row had none that could be read.
func appendErrorLine(b []byte, id json.RawMessage, e rowError) []byte {
	b = append(b, lineStart...)
	if id == nil {
		b = append(b, "null"...)
	} else {
		b = append(b, id...)
	}
	b = append(b, `,"error":`...)
	j, _ := json.Marshal(e) // strings and ints always marshal
	b = append(b, j...)
	return append(b, "}\n"...)
}

// checkResult refuses a decider's result that does not answer the job's
// questions in their shape, which the line writer relies on.
func checkResult(job decision.Request, res Result) error {
	if len(res.Answers) != len(job.Questions) {
		return fmt.Errorf("the decider returned %d answers for %d questions", len(res.Answers), len(job.Questions))
	}
	for i, q := range job.Questions {
		a := res.Answers[i]
		if a.Kind != q.Kind {
			return fmt.Errorf("question %s: the decider answered a %s, asked a %s", q.ID, a.Kind, q.Kind)
		}
		if q.Kind != decision.Noul && len(a.Probabilities) != len(q.Options) {
			return fmt.Errorf("question %s: %d probabilities for %d options", q.ID, len(a.Probabilities), len(q.Options))
		}
	}
	return nil
}

// resume reads the answers already in out against the input's rows,
// which it consumes as far as they go, and tallies them in t against its
// job. It returns how many bytes of out are whole lines and how many rows
// they answer. The part after the last newline is a line torn by a crash:
// it is not counted, and the caller truncates it; unless it is not the
// start of an answer line, which refuses the resume. A line that is not the
// answer to its row (another id, another job's questions) refuses the
// resume, so that a run never appends to another input's answers.
func resume(ctx context.Context, out io.Reader, rows rowReader, t *tally) (size int64, done int, err error) {
	br := bufio.NewReaderSize(out, 64<<10)
	var buf []byte
	for {
		chunk, err := br.ReadSlice('\n')
		buf = append(buf, chunk...)
		if len(buf) > maxAnswerLine {
			// No answer line is that long: memory stays bounded whatever
			// the file holds.
			return 0, 0, fmt.Errorf("line %d is longer than %d bytes: %w", done+1, maxAnswerLine, ErrOtherInput)
		}
		if errors.Is(err, bufio.ErrBufferFull) {
			continue
		}
		if errors.Is(err, io.EOF) {
			// buf, if any, is a line torn by a crash: the start of an
			// answer line, or zeros where a power cut left the file
			// longer than what reached the disk. Any other text is no
			// run's.
			if t := bytes.TrimRight(buf, "\x00"); len(t) > 0 && !bytes.HasPrefix(t, lineStart) && !bytes.HasPrefix(lineStart, t) {
				return 0, 0, fmt.Errorf("line %d (the last, without a newline) is not the start of an answer line: %w", done+1, ErrOtherInput)
			}
			return size, done, nil
		}
		if err != nil {
			return 0, 0, err
		}
		n := done + 1
		if n%4096 == 0 && ctx.Err() != nil {
			return 0, 0, ctx.Err()
		}
		row, rerr := rows.Next()
		if errors.Is(rerr, io.EOF) {
			return 0, 0, fmt.Errorf("line %d: the answers have more rows than the input: %w", n, ErrOtherInput)
		}
		if rerr != nil {
			return 0, 0, rerr
		}
		if err := t.resumed(buf, row); err != nil {
			return 0, 0, fmt.Errorf("line %d: %w", n, err)
		}
		size += int64(len(buf))
		done++
		buf = buf[:0]
	}
}

// maxAnswerLine bounds a line resume reads: far more than an answer to
// the most questions a request may ask.
const maxAnswerLine = 64 << 20

// errLocked is openOutput's refusal of a file another run is writing.
var errLocked = errors.New("another run is writing this file (one run at a time answers into a file); wait for it to end, or stop it")

// ErrOtherInput is resume's refusal of answers that are not the input's.
var ErrOtherInput = errors.New("the answers are not this job's; write them to another file, or remove it to start over")

// resumed counts a line written by an earlier run for row: its id must
// be the row's, and an answer must answer the job's questions.
func (t *tally) resumed(line []byte, row inputRow) error {
	if !json.Valid(line) {
		return fmt.Errorf("not a JSON line: %w", ErrOtherInput)
	}
	ms, err := jsonx.Members(line)
	if err != nil {
		return fmt.Errorf("not a JSON object: %w", ErrOtherInput)
	}
	id, _ := jsonx.Lookup(ms, "id")
	want := row.ID
	if want == nil {
		want = json.RawMessage("null")
	}
	if !bytes.Equal(id, want) {
		return fmt.Errorf("id %s, but the input's row there (line %d) has id %s: %w", id, row.Line, want, ErrOtherInput)
	}
	if raw, ok := jsonx.Lookup(ms, "error"); ok {
		var e rowError
		if json.Unmarshal(raw, &e) != nil || e.Type == "" {
			return fmt.Errorf("an error without a type: %w", ErrOtherInput)
		}
		t.failed(e.Type)
		return nil
	}
	if row.Err != nil {
		return fmt.Errorf("an answer to the input's unreadable row (line %d): %w", row.Line, ErrOtherInput)
	}
	reply, err := systemone.ParseResponse(t.job, line)
	if err != nil {
		return fmt.Errorf("does not answer this job's questions (%v): %w", err, ErrOtherInput)
	}
	t.answered(row, reply.Answers, reply.Usage)
	return nil
}

// openOutput opens path for appending after resume, creating it (and
// syncing its directory, so that the file's name survives a power cut)
// when it does not exist. A path that exists and is not a regular file (a
// pipe such as /dev/stdout, a terminal, a device) is a stream: opened for
// writing only, never read back, truncated or synced, so the run neither
// resumes nor reads from it. Opening a named pipe waits for its reader, no
// longer than ctx.
func openOutput(ctx context.Context, path string) (f *os.File, stream bool, err error) {
	if fi, err := os.Stat(path); err == nil && !fi.Mode().IsRegular() {
		type opened struct {
			f   *os.File
			err error
		}
		ch := make(chan opened, 1)
		go func() {
			f, err := os.OpenFile(path, os.O_WRONLY, 0)
			ch <- opened{f, err}
		}()
		select {
		case o := <-ch:
			return o.f, true, o.err
		case <-ctx.Done():
			go func() {
				if o := <-ch; o.f != nil {
					o.f.Close()
				}
			}()
			return nil, true, ctx.Err()
		}
	}
	f, err = os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o644)
	created := err == nil
	if errors.Is(err, os.ErrExist) {
		f, err = os.OpenFile(path, os.O_RDWR, 0)
	}
	if err != nil {
		return nil, false, err
	}
	// Two runs appending to one file would interleave their lines.
	if err := lockOutput(f); err != nil {
		f.Close()
		return nil, false, fmt.Errorf("%s: %w", path, err)
	}
	if !created {
		return f, false, nil
	}
	if d, err := os.Open(filepath.Dir(path)); err == nil {
		_ = d.Sync() // best effort: not every file system syncs directories
		d.Close()
	}
	return f, false, nil
}
