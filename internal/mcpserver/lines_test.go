package mcpserver_test

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"system1/internal/fakeengine"
	"system1/internal/gateway"
	"system1/internal/mcpserver"
	"system1/internal/testbin"
)

// rawServer is a running `system1 mcp` driven line by line, as a careless
// or hostile client would: what it writes to stdin is not checked.
type rawServer struct {
	t       *testing.T
	cmd     *exec.Cmd
	stdin   io.WriteCloser
	replies chan map[string]json.RawMessage
	stderr  *testbin.Output
}

func (w *world) startRaw(extra ...string) *rawServer {
	w.t.Helper()
	cmd := exec.Command(bin, append([]string{"mcp", "--config", w.config}, extra...)...)
	cmd.Env = w.env()
	s := &rawServer{t: w.t, cmd: cmd, replies: make(chan map[string]json.RawMessage, 64), stderr: &testbin.Output{}}
	cmd.Stderr = s.stderr
	var err error
	if s.stdin, err = cmd.StdinPipe(); err != nil {
		w.t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		w.t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		w.t.Fatal(err)
	}
	go func() {
		defer close(s.replies)
		sc := bufio.NewScanner(stdout)
		sc.Buffer(nil, 64<<20)
		for sc.Scan() {
			var m map[string]json.RawMessage
			if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
				m = map[string]json.RawMessage{"invalid": json.RawMessage(fmt.Sprintf("%q", sc.Text()))}
			}
			s.replies <- m
		}
	}()
	w.t.Cleanup(func() {
		_ = s.stdin.Close()
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
	})
	return s
}

func (s *rawServer) send(line string) {
	s.t.Helper()
	if _, err := io.WriteString(s.stdin, line); err != nil {
		s.t.Fatalf("writing to stdin: %v\nstderr:\n%s", err, s.stderr)
	}
}

// next is the next reply; the server must answer (a generous bound: a
// missing reply is otherwise a hang).
func (s *rawServer) next() map[string]json.RawMessage {
	s.t.Helper()
	select {
	case m, ok := <-s.replies:
		if !ok {
			s.t.Fatalf("stdout closed: the server is gone\nstderr:\n%s", s.stderr)
		}
		return m
	case <-time.After(30 * time.Second):
		s.t.Fatalf("no reply\nstderr:\n%s", s.stderr)
	}
	return nil
}

// initialize runs the MCP handshake.
func (s *rawServer) initialize() {
	s.t.Helper()
	s.send(`{"jsonrpc":"2.0","id":"init","method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"raw","version":"0"}}}` + "\n")
	if m := s.next(); string(m["id"]) != `"init"` || m["result"] == nil {
		s.t.Fatalf("initialize: %v", m)
	}
	s.send(`{"jsonrpc":"2.0","method":"notifications/initialized"}` + "\n")
}

