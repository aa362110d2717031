package docs_test

import (
	"cmp"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"system1/internal/fakeengine"
	"system1/internal/testbin"
)

// readmeAddr is the address the pages' requests reach: the one
// scripts/run.sh serves on.
var readmeAddr = regexp.MustCompile(`(localhost|127\.0\.0\.1):3000\b`)

// curlLine is a line of a page that asks system1 serve with curl.
var curlLine = regexp.MustCompile(`\bcurl\b.*\b(localhost|127\.0\.0\.1):3000\b`)

// offline are the curl requests of the pages that cannot run offline
// against the fake engine, each as "page: text of its curl line" with
// the reason; every other one runs. None today.
var offline = map[string]string{}

// request is a curl command of a page, as a reader copies it.
type request struct {
	at, file string
	line     int
	command  string
	// reply is the JSON block the page shows after it, when it shows one.
	reply string
	// expect is the status the page says the example answers on purpose
	// ("# HTTP 404" after the command); 0 is any 2xx.
	expect int
}

// expected reads the status a page shows a request answering on purpose:
// a shell comment "# HTTP NNN" on its line. 0: none, it must succeed.
var expected = regexp.MustCompile(`#.*\bHTTP (\d{3})\b`)

func expectedStatus(command string) int {
	m := expected.FindStringSubmatch(command)
	if m == nil {
		return 0
	}
	n, _ := strconv.Atoi(m[1])
	return n
}

func TestDocsExpectedStatus(t *testing.T) {
	for _, c := range []struct {
		command string
		want    int
	}{
		{`curl -s localhost:3000/v1/decide -d '{}'`, 0},
		{`curl -s localhost:3000/v1/decide -d '{}'   # system1 serve`, 0},
		{`curl -s localhost:3000/v1/feedback -d '{"request_id": "req_x"}'   # HTTP 404: no such request`, 404},
		{`curl -s localhost:3000/v1/decide -d '{"context": "HTTP 404"}'`, 0},
	} {
		if got := expectedStatus(c.command); got != c.want {
			t.Errorf("%s: status %d, want %d", c.command, got, c.want)
		}
	}
}

// requests are the curl commands of every page that ask system1 serve:
// a shell block that starts with curl (its whole text: a JSON body spans
// lines), or a line of an indented block that does, with the JSON block
// that follows it, when the next block of the page is one.
func requests(t *testing.T) []request {
	t.Helper()
	var out []request
	for _, p := range pages(t) {
		rel := p.file
		bs := fenced(rel, p.text)
		for i, b := range bs {
			if !slices.Contains([]string{"sh", "bash", "console", "shell", ""}, b.lang) {
				continue
			}
			text := strings.TrimPrefix(strings.TrimSpace(b.text), "$ ")
			if !strings.HasPrefix(text, "curl ") || !readmeAddr.MatchString(text) {
				continue
			}
			r := request{at: fmt.Sprintf("%s:%d", rel, b.line+1), file: rel, line: b.line + 1, command: text, expect: expectedStatus(text)}
			if i+1 < len(bs) && bs[i+1].lang == "json" {
				r.reply = bs[i+1].text
			}
			out = append(out, r)
		}
	}
	for _, b := range indented(t) {
		text := strings.TrimPrefix(strings.TrimSpace(b.text), "$ ")
		if strings.HasPrefix(text, "curl ") && readmeAddr.MatchString(text) {
			out = append(out, request{at: fmt.Sprintf("%s:%d", b.file, b.line+1), file: b.file, line: b.line + 1, command: text, expect: expectedStatus(text)})
		}
	}
	// In each page's order: a placeholder takes the reply before it.
	slices.SortStableFunc(out, func(a, b request) int {
		return cmp.Or(strings.Compare(a.file, b.file), a.line-b.line)
	})
	return out
}

