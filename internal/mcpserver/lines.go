package mcpserver

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"regexp"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"system1/internal/jsonx"
)

// DefaultMaxLineBytes bounds one line read from stdin: twice the HTTP
// face's default body limit, room for a decide request and its JSON-RPC
// envelope and escaping.
const DefaultMaxLineBytes = 8 << 20

// DefaultDrainGrace is how long the server goes on answering the requests
// it read before stdin closed: five times the gateway's default deadline
// for one decide call, room for a few calls still running.
const DefaultDrainGrace = 30 * time.Second

// LineTransport is MCP's stdio transport (one JSON-RPC message a line)
// that answers a bad line itself and keeps serving, where the SDK's
// IOTransport ends the session on the first line it cannot decode. A line
// that is not JSON gets a -32700 parse error, JSON that is not a request
// or response (a number, an array, a batch, an id of the wrong type) a
// -32600 invalid request; both with id null unless the line's id could be
// read. A line over MaxLineBytes is discarded as it is read (memory stays
// bounded) and answered -32600. Blank lines are skipped. Everything else
// is the SDK's.
//
// When stdin ends, the SDK stops writing at once, so a client that writes
// its requests and closes its end (a script, `echo ... | system1 mcp`)
// would get no answers. The transport therefore holds the end of input
// back from the SDK until every request it handed over has been answered,
// for at most DrainGrace (the drain grace); a request still unanswered
// then gets a -32603 error naming the grace, so that every request read
// gets exactly one reply.
type LineTransport struct {
	Reader io.Reader
	Writer io.Writer
	// MaxLineBytes bounds a line, its end of line excluded (0:
	// DefaultMaxLineBytes).
	MaxLineBytes int
	// DrainGrace bounds how long the requests read before the end of
	// stdin are waited for (0: DefaultDrainGrace; negative: not at all).
	DrainGrace time.Duration
	Log        *slog.Logger
}

var _ mcp.Transport = (*LineTransport)(nil)

// Connect starts reading lines; it is called once, by the server.
func (t *LineTransport) Connect(context.Context) (mcp.Connection, error) {
	c := &lineConn{
		w:        t.Writer,
		log:      cmp.Or(t.Log, slog.New(slog.DiscardHandler)),
		incoming: make(chan jsonrpc.Message),
		done:     make(chan struct{}),
		closed:   make(chan struct{}),
		initIDs:  map[jsonrpc.ID]bool{},
		pending:  map[jsonrpc.ID]bool{},
		answered: make(chan struct{}, 1),
		grace:    cmp.Or(t.DrainGrace, DefaultDrainGrace), // a negative grace stays: no wait
	}
	go c.readLoop(t.Reader, cmp.Or(max(t.MaxLineBytes, 0), DefaultMaxLineBytes))
	return c, nil
}

// lineConn is one session's connection over a LineTransport.
type lineConn struct {
	wmu sync.Mutex // one line at a time on the writer
	w   io.Writer
	log *slog.Logger

	incoming chan jsonrpc.Message // good messages, for Read
	done     chan struct{}        // closed when reading stopped; readErr says why
	readErr  error
	closed   chan struct{}
	once     sync.Once

	// mu guards the calls' records below.
	mu sync.Mutex
	// initIDs are the ids of initialize calls seen; initialized is set
	// when one of them succeeds. The SDK answers requests before that
	// with an error without a code, which Write gives one.
	initIDs     map[jsonrpc.ID]bool
	initialized bool

	// pending are the ids of the calls handed to the SDK and not answered
	// yet; answered gets a token when one is. gaveUp is set when the
	// drain grace ran out and the transport answered the rest itself: a
	// late answer is then dropped.
	grace    time.Duration
	pending  map[jsonrpc.ID]bool
	gaveUp   bool
	answered chan struct{}
}

// readLoop reads lines until the reader ends, answering bad ones and
// handing good ones to Read.
func (c *lineConn) readLoop(r io.Reader, max int) {
	defer close(c.done)
	lr := newLineReader(r, max)
	for {
		line, tooLong, err := lr.next()
		switch {
		case tooLong:
			c.reject(rejection(nil, jsonrpc.CodeInvalidRequest, fmt.Sprintf("invalid request: the line is longer than %d bytes, the most one message may take (system1 mcp --max-line-bytes)", max)), lr.n)
		case len(line) > 0:
			msg, reply := Classify(line)
			if reply != nil {
				c.reject(reply, len(line))
			} else if msg != nil {
				select {
				case c.incoming <- msg:
				case <-c.closed:
					return
				}
			}
		}
		if err != nil {
			c.readErr = err
			return
		}
	}
}