// healthCall sends a valid tools/call with the given id.
func (s *rawServer) healthCall(id int) {
	s.send(fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"system1_health","arguments":{}}}`+"\n", id))
}

// errCode is a reply's error code, or 0 when it has none.
func errCode(t *testing.T, m map[string]json.RawMessage) int {
	t.Helper()
	if m["error"] == nil {
		return 0
	}
	var e struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	}
	if err := json.Unmarshal(m["error"], &e); err != nil || e.Message == "" {
		t.Errorf("error object %s", m["error"])
	}
	return e.Code
}

// Every bad line gets exactly one JSON-RPC error (a parse error for what
// is not JSON, invalid request for JSON that is not a request) and the
// server keeps serving: the valid call after it is answered too, and the
// process exits 0 when stdin closes.
func TestMalformedLinesKeepServing(t *testing.T) {
	ep := fakeengine.StartSystemOne(t, fakeengine.Reply{})
	w := newWorld(t, chain("", so("jev", ep.URL)))
	s := w.startRaw("--max-line-bytes", "4096")
	s.initialize()
	for i, tc := range []struct {
		line string
		code int
		id   string
	}{
		{`{"jsonrpc":"2.0","id":1,"method":"tools/list"`, -32700, "null"}, // unterminated object
		{`garbage`, -32700, "null"},
		{`42`, -32600, "null"},
		{`"a string"`, -32600, "null"},
		{`null`, -32600, "null"},
		{`[1,2]`, -32600, "null"},
		{`[]`, -32600, "null"},
		{`[{"jsonrpc":"2.0","id":7,"method":"tools/list"}]`, -32600, "null"}, // batches: removed in MCP 2025-06-18
		{`{}`, -32600, "null"},
		{`{"jsonrpc":"1.0","id":3,"method":"tools/list"}`, -32600, "3"},
		{`{"jsonrpc":"2.0","id":3,"method":42}`, -32600, "3"},
		{`{"jsonrpc":"2.0","id":true,"method":"tools/list"}`, -32600, "null"},
		{`{"jsonrpc":"2.0","id":{"a":1},"method":"tools/list"}`, -32600, "null"},
		{`{"jsonrpc":"2.0","id":[1],"method":"tools/list"}`, -32600, "null"},
		{`{"jsonrpc":"2.0","id":null,"method":"tools/list"}`, -32600, "null"},
		{`{"jsonrpc":"2.0","id":1.5,"method":"tools/list"}`, -32600, "null"},
		{`{"jsonrpc":"2.0","id":123456789012345678901234567890,"method":"tools/list"}`, -32600, "null"},
		{`{"jsonrpc":"2.0","id":9007199254740993,"method":"tools/list"}`, -32600, "null"}, // past float64's exact integers
		{`{"jsonrpc":"2.0","id":4,"id":5,"method":"tools/list"}`, -32600, "null"},
		{`{"jsonrpc":"2.0","id":6,"method":"tools/list","params":"x"}`, -32600, "6"},
		{`{"jsonrpc":"2.0","id":8}`, -32600, "8"}, // neither request nor response
		{"{\"jsonrpc\":\"2.0\",\"id\":\"\xff\",\"method\":\"tools/list\"}", -32700, "null"},
		{"{\"jsonrpc\":\"2.0\",\x00\"id\":1,\"method\":\"tools/list\"}", -32700, "null"},
		{strings.Repeat(" ", 5000) + `{"jsonrpc":"2.0","id":9,"method":"tools/list"}`, -32600, "null"}, // over --max-line-bytes
		{strings.Repeat("[", 2000) + strings.Repeat("]", 2000), -32600, "null"},
	} {
		s.send(tc.line + "\n")
		id := 100 + i
		s.healthCall(id)
		var gotErr, gotCall bool
		for !gotErr || !gotCall {
			m := s.next()
			switch string(m["id"]) {
			case fmt.Sprint(id):
				if m["result"] == nil {
					t.Errorf("line %d: the valid call after it failed: %v", i, m)
				}
				gotCall = true
			case tc.id:
				if gotErr {
					t.Errorf("line %d: two replies", i)
				}
				if code := errCode(t, m); code != tc.code || string(m["jsonrpc"]) != `"2.0"` {
					t.Errorf("line %d %.60q: reply %v; want code %d", i, tc.line, m, tc.code)
				}
				gotErr = true
			default:
				t.Fatalf("line %d %.60q: unexpected reply %v", i, tc.line, m)
			}
		}
	}
	_ = s.stdin.Close()
	if err := s.cmd.Wait(); err != nil {
		t.Errorf("exit after stdin closed: %v\n%s", err, s.stderr)
	}
}

// A request before initialize gets a JSON-RPC error with a real code,
// and the session can still be initialized after it.
func TestRequestBeforeInitialize(t *testing.T) {
	ep := fakeengine.StartSystemOne(t, fakeengine.Reply{})
	w := newWorld(t, chain("", so("jev", ep.URL)))
	s := w.startRaw()
	s.send(`{"jsonrpc":"2.0","id":1,"method":"tools/list"}` + "\n")
	m := s.next()
	if string(m["id"]) != "1" || errCode(t, m) != -32600 {
		t.Fatalf("tools/list before initialize: %v", m)
	}
	s.initialize()
	s.healthCall(2)
	if m := s.next(); string(m["id"]) != "2" || m["result"] == nil {
		t.Errorf("after initialize: %v", m)
	}
}

// An initialize whose params do not decode is an invalid-params error
// naming what is wrong, not a request "before initialize", and the
// session can still be initialized after it.
func TestInitializeWithBadParams(t *testing.T) {
	ep := fakeengine.StartSystemOne(t, fakeengine.Reply{})
	s := newWorld(t, chain("", so("jev", ep.URL))).startRaw()
	for i, params := range []string{`{"protocolVersion":7}`, `{"capabilities":7}`, `[1]`} {
		s.send(fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"initialize","params":%s}`+"\n", 100+i, params))
		m := s.next()
		var e struct{ Message string }
		_ = json.Unmarshal(m["error"], &e)
		if string(m["id"]) != fmt.Sprint(100+i) || errCode(t, m) != -32602 || strings.Contains(e.Message, "send initialize first") {
			t.Errorf("initialize with params %s: id %s error %s", params, m["id"], m["error"])
		}
	}
	s.initialize()
	s.healthCall(2)
	if m := s.next(); string(m["id"]) != "2" || m["result"] == nil {
		t.Errorf("after initialize: %v", m)
	}
}