// Every curl request of README.md and docs/ runs as copied against
// system1 serve with the configuration scripts/run.sh writes, the fake
// engine in llama-server's place and the decision log on: only the
// address is changed to the test server's, and a placeholder such as
// REQUEST_ID becomes the id of the reply before it on its page. Each
// answers a 2xx (or the status its page says it shows on purpose) with
// JSON, and every field of the reply the page shows after it is in the
// real reply. A request that cannot run offline is in offline with the
// reason, and no curl line of a page escapes both.
func TestDocsRequestsRun(t *testing.T) {
	reqs := requests(t)
	ran := map[string]bool{}
	for _, r := range reqs {
		ran[r.at] = true
	}
	listed := map[string]bool{}
	for _, p := range pages(t) {
		rel := p.file
		for n, l := range strings.Split(p.text, "\n") {
			if !curlLine.MatchString(l) {
				continue
			}
			key := rel + ": " + strings.TrimSpace(l)
			if _, ok := offline[key]; ok {
				listed[key] = true
				continue
			}
			if !ran[fmt.Sprintf("%s:%d", rel, n+1)] {
				t.Errorf("%s:%d: a curl request the test neither runs nor lists in offline with a reason (a shell block that starts with it, or an indented line, runs): %s", rel, n+1, l)
			}
		}
	}
	for key := range offline {
		if !listed[key] {
			t.Errorf("offline lists %q, which no page has any more", key)
		}
	}
	if len(reqs) < 5 {
		t.Fatalf("found %d curl requests in the pages; the test reads fewer than it should", len(reqs))
	}

	if _, err := exec.LookPath("curl"); err != nil {
		t.Skip("curl is not installed")
	}
	base := serveAsRunSh(t)
	addr := strings.TrimPrefix(base, "http://")

	// curl's own configuration, from the reader's HOME, adds the status
	// and keeps the headers: the command itself stays as copied.
	home := t.TempDir()
	headers := filepath.Join(home, "headers")
	rc := fmt.Sprintf("write-out = \"\\n%%{http_code}\"\ndump-header = %q\n", headers)
	if err := os.WriteFile(filepath.Join(home, ".curlrc"), []byte(rc), 0o600); err != nil {
		t.Fatal(err)
	}
	placeholder := regexp.MustCompile(`\b[A-Z]+(?:_[A-Z]+)+\b`)
	lastID := map[string]string{} // by page: the id of its latest reply
	shapes := 0
	for _, r := range reqs {
		cmd := readmeAddr.ReplaceAllString(r.command, addr)
		for _, p := range placeholder.FindAllString(cmd, -1) {
			if p != "REQUEST_ID" {
				t.Errorf("%s: placeholder %s has no value the test knows", r.at, p)
				continue
			}
			if lastID[r.file] == "" {
				t.Errorf("%s: REQUEST_ID, and no request before it on %s answered an id", r.at, r.file)
				continue
			}
			cmd = strings.ReplaceAll(cmd, p, lastID[r.file])
		}
		_ = os.Remove(headers)
		c := exec.Command("sh", "-c", cmd)
		c.Env = []string{"HOME=" + home, "PATH=" + os.Getenv("PATH")}
		code, stdout, stderr, err := testbin.Run(c)
		if err != nil || code != 0 {
			t.Errorf("%s: sh -c exited %d %v: %s\n%s", r.at, code, err, stderr, cmd)
			continue
		}
		body, status, _ := cutLast(stdout, "\n")
		st, _ := strconv.Atoi(status)
		if ok := st >= 200 && st < 300; r.expect == 0 && !ok || r.expect != 0 && st != r.expect {
			want := "a 2xx"
			if r.expect != 0 {
				want = strconv.Itoa(r.expect)
			}
			t.Errorf("%s: HTTP %s, want %s: %s\n%s", r.at, status, want, body, cmd)
			continue
		}
		if !json.Valid([]byte(body)) {
			t.Errorf("%s: the reply is not JSON: %q\n%s", r.at, body, cmd)
			continue
		}
		if id := replyID(t, body, headers); id != "" {
			lastID[r.file] = id
		}
		if r.reply == "" {
			continue
		}
		var shown, got any
		if err := json.Unmarshal([]byte(r.reply), &shown); err != nil {
			t.Errorf("%s: the reply the page shows is not JSON: %v\n%s", r.at, err, r.reply)
			continue
		}
		_ = json.Unmarshal([]byte(body), &got)
		shapes++
		for _, p := range missingFields(shown, got, "") {
			t.Errorf("%s: the page shows the reply's field %s, which the real reply lacks: %s", r.at, p, body)
		}
		for _, d := range otherNames(shown, got, "") {
			t.Errorf("%s: the page shows %s, where the real reply names %s: %s", r.at, d[0], d[1], body)
		}
	}
	if shapes < 2 {
		t.Errorf("held %d replies the pages show to the real ones; README.md shows two (/v1/systemone's, /v1/decide's)", shapes)
	}
}