func (c *lineConn) reject(reply []byte, n int) {
	c.log.Warn("bad line on stdin answered with an error", "request_id", "-", "bytes", n, "reply", string(reply))
	_ = c.writeLine(reply)
}

func (c *lineConn) writeLine(data []byte) error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	_, err := c.w.Write(append(data, '\n'))
	return err
}

// Read returns the next good message. At the end of stdin it first
// drains: it returns the end only when every call it returned has been
// answered, or the drain grace ran out.
func (c *lineConn) Read(ctx context.Context) (jsonrpc.Message, error) {
	select {
	case <-ctx.Done():
		return nil, ctx.Err()
	case msg := <-c.incoming:
		if req, ok := msg.(*jsonrpc.Request); ok && req.IsCall() {
			c.mu.Lock()
			if req.Method == "initialize" {
				c.initIDs[req.ID] = true
			}
			c.pending[req.ID] = true
			c.mu.Unlock()
		}
		return msg, nil
	case <-c.done:
		return nil, c.drain(ctx)
	case <-c.closed:
		return nil, io.EOF
	}
}

// drain waits, after the end of stdin, until no call is pending or the
// drain grace runs out; then it answers what is still pending with an
// error and returns why reading ended.
func (c *lineConn) drain(ctx context.Context) error {
	if c.grace < 0 {
		return c.readErr
	}
	timer := time.NewTimer(c.grace)
	defer timer.Stop()
	for {
		c.mu.Lock()
		n := len(c.pending)
		c.mu.Unlock()
		if n == 0 {
			return c.readErr
		}
		select {
		case <-c.answered:
		case <-timer.C:
			c.giveUp()
			return c.readErr
		case <-ctx.Done():
			return ctx.Err()
		case <-c.closed:
			return io.EOF
		}
	}
}

// giveUp answers every call still pending with an internal error, so that
// each request read gets one reply, and drops the SDK's late answers.
func (c *lineConn) giveUp() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.gaveUp = true
	msg := fmt.Sprintf("stdin closed and this request was not answered within the drain grace (%v, system1 mcp --drain-grace)", c.grace)
	for id := range c.pending {
		raw, _ := json.Marshal(id.Raw()) // an id the transport itself read as a string or an integer
		c.log.Warn("request unanswered when the drain grace ran out", "request_id", "-", "id", id.Raw(), "grace", c.grace)
		_ = c.writeLine(rejection(raw, jsonrpc.CodeInternalError, msg))
		delete(c.pending, id)
	}
}

// writeReply writes the reply to the call id and then records that it
// was answered, so that the end of input, which waits for every call to
// be answered, comes after the reply's line is out (once reading has
// ended the process may exit). It writes nothing when the drain grace
// already ran out and the transport answered the call itself. The
// lock (mu) is held across the write, as giveUp holds it across its
// own, so that a call is answered once.
func (c *lineConn) writeReply(id jsonrpc.ID, data []byte) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.gaveUp {
		return nil
	}
	err := c.writeLine(data)
	if c.pending[id] {
		delete(c.pending, id)
		select {
		case c.answered <- struct{}{}:
		default:
		}
	}
	return err
}

// Write sends one message on its own line. An error reply without a
// JSON-RPC code (the SDK's for a request before initialize, for
// initialize params it cannot decode, a second initialize, or a failure
// of its own) gets one: invalid params for those params, invalid request
// for a second initialize and before the session is initialized, internal
// error after.
func (c *lineConn) Write(ctx context.Context, msg jsonrpc.Message) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	resp, isResp := msg.(*jsonrpc.Response)
	if isResp {
		msg = c.coded(resp)
	}
	data, err := jsonrpc.EncodeMessage(msg)
	if err != nil {
		return fmt.Errorf("encoding a message: %w", err)
	}
	if isResp {
		return c.writeReply(resp.ID, data)
	}
	return c.writeLine(data)
}