// A second initialize is the client's error, an invalid request, not an
// internal error of the server's, and the session goes on serving.
func TestSecondInitializeIsInvalidRequest(t *testing.T) {
	ep := fakeengine.StartSystemOne(t, fakeengine.Reply{})
	s := newWorld(t, chain("", so("jev", ep.URL))).startRaw()
	s.initialize()
	s.send(`{"jsonrpc":"2.0","id":7,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"raw","version":"0"}}}` + "\n")
	if m := s.next(); string(m["id"]) != "7" || errCode(t, m) != -32600 {
		t.Errorf("a second initialize: id %s error %s; want -32600", m["id"], m["error"])
	}
	s.healthCall(2)
	if m := s.next(); string(m["id"]) != "2" || m["result"] == nil {
		t.Errorf("after the second initialize: %v", m)
	}
}

// What a careless or hostile client may write that is still valid, or
// harmless: each is answered as JSON-RPC says, and the server keeps
// serving.
func TestHostileButValidLines(t *testing.T) {
	ep := fakeengine.StartSystemOne(t, fakeengine.Reply{})
	w := newWorld(t, chain("", so("jev", ep.URL)))
	s := w.startRaw()
	s.initialize()
	expect := func(id string, ok bool) map[string]json.RawMessage {
		t.Helper()
		m := s.next()
		if string(m["id"]) != id || (m["result"] != nil) != ok {
			t.Fatalf("want id %s ok %v; got %v", id, ok, m)
		}
		return m
	}
	// CRLF line endings.
	s.send(`{"jsonrpc":"2.0","id":1,"method":"tools/list"}` + "\r\n")
	expect("1", true)
	// A line split across writes, with a pause between them.
	s.send(`{"jsonrpc":"2.0","id":2,`)
	time.Sleep(50 * time.Millisecond)
	s.send(`"method":"tools/list"}` + "\n")
	expect("2", true)
	// Two messages in one write.
	s.send(`{"jsonrpc":"2.0","id":3,"method":"ping"}` + "\n" + `{"jsonrpc":"2.0","id":4,"method":"ping"}` + "\n")
	a, b := s.next(), s.next()
	if ids := string(a["id"]) + string(b["id"]); ids != "34" && ids != "43" {
		t.Errorf("two pings: %v %v", a, b)
	}
	// A notification with an unknown method, one with odd params, a
	// cancellation of nothing and a response to a request never sent: no
	// reply at all (the next ping's is the next line).
	s.send(`{"jsonrpc":"2.0","method":"notifications/bogus","params":{"a":[1,{"b":null}]}}` + "\n")
	s.send(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":true}}` + "\n")
	s.send(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":99999}}` + "\n")
	s.send(`{"jsonrpc":"2.0","id":"never-sent","result":{}}` + "\n")
	s.send("\n   \n\r\n")
	s.send(`{"jsonrpc":"2.0","id":5,"method":"ping"}` + "\n")
	expect("5", true)
	// An unknown method is -32601, with the id.
	s.send(`{"jsonrpc":"2.0","id":6,"method":"bogus/method"}` + "\n")
	if m := expect("6", false); errCode(t, m) != -32601 {
		t.Errorf("unknown method: %v", m)
	}
	// Ids of every valid form come back as sent: long strings, escapes,
	// negative and the largest exact integers.
	for _, id := range []string{`"` + strings.Repeat("x", 100_000) + `"`, `"\u00e9\n\"\ud83d\ude00"`, `-9007199254740991`, `9007199254740991`, `0`, `""`} {
		s.send(`{"jsonrpc":"2.0","id":` + id + `,"method":"ping"}` + "\n")
		m := s.next()
		var sent, got any
		_ = json.Unmarshal([]byte(id), &sent)
		_ = json.Unmarshal(m["id"], &got)
		if fmt.Sprint(sent) != fmt.Sprint(got) || m["result"] == nil {
			t.Errorf("id %.40s came back as %.40s: %v", id, m["id"], m["error"])
		}
	}
	// Deeply nested arguments reach the tool's own checks.
	s.send(`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"system1_decide","arguments":{"question":"q","context":` +
		strings.Repeat(`{"a":`, 500) + "1" + strings.Repeat("}", 500) + `}}}` + "\n")
	expect("7", true)
	// A decide tool call still works after all of it.
	s.healthCall(8)
	expect("8", true)
}

// stdin closed in the middle of a line: the partial line gets its parse
// error, and the server exits 0 as when a client closes stdin.
func TestStdinClosedMidLine(t *testing.T) {
	ep := fakeengine.StartSystemOne(t, fakeengine.Reply{})
	w := newWorld(t, chain("", so("jev", ep.URL)))
	s := w.startRaw()
	s.initialize()
	s.send(`{"jsonrpc":"2.0","id":1,"method":"tools/li`)
	_ = s.stdin.Close()
	if m := s.next(); string(m["id"]) != "null" || errCode(t, m) != -32700 {
		t.Errorf("the partial line: %v", m)
	}
	if err := s.cmd.Wait(); err != nil {
		t.Errorf("exit: %v\n%s", err, s.stderr)
	}
}

// closedStdin runs `system1 mcp` with input on stdin, closed right after
// it (as `printf ... | system1 mcp` does), and returns the replies by id
// and the exit error. arrived, when not nil, is waited for (or the
// process's end) before release is called: a provider call that is still
// running when stdin has closed.
func closedStdin(t *testing.T, w *world, input string, arrived <-chan struct{}, release func(), extra ...string) (replies map[string]map[string]json.RawMessage, stderr string, err error) {
	t.Helper()
	cmd := exec.Command(bin, append([]string{"mcp", "--config", w.config}, extra...)...)
	cmd.Env = w.env()
	cmd.Stdin = strings.NewReader(input)
	errOut := &testbin.Output{}
	cmd.Stderr = errOut
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	lines := make(chan string)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(stdout)
		sc.Buffer(nil, 64<<20)
		for sc.Scan() {
			lines <- sc.Text()
		}
	}()
	replies = map[string]map[string]json.RawMessage{}
	add := func(l string) {
		var m map[string]json.RawMessage
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Errorf("a line that is not JSON: %q", l)
			return
		}
		if _, dup := replies[string(m["id"])]; dup {
			t.Errorf("a second reply for id %s: %s", m["id"], l)
		}
		replies[string(m["id"])] = m
	}
	if arrived != nil {
	wait:
		for {
			select {
			case <-arrived:
				break wait
			case l, ok := <-lines:
				if !ok {
					t.Fatalf("the server exited before the provider call arrived\nstderr:\n%s", errOut)
				}
				add(l)
			}
		}
		release()
	}
	for l := range lines {
		add(l)
	}
	err = cmd.Wait()
	return replies, errOut.String(), err
}