// cutLast splits s around the last sep.
func cutLast(s, sep string) (before, after string, found bool) {
	if i := strings.LastIndex(s, sep); i >= 0 {
		return s[:i], s[i+len(sep):], true
	}
	return "", s, false
}

// replyID is the request id a reply names: its request_id, else its
// x-typesafe-request-id or x-request-id header, read from the file curl
// dumped the headers to.
func replyID(t *testing.T, body, headers string) string {
	t.Helper()
	var v struct {
		RequestID string `json:"request_id"`
	}
	if json.Unmarshal([]byte(body), &v) == nil && v.RequestID != "" {
		return v.RequestID
	}
	raw, err := os.ReadFile(headers)
	if err != nil {
		return ""
	}
	h := http.Header{}
	for _, l := range strings.Split(string(raw), "\r\n") {
		if k, v, ok := strings.Cut(l, ":"); ok {
			h.Add(strings.TrimSpace(k), strings.TrimSpace(v))
		}
	}
	if id := h.Get("X-Typesafe-Request-Id"); id != "" {
		return id
	}
	return h.Get("X-Request-Id")
}

// missingFields are the paths of the fields of shown, an object the page
// shows, that got, the real one, lacks: names, never values. An array's
// elements are each held to the real array's element at the same place,
// or its first.
func missingFields(shown, got any, at string) []string {
	var out []string
	switch s := shown.(type) {
	case map[string]any:
		g, ok := got.(map[string]any)
		if !ok {
			if got == nil { // a null shown as an object, or the other way: a value
				return nil
			}
			return []string{at + " (an object)"}
		}
		for k, v := range s {
			gv, ok := g[k]
			if !ok {
				out = append(out, at+"."+k)
				continue
			}
			out = append(out, missingFields(v, gv, at+"."+k)...)
		}
	case []any:
		g, ok := got.([]any)
		if !ok || len(g) == 0 {
			return nil
		}
		for i, v := range s {
			out = append(out, missingFields(v, g[min(i, len(g)-1)], fmt.Sprintf("%s[%d]", at, i))...)
		}
	}
	return out
}

// serveAsRunSh starts system1 serve on a free port with the configuration
// scripts/run.sh writes for the llama-server it starts (its here-document,
// read from the script), the fake engine serving the model in its place,
// and the decision log in a folder of its own. It returns the base URL.
func serveAsRunSh(t *testing.T) string {
	t.Helper()
	script := pageText(t, filepath.Join("scripts", "run.sh"))
	_, doc, ok := strings.Cut(script, "cat >\"$config\" <<YAML\n")
	if ok {
		doc, _, ok = strings.Cut(doc, "\nYAML\n")
	}
	if !ok {
		t.Fatal(`scripts/run.sh no longer writes its configuration with cat >"$config" <<YAML`)
	}
	const model = "stories260k" // what run.sh names ../shared/models/stories260K.gguf
	engine := fakeengine.New(fakeengine.Options{Dialect: fakeengine.LlamaCpp, Models: []string{model}})
	t.Cleanup(engine.Close)
	u, err := url.Parse(engine.URL)
	if err != nil {
		t.Fatal(err)
	}
	addr := testbin.LoopbackAddr(t)
	_, port, _ := strings.Cut(addr, ":")
	cfg := strings.NewReplacer("$engine_port", u.Port(), "$port", port, "$alias", model).Replace(doc)
	if strings.Contains(cfg, "$") {
		t.Fatalf("scripts/run.sh's configuration names a variable the test does not fill:\n%s", cfg)
	}
	dir := t.TempDir()
	file := filepath.Join(dir, "config.yaml")
	if err := os.WriteFile(file, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(testbin.Binary(t), "serve", "--config", file, "--state-dir", filepath.Join(dir, "state"), "--listen", addr)
	cmd.Env = []string{"HOME=" + dir, "PATH=" + os.Getenv("PATH")}
	log := &testbin.Output{}
	cmd.Stderr = log
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-exited
		if t.Failed() {
			t.Logf("system1 serve's log:\n%s", log.String())
		}
	})
	base := "http://" + addr
	if err := testbin.WaitHealthy(base, exited, 2*time.Minute); err != nil {
		t.Fatalf("%v\n%s", err, log.String())
	}
	return base
}

