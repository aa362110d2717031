package mcpserver

import (
	"context"
	"encoding/json"
	"io"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
)

// syncBuffer is stdout for a transport under test: safe for the
// transport's writes and the test's reads at once.
type syncBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// drainSession connects a transport over input, reads every message it
// hands on until the end of input would come next, and returns the
// connection, its calls, and stdout.
func drainSession(t *testing.T, input string, grace time.Duration) (*lineConn, []*jsonrpc.Request, *syncBuffer) {
	t.Helper()
	out := &syncBuffer{}
	conn, err := (&LineTransport{Reader: strings.NewReader(input), Writer: out, DrainGrace: grace}).Connect(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	c := conn.(*lineConn)
	var calls []*jsonrpc.Request
	for range strings.Count(input, "\n") {
		msg, err := c.Read(context.Background())
		if err != nil {
			t.Fatalf("read: %v", err)
		}
		if req, ok := msg.(*jsonrpc.Request); ok && req.IsCall() {
			calls = append(calls, req)
		}
	}
	return c, calls, out
}

// answer writes the SDK's answer to req (t.Error only: it is called from
// other goroutines too).
func answer(t *testing.T, c *lineConn, req *jsonrpc.Request) {
	t.Helper()
	if err := c.Write(context.Background(), &jsonrpc.Response{ID: req.ID, Result: json.RawMessage(`{"answered":true}`)}); err != nil {
		t.Error(err)
	}
}

const drainInput = `{"jsonrpc":"2.0","id":1,"method":"tools/list"}
{"jsonrpc":"2.0","method":"notifications/initialized"}
{"jsonrpc":"2.0","id":"two","method":"tools/call","params":{"name":"system1_health"}}
`

// The end of stdin reaches the SDK only after every call read before it
// was answered (the SDK writes nothing once reading has ended);
// notifications are not waited for.
func TestDrainHoldsTheEndUntilCallsAreAnswered(t *testing.T) {
	c, calls, out := drainSession(t, drainInput, time.Hour)
	if len(calls) != 2 {
		t.Fatalf("calls %v", calls)
	}
	answer(t, c, calls[0])
	go func() {
		// A moment later, so that a Read that does not wait comes back
		// first; a Read that waits passes however long this takes.
		time.Sleep(50 * time.Millisecond)
		answer(t, c, calls[1])
	}()
	_, err := c.Read(context.Background())
	output := out.String() // stdout when the SDK would stop writing
	if err != io.EOF {
		t.Errorf("the end of input read as %v, want io.EOF", err)
	}
	if strings.Count(output, `"answered":true`) != 2 {
		t.Errorf("the end of input came before both answers were written:\n%s", output)
	}
}

// A call still unanswered when the drain grace runs out gets one JSON-RPC
// error naming the grace, with its id; the SDK's late answer is dropped,
// so that it is answered exactly once.
func TestDrainGraceAnswersTheRest(t *testing.T) {
	c, calls, out := drainSession(t, drainInput, time.Millisecond)
	answer(t, c, calls[0])
	if _, err := c.Read(context.Background()); err != io.EOF {
		t.Fatalf("the end of input read as %v, want io.EOF", err)
	}
	answer(t, c, calls[1]) // too late
	lines := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
	if len(lines) != 2 {
		t.Fatalf("want one reply per call, got:\n%s", out)
	}
	var reply struct {
		ID    json.RawMessage `json:"id"`
		Error *jsonrpc.Error  `json:"error"`
	}
	if err := json.Unmarshal([]byte(lines[1]), &reply); err != nil {
		t.Fatal(err)
	}
	if string(reply.ID) != `"two"` || reply.Error == nil || reply.Error.Code != jsonrpc.CodeInternalError ||
		!strings.Contains(reply.Error.Message, "drain grace") || !strings.Contains(reply.Error.Message, "--drain-grace") {
		t.Errorf("the unanswered call's reply: %s", lines[1])
	}
}

// A negative grace hands the end of input on at once, answered or not.
func TestNoDrainGrace(t *testing.T) {
	c, _, out := drainSession(t, drainInput, -1)
	if _, err := c.Read(context.Background()); err != io.EOF {
		t.Fatalf("the end of input read as %v, want io.EOF", err)
	}
	if out.String() != "" {
		t.Errorf("wrote %q", out)
	}
}