// show writes replies by id as JSON, for a failure message.
func show(replies map[string]map[string]json.RawMessage) string {
	b, _ := json.Marshal(replies)
	return string(b)
}

const (
	initLine        = `{"jsonrpc":"2.0","id":"init","method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"printf","version":"0"}}}` + "\n"
	initializedLine = `{"jsonrpc":"2.0","method":"notifications/initialized"}` + "\n"
	listLine        = `{"jsonrpc":"2.0","id":2,"method":"tools/list"}` + "\n"
	decideLine      = `{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"system1_decide","arguments":{"question":"Ship it?"}}}` + "\n"
)

// A client that writes its requests and closes stdin at once (a script,
// `printf ... | system1 mcp`) gets an answer to every request the server
// read, and the server then exits 0: the initialize result and the tool
// list, with nothing left waiting.
func TestClosedStdinAnswersWhatWasRead(t *testing.T) {
	w := newWorld(t, "") // no configuration: initialize and tools/list need none
	replies, stderr, err := closedStdin(t, w, initLine+initializedLine+listLine, nil, nil)
	if err != nil {
		t.Errorf("exit: %v\n%s", err, stderr)
	}
	if len(replies) != 2 || replies[`"init"`]["result"] == nil || replies["2"]["result"] == nil {
		t.Fatalf("replies %s\nstderr:\n%s", show(replies), stderr)
	}
	var list struct {
		Tools []struct{ Name string } `json:"tools"`
	}
	if err := json.Unmarshal(replies["2"]["result"], &list); err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tool := range list.Tools {
		names = append(names, tool.Name)
	}
	if !slices.Equal(sorted(names), sorted(mcpserver.Tools)) {
		t.Errorf("tools/list after stdin closed: %v; want %v", names, mcpserver.Tools)
	}
}