func (c *lineConn) coded(resp *jsonrpc.Response) *jsonrpc.Response {
	c.mu.Lock()
	if c.initIDs[resp.ID] && resp.Error == nil {
		c.initialized = true
	}
	initialized, isInit := c.initialized, c.initIDs[resp.ID]
	c.mu.Unlock()
	if resp.Error == nil {
		return resp
	}
	var wire *jsonrpc.Error
	if errors.As(resp.Error, &wire) && wire.Code != 0 {
		return resp
	}
	code, msg := int64(jsonrpc.CodeInternalError), resp.Error.Error()
	switch {
	case isInit && strings.HasPrefix(msg, "handling 'initialize': "):
		// The SDK's error for initialize params it cannot decode.
		code = jsonrpc.CodeInvalidParams
	case isInit && initialized:
		// The SDK's error for a second initialize: the client's.
		code = jsonrpc.CodeInvalidRequest
	case !initialized:
		code, msg = jsonrpc.CodeInvalidRequest, msg+": send initialize first"
	}
	out := *resp
	out.Error = &jsonrpc.Error{Code: code, Message: msg}
	return &out
}

// Close stops reading; stdin itself is left open (closing it does not
// reliably unblock a read).
func (c *lineConn) Close() error {
	c.once.Do(func() { close(c.closed) })
	return nil
}

// SessionID is empty: stdio has one session.
func (c *lineConn) SessionID() string { return "" }

// lineReader reads '\n'-terminated lines of at most max bytes, without
// ever holding more than max (plus a read buffer) of a longer one.
type lineReader struct {
	r   *bufio.Reader
	max int
	buf []byte
	n   int // the length of the last line read, end of line included
}

func newLineReader(r io.Reader, max int) *lineReader {
	return &lineReader{r: bufio.NewReaderSize(r, 64<<10), max: max}
}

// next returns the next line without its end of line ("\n" or "\r\n"),
// or tooLong when it was over max bytes (its bytes are dropped). A last
// line that stdin closed before its end is returned like any other, with
// the error (io.EOF) that ended it; an error with no line means nothing
// is left.
func (l *lineReader) next() (line []byte, tooLong bool, err error) {
	l.buf, l.n = l.buf[:0], 0
	for {
		frag, err := l.r.ReadSlice('\n')
		l.n += len(frag)
		if !tooLong {
			if len(l.buf)+len(frag) > l.max+2 { // room for "\r\n"
				tooLong, l.buf = true, l.buf[:0]
			} else {
				l.buf = append(l.buf, frag...)
			}
		}
		if errors.Is(err, bufio.ErrBufferFull) {
			continue
		}
		line := bytes.TrimSuffix(bytes.TrimSuffix(l.buf, []byte("\n")), []byte("\r"))
		tooLong = tooLong || len(line) > l.max
		if tooLong {
			line = nil
		}
		return line, tooLong, err
	}
}

// integerID is the JSON-RPC ids the SDK carries exactly: integers within
// float64's exact range (it decodes ids through float64).
var integerID = regexp.MustCompile(`^-?(0|[1-9][0-9]{0,15})$`)

const maxExactID = 1<<53 - 1

const jsonSpace = " \t\r\n"

