package mcpserver

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
)

// session feeds input to a LineTransport connection as stdin and returns
// the messages it hands the SDK and the replies it wrote itself.
func session(t testing.TB, input []byte, max int) (msgs []jsonrpc.Message, replies [][]byte) {
	var out bytes.Buffer
	// Nothing answers the calls here: the end of input is not held back.
	conn, err := (&LineTransport{Reader: bytes.NewReader(input), Writer: &out, MaxLineBytes: max, DrainGrace: -1}).Connect(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for {
		msg, err := conn.Read(context.Background())
		if err != nil {
			if err != io.EOF {
				t.Fatalf("read error %v", err)
			}
			break
		}
		msgs = append(msgs, msg)
	}
	for _, l := range bytes.Split(out.Bytes(), []byte("\n")) {
		if len(l) > 0 {
			replies = append(replies, l)
		}
	}
	if len(out.Bytes()) > 0 && out.Bytes()[out.Len()-1] != '\n' {
		t.Errorf("output does not end with a newline: %q", out.Bytes())
	}
	return msgs, replies
}

// checkReply holds for every reply the transport writes itself: one
// JSON-RPC 2.0 error object, code -32700 or -32600, a message, and an id
// that is null or a valid MCP id.
func checkReply(t testing.TB, reply []byte) {
	var r map[string]json.RawMessage
	dec := json.NewDecoder(bytes.NewReader(reply))
	if err := dec.Decode(&r); err != nil || dec.More() || len(r) != 3 {
		t.Fatalf("reply is not one JSON-RPC error object: %q (%v)", reply, err)
	}
	var e map[string]json.RawMessage
	_ = json.Unmarshal(r["error"], &e)
	var code int64
	var message string
	if string(r["jsonrpc"]) != `"2.0"` || r["id"] == nil || len(e) != 2 ||
		json.Unmarshal(e["code"], &code) != nil || json.Unmarshal(e["message"], &message) != nil || message == "" {
		t.Fatalf("reply %q", reply)
	}
	if code != jsonrpc.CodeParseError && code != jsonrpc.CodeInvalidRequest {
		t.Fatalf("reply code %d: %q", code, reply)
	}
	if id := r["id"]; string(id) != "null" && checkID(id) != "" {
		t.Fatalf("reply id %s", id)
	}
}

// Whatever stdin carries, the transport never panics, never stops before
// the input ends, and answers every non-blank line exactly once: either
// one message handed to the SDK or one valid JSON-RPC error.
func FuzzLineReader(f *testing.F) {
	for _, seed := range []string{
		`{"jsonrpc":"2.0","id":1,"method":"tools/list"}` + "\n",
		`{"jsonrpc":"2.0","method":"notifications/initialized"}` + "\r\n",
		`{"jsonrpc":"2.0","id":"a","result":{}}` + "\n",
		"garbage\n42\n[1,2]\n[]\n{}\n\n  \n",
		`{"jsonrpc":"2.0","id":true,"method":"x"}`,
		`{"jsonrpc":"2.0","id":1.5,"method":"x"}` + "\n" + `{"jsonrpc":"2.0","id":9007199254740993,"method":"x"}`,
		`{"jsonrpc":"2.0","id":1,"id":2,"method":"x"}`,
		"{\"jsonrpc\":\"2.0\",\"id\":\"\xff\",\"method\":\"x\"}\n\x00\n",
		`{"jsonrpc":"2.0","id":1,"method":"x","params":` + strings.Repeat(`{"a":`, 1100) + "1" + strings.Repeat("}", 1100) + "}\n",
		strings.Repeat("x", 300) + "\n" + `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`,
		`{"jsonrpc":"2.0","id":1,"method":"tools/li`,
	} {
		f.Add([]byte(seed))
	}
	const max = 256
	f.Fuzz(func(t *testing.T, input []byte) {
		msgs, replies := session(t, input, max)
		for _, r := range replies {
			checkReply(t, r)
		}
		lines := 0
		for _, l := range bytes.Split(input, []byte("\n")) {
			if len(bytes.Trim(l, jsonSpace)) > 0 || len(bytes.TrimSuffix(l, []byte("\r"))) > max {
				lines++
			}
		}
		if len(msgs)+len(replies) != lines {
			t.Fatalf("%d lines, %d messages and %d error replies", lines, len(msgs), len(replies))
		}
		for _, m := range msgs {
			if _, err := jsonrpc.EncodeMessage(m); err != nil {
				t.Fatalf("a passed message does not encode: %v", err)
			}
		}
	})
}

// Each kind of line, classified.
func TestClassify(t *testing.T) {
	for _, tc := range []struct {
		line string
		code int64  // 0: handed to the SDK
		id   string // the reply's id
	}{
		{`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`, 0, ""},
		{`{"jsonrpc":"2.0","id":-9007199254740991,"method":"tools/list"}`, 0, ""},
		{`{"jsonrpc":"2.0","id":"` + strings.Repeat("é", 1000) + `","method":"tools/list"}`, 0, ""},
		{`{"jsonrpc":"2.0","id":1,"method":"tools/list","params":null}`, 0, ""},
		{`{"jsonrpc":"2.0","method":"notifications/whatever","params":{"a":[{"b":{}}]}}`, 0, ""},
		{`{"jsonrpc":"2.0","id":1,"result":{}}`, 0, ""},
		{`{"jsonrpc":"2.0","id":1,"error":{"code":1,"message":"m"}}`, 0, ""},
		{`{"jsonrpc":"2.0","id":1,"method":"x","extra":1}`, 0, ""},
		{`{"jsonrpc":"2.0","id":1,"result":{},"error":{"code":1,"message":"m"}}`, -32600, "1"},
		{`{"jsonrpc":"2.0","id":1,"error":"no"}`, -32600, "1"},
		{`{"jsonrpc":"2.0","result":{}}`, -32600, "null"},
		{`{"jsonrpc":"2.0","id":01,"method":"x"}`, -32700, "null"},
		{`{"jsonrpc":"2.0","id":1e3,"method":"x"}`, -32600, "null"},
		{`{"jsonrpc":"2.0","id":-0,"method":"x"}`, 0, ""},
		{`{"jsonrpc":"2.0","id":1,"method":"x","params":` + strings.Repeat(`{"a":`, 1100) + "1" + strings.Repeat("}", 1100) + "}", -32600, "1"},
		{`{"jsonrpc":"2.0","id":1,"method":"x"} {"jsonrpc":"2.0","id":2,"method":"x"}`, -32700, "null"},
		{"\ufeff" + `{"jsonrpc":"2.0","id":1,"method":"x"}`, -32700, "null"},
		{"\u00a0" + `{"jsonrpc":"2.0","id":1,"method":"x"}`, -32700, "null"},
		{"\u00a0", -32700, "null"},
		{`{"jsonrpc":"2.0","id":"\ud800","method":"x"}`, -32600, "null"},
		{`{"jsonrpc":"2.0","id":"\ud83d\ude00 \uFFFD","method":"x"}`, 0, ""},
		{`{"jsonrpc":2.0,"id":1,"method":"x"}`, -32600, "1"},
		{`{"jsonrpc":"2.0","ID":1,"method":"x"}`, 0, ""}, // a notification: keys are case-sensitive
	} {
		msg, reply := Classify([]byte(tc.line))
		if (msg == nil) == (reply == nil) {
			t.Errorf("%.80s: message %v and reply %s", tc.line, msg, reply)
			continue
		}
		if tc.code == 0 {
			if reply != nil {
				t.Errorf("%.80s: refused: %s", tc.line, reply)
			}
			continue
		}
		var r struct {
			ID    json.RawMessage `json:"id"`
			Error jsonrpc.Error   `json:"error"`
		}
		if err := json.Unmarshal(reply, &r); err != nil || r.Error.Code != tc.code || string(r.ID) != tc.id {
			t.Errorf("%.80s: reply %s; want code %d id %s", tc.line, reply, tc.code, tc.id)
		}
		checkReply(t, reply)
	}
}

// A line over the limit is dropped while it is read: the reader holds at
// most the limit and its buffer, whatever the line's length, and the line
// after it is read whole.
func TestLongLineBoundedMemory(t *testing.T) {
	const max = 1 << 10
	long := strings.Repeat("a", 10<<20)
	lr := newLineReader(strings.NewReader(long+"\n"+`{"ok":1}`+"\r\n"), max)
	line, tooLong, err := lr.next()
	if !tooLong || line != nil || err != nil {
		t.Fatalf("long line: %q %v %v", line, tooLong, err)
	}
	if cap(lr.buf) > max+2+64<<10 {
		t.Errorf("the reader kept %d bytes of a too long line", cap(lr.buf))
	}
	line, tooLong, err = lr.next()
	if string(line) != `{"ok":1}` || tooLong || err != nil {
		t.Fatalf("next line: %q %v %v", line, tooLong, err)
	}
	// Exactly max bytes is allowed, with either end of line.
	for _, eol := range []string{"\n", "\r\n", ""} {
		lr = newLineReader(strings.NewReader(strings.Repeat("b", max)+eol), max)
		if line, tooLong, _ := lr.next(); tooLong || len(line) != max {
			t.Errorf("a line of max bytes ending %q: %d bytes, too long %v", eol, len(line), tooLong)
		}
	}
	lr = newLineReader(strings.NewReader(strings.Repeat("b", max+1)+"\r\n"), max)
	if _, tooLong, _ := lr.next(); !tooLong {
		t.Error("a line of max+1 bytes is not too long")
	}
}

// A line with a key given twice is refused -32600 with its id where the
// id is not the key given twice, as docs/plugin.md says (the line's id
// when it could be read): a client waiting on that id gets its answer.
func TestDuplicateKeyReplyKeepsTheID(t *testing.T) {
	for _, c := range []struct{ line, id string }{
		{`{"jsonrpc":"2.0","id":5,"method":"tools/list","method":"tools/call"}`, `5`},
		{`{"jsonrpc":"2.0","jsonrpc":"2.0","id":"a","method":"tools/list"}`, `"a"`},
		{`{"jsonrpc":"2.0","id":5,"ID":6,"params":{},"params":{},"method":"x"}`, `5`},
		{`{"jsonrpc":"2.0","id":4,"id":5,"method":"tools/list"}`, `null`},                   // which one?
		{`{"jsonrpc":"2.0","id":1.5,"method":"tools/list","method":"x"}`, `null`},           // not an MCP id
		{`{"jsonrpc":"2.0","method":"notifications/x","method":"notifications/y"}`, `null`}, // none
	} {
		msg, reply := Classify([]byte(c.line))
		var r struct {
			ID    json.RawMessage `json:"id"`
			Error struct{ Code int64 }
		}
		if msg != nil || json.Unmarshal(reply, &r) != nil || string(r.ID) != c.id || r.Error.Code != jsonrpc.CodeInvalidRequest {
			t.Errorf("%s: reply %s; want id %s, code -32600", c.line, reply, c.id)
		}
		checkReply(t, reply)
	}
}