// A decide call whose provider is still answering when stdin closes is
// answered with its decision once the provider answers.
func TestClosedStdinWaitsForACallInFlight(t *testing.T) {
	ep := fakeengine.StartSystemOne(t, fakeengine.Reply{Fault: fakeengine.Late})
	w := newWorld(t, chain("", so("jev", ep.URL)))
	replies, stderr, err := closedStdin(t, w, initLine+initializedLine+decideLine, ep.Arrived, ep.Release)
	if err != nil {
		t.Errorf("exit: %v\n%s", err, stderr)
	}
	var res struct {
		IsError           bool             `json:"isError"`
		StructuredContent gateway.Response `json:"structuredContent"`
	}
	if raw := replies["3"]["result"]; raw == nil || json.Unmarshal(raw, &res) != nil || res.IsError || res.StructuredContent.Status != gateway.Decided {
		t.Errorf("the decide call in flight when stdin closed: %s\nstderr:\n%s", show(replies), stderr)
	}
}

// A call still running when the drain grace (--drain-grace) runs out is
// answered with a JSON-RPC error that says so, and the server exits 0
// without waiting for it.
func TestClosedStdinDrainGrace(t *testing.T) {
	ep := fakeengine.StartSystemOne(t, fakeengine.Reply{Fault: fakeengine.Hang})
	w := newWorld(t, chain("  deadline: 10m\n", so("jev", ep.URL, "timeout: 10m")))
	replies, stderr, err := closedStdin(t, w, initLine+initializedLine+decideLine, nil, nil, "--drain-grace", "100ms")
	if err != nil {
		t.Errorf("exit: %v\n%s", err, stderr)
	}
	if replies[`"init"`]["result"] == nil || errCode(t, replies["3"]) != -32603 || !strings.Contains(string(replies["3"]["error"]), "--drain-grace") {
		t.Errorf("replies %s\nstderr:\n%s", show(replies), stderr)
	}
}

// A client that goes away whole (it closed stdout as well as stdin: it
// crashed, or was killed) while a call runs: writing the reply fails, and
// the server still shuts down as it does at the end of input, exit 0 with
// the decision log closed and the answer recorded, where it was killed by
// SIGPIPE on that write.
func TestClientGoneMidCallShutsDownCleanly(t *testing.T) {
	ep := fakeengine.StartSystemOne(t, fakeengine.Reply{Fault: fakeengine.Late})
	w := newWorld(t, chain("", so("jev", ep.URL)))
	cmd := exec.Command(bin, "mcp", "--config", w.config)
	cmd.Env = w.env()
	errOut := &testbin.Output{}
	cmd.Stderr = errOut
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	if _, err := io.WriteString(stdin, initLine+initializedLine+decideLine); err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(stdout)
	if !sc.Scan() || !strings.Contains(sc.Text(), `"id":"init"`) {
		t.Fatalf("initialize: %q\n%s", sc.Text(), errOut)
	}
	select {
	case <-ep.Arrived:
	case <-time.After(30 * time.Second):
		t.Fatalf("the decide call never reached the provider\n%s", errOut)
	}
	// The client goes: both its ends close, then the provider answers.
	_ = stdout.Close()
	_ = stdin.Close()
	ep.Release()
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err = <-done:
	case <-time.After(30 * time.Second):
		_ = cmd.Process.Kill()
		t.Fatalf("the server did not exit\n%s", errOut)
	}
	if err != nil {
		t.Errorf("exit: %v; want status 0\nstderr:\n%s", err, errOut)
	}
	if !strings.Contains(errOut.String(), "decision log closed") || !strings.Contains(errOut.String(), "written=1") {
		t.Errorf("the decision log was not closed with the answer written\nstderr:\n%s", errOut)
	}
}