// setupNames are the fields of a reply whose values name the setup that
// answered it, not the model's numbers: the model, the provider and the
// node (an attempt's detail). With run.sh's configuration they are what
// a reader who copies the request sees.
var setupNames = map[string]bool{"model": true, "provider": true, "detail": true}

// otherNames are the setupNames fields whose string value in shown, the
// reply the page shows, differs from got's, the real one's: each as the
// path with the shown value, and the real value. Arrays are walked as
// missingFields walks them.
func otherNames(shown, got any, at string) [][2]string {
	var out [][2]string
	switch s := shown.(type) {
	case map[string]any:
		g, ok := got.(map[string]any)
		if !ok {
			return nil
		}
		for k, v := range s {
			gv, ok := g[k]
			if !ok {
				continue
			}
			sv, sok := v.(string)
			gs, gok := gv.(string)
			if setupNames[k] && sok && gok && sv != gs {
				out = append(out, [2]string{fmt.Sprintf("%s.%s %q", at, k, sv), strconv.Quote(gs)})
				continue
			}
			out = append(out, otherNames(v, gv, at+"."+k)...)
		}
	case []any:
		g, ok := got.([]any)
		if !ok || len(g) == 0 {
			return nil
		}
		for i, v := range s {
			out = append(out, otherNames(v, g[min(i, len(g)-1)], fmt.Sprintf("%s[%d]", at, i))...)
		}
	}
	return out
}

func TestOtherNames(t *testing.T) {
	for _, c := range []struct {
		shown, got string
		want       []string
	}{
		{`{"model": "m", "provider": "local", "confidence": 0.5}`, `{"model": "m", "provider": "local", "confidence": 0.7}`, nil},
		{`{"attempts": [{"provider": "local", "detail": "answered by node llama"}]}`, `{"attempts": [{"provider": "local", "detail": "answered by node local"}]}`,
			[]string{`.attempts[0].detail "answered by node llama" -> "answered by node local"`}},
		{`{"decision": "billing", "model": "a"}`, `{"decision": "sales", "model": null}`, nil},
	} {
		var shown, got any
		if err := json.Unmarshal([]byte(c.shown), &shown); err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal([]byte(c.got), &got); err != nil {
			t.Fatal(err)
		}
		var diff []string
		for _, d := range otherNames(shown, got, "") {
			diff = append(diff, d[0]+" -> "+d[1])
		}
		if !slices.Equal(diff, c.want) {
			t.Errorf("shown %s, got %s: %q, want %q", c.shown, c.got, diff, c.want)
		}
	}
}

func TestMissingFields(t *testing.T) {
	for _, c := range []struct {
		shown, got string
		want       []string
	}{
		{`{"a": 1, "b": {"c": 2}}`, `{"a": 5, "b": {"c": 7, "d": 1}}`, nil},
		{`{"a": 1, "b": {"c": 2}}`, `{"b": {"d": 1}}`, []string{".a", ".b.c"}},
		{`{"attempts": [{"provider": "x", "detail": "y"}]}`, `{"attempts": [{"provider": "z"}]}`, []string{".attempts[0].detail"}},
		{`{"attempts": [{"p": 1}, {"p": 2}]}`, `{"attempts": [{"p": 3}]}`, nil},
		{`{"error": null, "calibration": {"steps": []}}`, `{"error": {"code": "x"}, "calibration": {"steps": [{"name": "t"}]}}`, nil},
		{`{"error": {"code": "x"}}`, `{"error": null}`, nil},
		{`{"b": {"c": 1}}`, `{"b": 3}`, []string{".b (an object)"}},
	} {
		var shown, got any
		if err := json.Unmarshal([]byte(c.shown), &shown); err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal([]byte(c.got), &got); err != nil {
			t.Fatal(err)
		}
		miss := missingFields(shown, got, "")
		slices.Sort(miss)
		if !slices.Equal(miss, c.want) {
			t.Errorf("shown %s, got %s: missing %q, want %q", c.shown, c.got, miss, c.want)
		}
	}
}