// Classify reads one line: a message for the SDK, or the error reply to
// send instead (exactly one of the two; neither for a blank line).
func Classify(line []byte) (jsonrpc.Message, []byte) {
	line = bytes.Trim(line, jsonSpace) // JSON's whitespace only: U+00A0 is not
	if len(line) == 0 {
		return nil, nil
	}
	if !utf8.Valid(line) {
		return nil, rejection(nil, jsonrpc.CodeParseError, "parse error: the line is not valid UTF-8")
	}
	var v json.RawMessage
	if err := json.Unmarshal(line, &v); err != nil {
		var syn *json.SyntaxError
		if errors.As(err, &syn) {
			return nil, rejection(nil, jsonrpc.CodeParseError, fmt.Sprintf("parse error: %v (at byte %d)", err, syn.Offset))
		}
		return nil, rejection(nil, jsonrpc.CodeParseError, "parse error: "+err.Error())
	}
	switch line[0] {
	case '{':
	case '[':
		return nil, rejection(nil, jsonrpc.CodeInvalidRequest, "invalid request: JSON-RPC batches are not supported (MCP 2025-06-18 removed them): send one message a line")
	default:
		return nil, rejection(nil, jsonrpc.CodeInvalidRequest, "invalid request: a message is a JSON object")
	}
	members, err := jsonx.Members(line)
	if err != nil {
		return nil, rejection(duplicateKeyID(line, err), jsonrpc.CodeInvalidRequest, "invalid request: "+err.Error())
	}
	field := func(key string) (json.RawMessage, bool) { return jsonx.Lookup(members, key) }
	// The id first, so that the other errors can carry it.
	var id json.RawMessage
	if raw, ok := field("id"); ok {
		if msg := checkID(raw); msg != "" {
			return nil, rejection(nil, jsonrpc.CodeInvalidRequest, "invalid request: "+msg)
		}
		id = raw
	}
	bad := func(msg string) (jsonrpc.Message, []byte) {
		return nil, rejection(id, jsonrpc.CodeInvalidRequest, "invalid request: "+msg)
	}
	if v, _ := field("jsonrpc"); string(v) != `"2.0"` {
		return bad(`"jsonrpc" must be "2.0"`)
	}
	if method, ok := field("method"); ok {
		if jsonx.Kind(method) != "string" {
			return bad(`"method" must be a string`)
		}
		if p, ok := field("params"); ok {
			if k := jsonx.Kind(p); k != "object" && k != "array" && k != "null" {
				return bad(`"params" must be an object`)
			}
		}
	} else {
		_, hasResult := field("result")
		e, hasError := field("error")
		switch {
		case id == nil:
			return bad(`a message needs "method" (a request or notification) or "id" with "result" or "error" (a response)`)
		case hasResult == hasError:
			return bad(`a response has exactly one of "result" and "error"`)
		case hasError && jsonx.Kind(e) != "object":
			return bad(`"error" must be an object`)
		}
	}
	msg, err := jsonrpc.DecodeMessage(line)
	if err != nil {
		return bad(err.Error())
	}
	return msg, nil
}

// duplicateKeyID is the id of a line Members refused for a key given
// twice, when that key is not "id" and the id is a valid one (else nil):
// the id is then the line's one, and its reply can carry it.
func duplicateKeyID(line []byte, err error) json.RawMessage {
	var dup *jsonx.DuplicateKeyError
	if !errors.As(err, &dup) || dup.Key == "id" {
		return nil
	}
	var m map[string]json.RawMessage // exact keys, unlike a struct's
	if json.Unmarshal(line, &m) != nil {
		return nil
	}
	if id, ok := m["id"]; ok && checkID(id) == "" {
		return id
	}
	return nil
}

// checkID says what is wrong with a request id ("" when nothing is):
// MCP ids are strings or integers, never null.
func checkID(raw json.RawMessage) string {
	switch jsonx.Kind(raw) {
	case "string":
		// A lone surrogate escape decodes to U+FFFD: the reply would carry
		// another id than the request.
		if !jsonx.TextOK(raw) {
			return `"id" is not a valid string (a lone surrogate escape)`
		}
		return ""
	case "number":
		var n int64
		if !integerID.Match(raw) || json.Unmarshal(raw, &n) != nil || n > maxExactID || n < -maxExactID {
			return fmt.Sprintf(`"id" must be a string or an integer of at most %d`, int64(maxExactID))
		}
		return ""
	}
	return fmt.Sprintf(`"id" must be a string or an integer, not %s`, jsonx.Kind(raw))
}

// rejection is a JSON-RPC error reply; id is the request's id when it
// could be read, else null.
func rejection(id json.RawMessage, code int64, message string) []byte {
	if id == nil {
		id = json.RawMessage("null")
	}
	data, err := json.Marshal(struct {
		JSONRPC string          `json:"jsonrpc"`
		ID      json.RawMessage `json:"id"`
		Error   *jsonrpc.Error  `json:"error"`
	}{"2.0", id, &jsonrpc.Error{Code: code, Message: message}})
	if err != nil { // id was checked to be a JSON string or number
		panic(fmt.Sprintf("mcpserver: encoding an error reply: %v", err))
	}
	return data
}
