package httpapi_test

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"system1/internal/fakeengine"
)

// rawHTTP sends req as it is over one connection and returns the status
// line and the body of the reply.
func rawHTTP(t *testing.T, url, req string) (status int, body string) {
	t.Helper()
	conn, err := net.Dial("tcp", strings.TrimPrefix(url, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(30 * time.Second))
	if _, err := io.WriteString(conn, req); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatalf("%q: %v", req, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// Hostile or careless requests at the level of HTTP itself, beyond the
// issue's list: each gets a clean answer (a 4xx, never a 5xx, a hang or
// a crash), and none reaches the engine. What net/http refuses before
// system1 sees it is a plain-text 400/501, kept here so a change of
// server would show.
func TestHostileHTTP(t *testing.T) {
	n := startNode(t, "n", fakeengine.OpenAI, fakeengine.Behavior{})
	s := serve(t, setup{nodes: []node{n}, maxBody: 1024})
	const h = "Host: x\r\nConnection: close\r\n"
	for _, tc := range []struct {
		name, req string
		status    int
		json      bool
	}{
		// Smuggling: two lengths, or a length beside chunked (chunked wins
		// and the length is dropped, RFC 9112 section 6.3).
		{"two different Content-Lengths", "POST /v1/systemone HTTP/1.1\r\n" + h + "Content-Length: 2\r\nContent-Length: 3\r\n\r\n{}", 400, false},
		{"Content-Length beside chunked", "POST /v1/systemone HTTP/1.1\r\n" + h + "Content-Length: 50\r\nTransfer-Encoding: chunked\r\n\r\n2\r\n{}\r\n0\r\n\r\n", 422, true},
		{"a transfer coding before chunked", "POST /v1/systemone HTTP/1.1\r\n" + h + "Transfer-Encoding: gzip, chunked\r\n\r\n2\r\n{}\r\n0\r\n\r\n", 501, false},
		{"a chunked body over the limit", "POST /v1/systemone HTTP/1.1\r\n" + h + "Transfer-Encoding: chunked\r\n\r\n800\r\n" + strings.Repeat("x", 2048) + "\r\n0\r\n\r\n", 413, true},
		{"a bad chunk size", "POST /v1/systemone HTTP/1.1\r\n" + h + "Transfer-Encoding: chunked\r\n\r\nzz\r\n{}\r\n0\r\n\r\n", 400, true},
		{"a length over the limit with Expect: 100-continue", "POST /v1/systemone HTTP/1.1\r\n" + h + "Content-Length: 100000\r\nExpect: 100-continue\r\n\r\n", 413, true},
		{"a control character in a header", "GET /health HTTP/1.1\r\n" + h + "X-Bad: a\x01b\r\n\r\n", 400, false},
		{"a header line folded", "GET /health HTTP/1.1\r\n" + h + " X-Folded: a\r\n\r\n", 200, true},
		{"HTTP/1.0 without Host", "GET /health HTTP/1.0\r\n\r\n", 200, true},
		{"HTTP/1.1 without Host", "GET /health HTTP/1.1\r\nConnection: close\r\n\r\n", 400, false},
		{"a query string with bad escapes", "GET /health?x=%zz&y=\xff HTTP/1.1\r\n" + h + "\r\n", 200, true},
		{"NUL in the path", "GET /health%00 HTTP/1.1\r\n" + h + "\r\n", 404, true},
		{"a wrong method", "DELETE /v1/systemone HTTP/1.1\r\n" + h + "\r\n", 405, true},
		{"GET on a POST route", "GET /v1/systemone HTTP/1.1\r\n" + h + "\r\n", 405, true},
		{"POST on a GET route", "POST /v1/models HTTP/1.1\r\n" + h + "Content-Length: 0\r\n\r\n", 405, true},
		{"a method on an unknown path", "DELETE /v1/nothing HTTP/1.1\r\n" + h + "\r\n", 404, true},
		{"a body that is not JSON, as text/plain", "POST /v1/systemone HTTP/1.1\r\n" + h + "Content-Type: text/plain\r\nContent-Length: 2\r\n\r\nhi", 422, true},
		{"a byte order mark", "POST /v1/systemone HTTP/1.1\r\n" + h + "Content-Length: 5\r\n\r\n\xef\xbb\xbf{}", 422, true},
		{"a caller's request id is not echoed", "POST /v1/systemone HTTP/1.1\r\n" + h + "X-Typesafe-Request-Id: evil\r\nContent-Length: 2\r\n\r\n{}", 422, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			status, body := rawHTTP(t, s.URL, tc.req)
			if status != tc.status || (tc.json && !json.Valid([]byte(body))) {
				t.Errorf("got %d %q, want %d (JSON %v)", status, body, tc.status, tc.json)
			}
		})
	}
	if got := len(n.fake.Inferences()); got != 0 {
		t.Errorf("%d engine calls", got)
	}
}

// Many or huge headers: net/http bounds the head (1 MB by default, as
// system1 serve leaves it) with a 431; under that, thousands of headers
// are read and ignored. Two Authorization headers: the first counts.
func TestManyHeaders(t *testing.T) {
	n := startNode(t, "n", fakeengine.OpenAI, fakeengine.Behavior{})
	s := serve(t, setup{nodes: []node{n}, keys: []string{"real"}})
	var many strings.Builder
	for i := range 5000 {
		fmt.Fprintf(&many, "X-H%d: v\r\n", i)
	}
	status, _ := rawHTTP(t, s.URL, "GET /v1/models HTTP/1.1\r\nHost: x\r\nConnection: close\r\nAuthorization: Bearer real\r\n"+many.String()+"\r\n")
	if status != http.StatusOK {
		t.Errorf("5000 headers: %d", status)
	}
	status, _ = rawHTTP(t, s.URL, "GET /v1/models HTTP/1.1\r\nHost: x\r\nConnection: close\r\nX-Big: "+strings.Repeat("a", 2<<20)+"\r\n\r\n")
	if status != http.StatusRequestHeaderFieldsTooLarge {
		t.Errorf("a 2 MB header: %d", status)
	}
	for _, tc := range []struct {
		first, second string
		status        int
	}{{"Bearer wrong", "Bearer real", 401}, {"Bearer real", "Bearer wrong", 200}} {
		status, _ := rawHTTP(t, s.URL, "GET /v1/models HTTP/1.1\r\nHost: x\r\nConnection: close\r\nAuthorization: "+tc.first+"\r\nAuthorization: "+tc.second+"\r\n\r\n")
		if status != tc.status {
			t.Errorf("Authorization %q then %q: %d, want %d", tc.first, tc.second, status, tc.status)
		}
	}
}

// Odd JSON in the body: numbers out of float64's range, negative zero,
// deep nesting, a huge key count, escapes. Each is a clean 200 or a 422
// naming the field, on both routes.
func TestHostileBodies(t *testing.T) {
	n := startNode(t, "n", fakeengine.OpenAI, fakeengine.Behavior{})
	s := serveBoth(t, 0, n)
	deep := strings.Repeat("[", 20000) + strings.Repeat("]", 20000)
	wide := "{" + func() string {
		var b strings.Builder
		for i := range 15000 {
			fmt.Fprintf(&b, `"k%d":%d,`, i, i)
		}
		return b.String()
	}() + `"z":0}`
	for _, tc := range []struct {
		name, path, body string
		status           int
		has              string
	}{
		{"1e400 in the state", "/v1/systemone", `{"model":"fake","state":{"x":1e400,"y":-0},"questions":{"q":{"type":"noul"}}}`, 200, ""},
		{"a number as the model", "/v1/systemone", `{"model":1e400,"state":"s","questions":{"q":{"type":"noul"}}}`, 422, "model"},
		{"nesting past encoding/json's depth", "/v1/systemone", `{"model":"fake","state":` + deep + `,"questions":{"q":{"type":"noul"}}}`, 422, "json_invalid"},
		{"15,000 keys in the state", "/v1/systemone", `{"model":"fake","state":` + wide + `,"questions":{"q":{"type":"noul"}}}`, 200, ""},
		{"an escaped NUL in an id", "/v1/systemone", `{"model":"fake","state":"s","questions":{"q\u0000":{"type":"noul"}}}`, 200, ""},
		{"min_confidence 1e400", "/v1/decide", `{"question":"Which?","options":["a","b"],"min_confidence":1e400}`, 422, "min_confidence"},
		{"min_confidence -0", "/v1/decide", `{"question":"Which?","options":["a","b"],"min_confidence":-0}`, 200, ""},
		{"min_confidence 1e-400", "/v1/decide", `{"question":"Which?","options":["a","b"],"min_confidence":1e-400}`, 200, ""},
		{"nesting in the context", "/v1/decide", `{"question":"Which?","context":{"a":` + deep + `}}`, 422, "JSON object"},
		{"a request id of escapes", "/v1/decide", `{"question":"Which?","request_id":"\u0000\r\n<script>"}`, 200, `\u0000\r\n\u003cscript\u003e`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := s.do(t, http.MethodPost, tc.path, tc.body)
			if r.status != tc.status || !strings.Contains(string(r.body), tc.has) {
				t.Errorf("got %.400s, want %d with %q", r, tc.status, tc.has)
			}
			validHead(t, r.header)
		})
	}
}

// A known path asked with a method it does not answer gets FastAPI's 405,
// as hosted Jev sends it, naming the methods it does answer; an unknown
// path stays a 404.
func TestWrongMethod(t *testing.T) {
	n := startNode(t, "n", fakeengine.OpenAI, fakeengine.Behavior{})
	s := serve(t, setup{nodes: []node{n}})
	for _, tc := range []struct {
		method, path string
		status       int
		allow, body  string
	}{
		{http.MethodGet, "/v1/systemone", 405, "POST", `{"detail":"Method Not Allowed"}`},
		// /v1/models, which OpenAI's clients call too, answers in both
		// envelopes (TestOpenAIRoutesAnswerInTheirEnvelope).
		{http.MethodPost, "/v1/models", 405, "GET, HEAD",
			`{"error":{"message":"Invalid method for URL (POST /v1/models); it takes GET, HEAD","type":"invalid_request_error","param":null,"code":null},"detail":"Method Not Allowed"}`},
		{http.MethodDelete, "/health", 405, "GET, HEAD", `{"detail":"Method Not Allowed"}`},
		{http.MethodDelete, "/v1/nothing", 404, "", `{"detail":"Not Found"}`},
		// The page's paths (internal/web) are known paths like the API's.
		{http.MethodPost, "/", 405, "GET, HEAD", `{"detail":"Method Not Allowed"}`},
		{http.MethodDelete, "/docs", 405, "GET, HEAD", `{"detail":"Method Not Allowed"}`},
		{http.MethodPut, "/openapi.json", 405, "GET, HEAD", `{"detail":"Method Not Allowed"}`},
		{http.MethodPost, "/ui/app.js", 405, "GET, HEAD", `{"detail":"Method Not Allowed"}`},
		{http.MethodPost, "/ui/missing.js", 404, "", `{"detail":"Not Found"}`},
	} {
		t.Run(tc.method+" "+tc.path, func(t *testing.T) {
			r := s.do(t, tc.method, tc.path, "")
			if r.status != tc.status || r.header.Get("Allow") != tc.allow || string(r.body) != tc.body {
				t.Errorf("%d, Allow %q, %s; want %d, Allow %q, %s", r.status, r.header.Get("Allow"), r.body, tc.status, tc.allow, tc.body)
			}
		})
	}
}
