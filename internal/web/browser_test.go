package web_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"math/big"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"system1/internal/fleet"
	"system1/internal/jsonx"
	"system1/internal/web"
)

// chromium finds the browser: $SYSTEM1_CHROMIUM, else Debian's. Without
// one the browser tests skip, unless SYSTEM1_REQUIRE_BROWSER is set (as
// scripts/test.sh sets it after scripts/chromium.sh installed it).
func chromium(t *testing.T) string {
	t.Helper()
	for _, p := range []string{os.Getenv("SYSTEM1_CHROMIUM"), "/usr/lib/chromium/chromium"} {
		if p != "" {
			if _, err := os.Stat(p); err == nil {
				return p
			}
		}
	}
	for _, name := range []string{"chromium", "chromium-browser"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if os.Getenv("SYSTEM1_REQUIRE_BROWSER") != "" {
		t.Fatal("no Chromium found and SYSTEM1_REQUIRE_BROWSER is set: run scripts/chromium.sh")
	}
	t.Skip("no Chromium here (scripts/chromium.sh installs it); browser tests skipped")
	return ""
}

// browser starts headless Chromium with a fresh profile. Its background
// services stay off: this machine's closed network refuses them.
func browser(t *testing.T) context.Context {
	t.Helper()
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(chromium(t)),
		chromedp.Flag("headless", true),
		chromedp.Flag("no-sandbox", true),
		chromedp.Flag("disable-gpu", true),
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("no-first-run", true),
		chromedp.Flag("no-default-browser-check", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.Flag("hide-scrollbars", true),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(1280, 900),
	}
	actx, cancelA := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(actx, chromedp.WithErrorf(t.Logf))
	t.Cleanup(func() { cancel(); cancelA() })
	if err := chromedp.Do(ctx); err != nil { // starts the browser
		t.Fatalf("starting Chromium: %v", err)
	}
	return ctx
}

// bound limits one step, so that a page that never gets there fails the
// test instead of hanging it.
func bound(t *testing.T, ctx context.Context, steps ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	c, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	if err := chromedp.Do(c, steps...); err != nil {
		t.Fatal(err)
	}
}

// eval runs a JS expression and decodes its value.
func eval[T any](t *testing.T, ctx context.Context, expr string) T {
	t.Helper()
	c, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	v, err := chromedp.Run(c, chromedp.Evaluate[T](expr))
	if err != nil {
		t.Fatalf("%s: %v", expr, err)
	}
	return v
}

func wait(expr string) chromedp.Action[chromedp.Void] {
	return chromedp.Poll[chromedp.Void](expr, chromedp.WithPollingTimeout(55*time.Second))
}

// screenshot saves the whole page: into docs/screenshots when
// SYSTEM1_SCREENSHOTS is set (how the README's are made), else into the
// test's own folder; either way it must be a PNG.
func screenshot(t *testing.T, ctx context.Context, name string) {
	t.Helper()
	c, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	png, err := chromedp.Run(c, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatal(err)
	}
	if len(png) < 1000 || string(png[1:4]) != "PNG" {
		t.Fatalf("screenshot %s is not a PNG (%d bytes)", name, len(png))
	}
	dir := t.TempDir()
	if os.Getenv("SYSTEM1_SCREENSHOTS") != "" {
		dir = "../../docs/screenshots"
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, name), png, 0o644); err != nil {
		t.Fatal(err)
	}
}

// shownBar is one bar as the page draws it.
type shownBar struct {
	Option string  `json:"option"`
	P      float64 `json:"p"`
	Value  string  `json:"value"`
	Width  string  `json:"width"`
	Chosen bool    `json:"chosen"`
}

// shownAnswer is one answer card as the page shows it.
type shownAnswer struct {
	Type   string            `json:"type"`
	Fields map[string]string `json:"fields"`
	Bars   []shownBar        `json:"bars"`
}

const readAnswers = `Object.fromEntries([...document.querySelectorAll('#answers .answer')].map((c) => [c.dataset.question, {
  type: c.dataset.type,
  fields: Object.fromEntries([...c.querySelectorAll('[data-field]')].map((f) => [f.dataset.field, f.textContent])),
  bars: [...c.querySelectorAll('.bar')].map((b) => ({option: b.dataset.option, p: Number(b.dataset.p),
    value: b.querySelector('.value').textContent, width: b.querySelector('.fill').style.width, chosen: b.classList.contains('chosen')})),
}]))`

const readFacts = `(sel) => Object.fromEntries([...document.querySelectorAll(sel + ' [data-fact]')].map((d) => [d.dataset.fact, d.textContent]))`

// number reads a shown number.
func number(t *testing.T, s string) float64 {
	t.Helper()
	x, err := strconv.ParseFloat(s, 64)
	if err != nil {
		t.Fatalf("shown %q is not a number", s)
	}
	return x
}

func same(a, b float64) bool { return math.Abs(a-b) < 1e-9 }

// curlBody takes the body out of a shown curl command.
func curlBody(t *testing.T, cmd string) string {
	t.Helper()
	i := strings.Index(cmd, "-d '")
	if i < 0 || !strings.HasSuffix(cmd, "'") {
		t.Fatalf("no body in the curl command: %s", cmd)
	}
	return strings.ReplaceAll(cmd[i+4:len(cmd)-1], `'\''`, `'`)
}

// jevAnswer is one answer of a /v1/systemone reply.
type jevAnswer struct {
	Type          string             `json:"type"`
	Choice        string             `json:"choice"`
	Noul          float64            `json:"noul"`
	Score         float64            `json:"score"`
	Confidence    float64            `json:"confidence"`
	Probabilities map[string]float64 `json:"probabilities"`
}

type jevReply struct {
	Model   string               `json:"model"`
	Answers map[string]jevAnswer `json:"answers"`
	Usage   struct {
		InputTokens  int `json:"input_tokens"`
		OutputTokens int `json:"output_tokens"`
	} `json:"usage"`
	LatencyMS int `json:"latency_ms"`
}

// checkShown compares the answer cards with an API reply: the same
// questions, each bar's value and width its probability, the chosen bar
// the API's choice, and the confidence, P(true) and score as answered.
func checkShown(t *testing.T, shown map[string]shownAnswer, api jevReply) {
	t.Helper()
	if len(shown) != len(api.Answers) {
		t.Fatalf("%d answers shown, the API gave %d", len(shown), len(api.Answers))
	}
	for id, a := range api.Answers {
		s, ok := shown[id]
		if !ok || s.Type != a.Type {
			t.Fatalf("answer %s: shown %+v, API %+v", id, s, a)
		}
		switch a.Type {
		case "noul":
			if !same(number(t, s.Fields["noul"]), a.Noul) || len(s.Bars) != 2 || !same(s.Bars[0].P, a.Noul) {
				t.Errorf("%s: shown %+v, API noul %v", id, s, a.Noul)
			}
			continue
		case "choice":
			if s.Fields["choice"] != a.Choice {
				t.Errorf("%s: shown choice %q, API %q", id, s.Fields["choice"], a.Choice)
			}
		case "score":
			if !same(number(t, s.Fields["score"]), a.Score) {
				t.Errorf("%s: shown score %s, API %v", id, s.Fields["score"], a.Score)
			}
		}
		if !same(number(t, s.Fields["confidence"]), a.Confidence) {
			t.Errorf("%s: shown confidence %s, API %v", id, s.Fields["confidence"], a.Confidence)
		}
		if len(s.Bars) != len(a.Probabilities) {
			t.Fatalf("%s: %d bars, %d probabilities", id, len(s.Bars), len(a.Probabilities))
		}
		// The marked bar is the most likely option or level (the first on
		// a tie): for a score, not the level nearest the expected score.
		likeliest := ""
		for _, b := range s.Bars {
			if likeliest == "" || a.Probabilities[b.Option] > a.Probabilities[likeliest] {
				likeliest = b.Option
			}
		}
		chosen := 0
		for _, b := range s.Bars {
			p, ok := a.Probabilities[b.Option]
			if !ok || !same(b.P, p) || !same(number(t, b.Value), p) {
				t.Errorf("%s: bar %+v, API probability %v", id, b, p)
			}
			if w := strings.TrimSuffix(b.Width, "%"); !same(number(t, w)/100, p) {
				t.Errorf("%s: bar %s is %s wide for %v", id, b.Option, b.Width, p)
			}
			if b.Chosen {
				chosen++
				if a.Type == "choice" && b.Option != a.Choice {
					t.Errorf("%s: bar %s marked chosen, the API chose %s", id, b.Option, a.Choice)
				}
				if b.Option != likeliest {
					t.Errorf("%s: bar %s (%v) marked chosen, the most likely is %s (%v)", id, b.Option, b.P, likeliest, a.Probabilities[likeliest])
				}
			}
		}
		if chosen != 1 {
			t.Errorf("%s: %d bars marked chosen", id, chosen)
		}
	}
}

// The playground sends the editor's questions through the fake engine and
// shows exactly what the API answers; its curl command is the same
// request; the decide form shows the gateway's answer and attempts.
func TestBrowserPlayground(t *testing.T) {
	ctx := browser(t)
	s := serve(t, options{})
	bound(t, ctx, chromedp.Navigate(s.URL+"/#playground"), wait(`document.querySelectorAll('#model option').length > 0`))
	if got := eval[[]string](t, ctx, `[...document.querySelectorAll('#model option')].map((o) => o.value)`); len(got) != 1 || got[0] != "fake" {
		t.Fatalf("model picker %v, want the one model the node serves", got)
	}
	bound(t, ctx, chromedp.Click("#send"), wait(`document.querySelectorAll('#answers .answer').length > 0 || document.querySelector('#send-error')`))
	if e := eval[string](t, ctx, `document.querySelector('#send-error')?.textContent ?? ''`); e != "" {
		t.Fatalf("the page shows an error: %s", e)
	}
	shown := eval[map[string]shownAnswer](t, ctx, readAnswers)
	cmd := eval[string](t, ctx, `document.getElementById('curl').textContent`)
	body := curlBody(t, cmd)

	// The fake engine answers the same request the same way every time.
	resp, reply := do(t, "POST", s.URL+"/v1/systemone", body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("the page's request, sent again: %d %s", resp.StatusCode, reply)
	}
	var api jevReply
	if err := json.Unmarshal(reply, &api); err != nil {
		t.Fatal(err)
	}
	if len(api.Answers) != 3 {
		t.Fatalf("the page's request asks %d questions, want its three examples: %s", len(api.Answers), body)
	}
	checkShown(t, shown, api)

	var raw jevReply
	if err := json.Unmarshal([]byte(eval[string](t, ctx, `document.getElementById('raw').textContent`)), &raw); err != nil {
		t.Fatalf("the raw JSON shown is not JSON: %v", err)
	}
	meta := eval[map[string]string](t, ctx, `(`+readFacts+`)('#answer-meta')`)
	if meta["latency_ms"] != strconv.Itoa(raw.LatencyMS) || meta["model"] != api.Model ||
		meta["input_tokens"] != strconv.Itoa(api.Usage.InputTokens) || meta["output_tokens"] != strconv.Itoa(api.Usage.OutputTokens) {
		t.Errorf("shown %v; the reply's latency_ms %d, the API's model %s and usage %+v", meta, raw.LatencyMS, api.Model, api.Usage)
	}
	if fmt.Sprint(raw.Answers) != fmt.Sprint(api.Answers) {
		t.Errorf("the raw JSON shown %v differs from the API's answers %v", raw.Answers, api.Answers)
	}
	// The copied command works as it is.
	out, err := exec.CommandContext(t.Context(), "sh", "-c", cmd).Output()
	if err != nil {
		t.Fatalf("the curl command: %v\n%s", err, cmd)
	}
	var viaCurl jevReply
	if err := json.Unmarshal(out, &viaCurl); err != nil || fmt.Sprint(viaCurl.Answers) != fmt.Sprint(api.Answers) {
		t.Errorf("the curl command answered %s (%v)", out, err)
	}

	// An invalid request shows the API's problems, not answers.
	bound(t, ctx, chromedp.Evaluate[chromedp.Void](`document.querySelector('.question .qid').closest('.question').querySelector('.criteria').value = ''`),
		chromedp.Click("#send"), wait(`document.querySelector('#send-error')`))
	if e := eval[string](t, ctx, `document.querySelector('#send-error').textContent`); !strings.HasPrefix(e, "422") {
		t.Errorf("an empty choice shows %q, want the 422", e)
	}
	bound(t, ctx, chromedp.Reload(), wait(`document.querySelectorAll('#model option').length > 0`),
		chromedp.Click("#send"), wait(`document.querySelectorAll('#answers .answer').length === 3`))

	// Decide.
	bound(t, ctx, chromedp.SetValue("#d-min", "0.5"), chromedp.Click("#d-send"), wait(`document.querySelector('#decide-answer') || document.querySelector('#d-error')`))
	dcmd := eval[string](t, ctx, `document.getElementById('d-curl').textContent`)
	resp, dreply := do(t, "POST", s.URL+"/v1/decide", curlBody(t, dcmd))
	var dec struct {
		Status        string             `json:"status"`
		Decision      *string            `json:"decision"`
		Confidence    float64            `json:"confidence"`
		Probabilities map[string]float64 `json:"probabilities"`
		Rationale     string             `json:"rationale"`
		Attempts      []struct{ Provider, Outcome string }
	}
	if err := json.Unmarshal(dreply, &dec); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("%d %s", resp.StatusCode, dreply)
	}
	shownDec := eval[struct {
		Status   string            `json:"status"`
		Decision string            `json:"decision"`
		Facts    map[string]string `json:"facts"`
		Bars     []shownBar        `json:"bars"`
		Attempts [][]string        `json:"attempts"`
	}](t, ctx, `({status: document.querySelector('#decide-answer').dataset.status,
	  decision: document.querySelector('#decide-answer [data-field=decision]')?.textContent ?? '',
	  facts: (`+readFacts+`)('#decide-answer'),
	  bars: [...document.querySelectorAll('#decide-answer .bar')].map((b) => ({option: b.dataset.option, p: Number(b.dataset.p),
	    value: b.querySelector('.value').textContent, width: b.querySelector('.fill').style.width, chosen: b.classList.contains('chosen')})),
	  attempts: [...document.querySelectorAll('#attempts tbody tr')].map((r) => [...r.cells].map((c) => c.textContent))})`)
	if shownDec.Status != dec.Status || dec.Decision == nil || shownDec.Decision != *dec.Decision ||
		!same(number(t, shownDec.Facts["confidence"]), dec.Confidence) || shownDec.Facts["rationale"] != dec.Rationale {
		t.Errorf("decide shown %+v, API %s", shownDec, dreply)
	}
	if len(shownDec.Bars) != len(dec.Probabilities) || len(shownDec.Attempts) != len(dec.Attempts) {
		t.Fatalf("decide shown %+v, API %s", shownDec, dreply)
	}
	for _, b := range shownDec.Bars {
		if !same(b.P, dec.Probabilities[b.Option]) || !same(number(t, b.Value), b.P) || b.Chosen != (b.Option == *dec.Decision) {
			t.Errorf("decide bar %+v, API %s", b, dreply)
		}
	}
	for i, a := range dec.Attempts {
		if shownDec.Attempts[i][0] != a.Provider || shownDec.Attempts[i][1] != a.Outcome {
			t.Errorf("attempt %d shown %v, API %+v", i, shownDec.Attempts[i], a)
		}
	}
	screenshot(t, ctx, "playground.png")
}

// The playground's Decisions tab sends the editor's questions as the
// same request on OpenAI's Decisions wire and shows what POST
// /v1/decisions answers, as the System One tab shows its reply: the same
// numbers, since one read answers both; with a label-mass gate over what
// the engine puts on the labels, each question is a refusal card saying
// why, and the curl command carries the header.
func TestBrowserPlaygroundDecisions(t *testing.T) {
	ctx := browser(t)
	s := serve(t, options{})
	bound(t, ctx, chromedp.Navigate(s.URL+"/#playground"), wait(`document.querySelectorAll('#model option').length > 0`),
		chromedp.Click("#send"), wait(`document.querySelectorAll('#answers .answer').length === 3`))
	jevShown := eval[map[string]shownAnswer](t, ctx, readAnswers)
	// What the engine was asked for the System One tab's request: each
	// question's prompt and labels, in no particular order.
	asked := func() []string {
		var out []string
		for _, r := range s.fakes[0].Inferences() {
			out = append(out, r.System+"\x00"+r.User+"\x00"+strings.Join(r.Labels, ","))
		}
		slices.Sort(out)
		s.fakes[0].Reset()
		return out
	}
	jevAsked := asked()
	if len(jevAsked) == 0 {
		t.Fatal("the System One tab's request reached no engine")
	}
	bound(t, ctx, chromedp.Click(`[data-wire=decisions]`), wait(`document.getElementById('route').textContent === 'POST /v1/decisions'`))
	// The editor says what the Decisions wire says: predicate, not noul.
	editor := eval[[]string](t, ctx, `[...document.querySelectorAll('#questions .kind'), ...document.querySelectorAll('[data-add]')].map((k) => k.textContent)`)
	if got := strings.Join(editor, ","); got != "choice,predicate,score,+ choice,+ predicate,+ score" {
		t.Errorf("on the Decisions tab the editor names the kinds %s, not in the wire's words", got)
	}
	bound(t, ctx, chromedp.Evaluate[chromedp.Void](`document.getElementById('answers').replaceChildren()`),
		chromedp.Click("#send"), wait(`document.querySelectorAll('#answers .answer').length > 0 || document.querySelector('#send-error')`))
	if e := eval[string](t, ctx, `document.querySelector('#send-error')?.textContent ?? ''`); e != "" {
		t.Fatalf("the page shows an error: %s", e)
	}
	// The same state and questions reach the engine as the same prompts:
	// the tab translated the editor, it did not drop or reword any of it.
	if got := asked(); !slices.Equal(got, jevAsked) {
		t.Errorf("the Decisions tab asked the engine\n%q\nthe System One tab\n%q", got, jevAsked)
	}
	cmd := eval[string](t, ctx, `document.getElementById('curl').textContent`)
	if !strings.Contains(cmd, "/v1/decisions") {
		t.Fatalf("the curl command is not for /v1/decisions: %s", cmd)
	}
	body := curlBody(t, cmd)
	var sent struct {
		Questions []struct {
			Type string `json:"type"`
			Name string `json:"name"`
		} `json:"questions"`
	}
	if err := json.Unmarshal([]byte(body), &sent); err != nil {
		t.Fatalf("the page sent %s: %v", body, err)
	}
	var sentKinds []string
	for _, q := range sent.Questions {
		sentKinds = append(sentKinds, q.Name+":"+q.Type)
	}
	if got := strings.Join(sentKinds, ","); got != "department:choice,urgent:predicate,frustration:score" {
		t.Errorf("the page sent the questions %s, want the editor's three in order, in the Decisions wire's words", got)
	}
	resp, reply := do(t, "POST", s.URL+"/v1/decisions", body)
	var dec struct {
		Model   string `json:"model"`
		Answers []struct {
			Type          string  `json:"type"`
			Name          string  `json:"name"`
			Probability   float64 `json:"probability"`
			Choice        string  `json:"choice"`
			Score         float64 `json:"score"`
			Confidence    float64 `json:"confidence"`
			Probabilities []struct {
				Value       any     `json:"value"`
				Probability float64 `json:"probability"`
			} `json:"probabilities"`
		} `json:"answers"`
	}
	if err := json.Unmarshal(reply, &dec); err != nil || resp.StatusCode != http.StatusOK || len(dec.Answers) != 3 {
		t.Fatalf("the page's request, sent again: %d %s", resp.StatusCode, reply)
	}
	// The Decisions reply, read as the System One reply it equals.
	api := jevReply{Model: dec.Model, Answers: map[string]jevAnswer{}}
	for _, a := range dec.Answers {
		ja := jevAnswer{Type: map[string]string{"predicate": "noul"}[a.Type], Choice: a.Choice, Noul: a.Probability, Score: a.Score, Confidence: a.Confidence}
		if ja.Type == "" {
			ja.Type = a.Type
			ja.Probabilities = map[string]float64{}
			for _, p := range a.Probabilities {
				ja.Probabilities[fmt.Sprint(p.Value)] = p.Probability
			}
		}
		api.Answers[a.Name] = ja
	}
	shown := eval[map[string]shownAnswer](t, ctx, readAnswers)
	checkShown(t, shown, api)
	if fmt.Sprint(shown) != fmt.Sprint(jevShown) {
		t.Errorf("the Decisions tab shows %v, the System One tab %v", shown, jevShown)
	}
	if kinds := eval[[]string](t, ctx, `[...document.querySelectorAll('#answers .answer .kind')].map((k) => k.textContent)`); strings.Join(kinds, ",") != "choice,predicate,score" {
		t.Errorf("the cards are labelled %v, in the Decisions wire's words", kinds)
	}
	var raw struct {
		Model   string            `json:"model"`
		Answers []json.RawMessage `json:"answers"`
		Usage   map[string]any    `json:"usage"`
	}
	if err := json.Unmarshal([]byte(eval[string](t, ctx, `document.getElementById('raw').textContent`)), &raw); err != nil ||
		raw.Model != dec.Model || len(raw.Answers) != 3 || len(raw.Usage) == 0 {
		t.Errorf("the raw JSON shown is not the Decisions reply: %+v (%v)", raw, err)
	}
	meta := eval[map[string]string](t, ctx, `(`+readFacts+`)('#answer-meta')`)
	if id := meta["request id"]; !strings.HasPrefix(id, "req_") || meta["model"] != dec.Model {
		t.Errorf("shown %v: want the reply's x-request-id and model %s", meta, dec.Model)
	}

	// A gate between the engine's label mass on the predicate (0.75 of
	// the fake's halving over two labels) and on the others (0.875 over
	// three) refuses the predicate alone, saying why, and answers the
	// others as before; the curl command carries the header.
	bound(t, ctx, chromedp.SetValue("#min-mass", "0.8"), chromedp.Evaluate[chromedp.Void](`document.getElementById('answers').replaceChildren()`),
		chromedp.Click("#send"), wait(`document.querySelectorAll('#answers .answer').length === 3 || document.querySelector('#send-error')`))
	gated := eval[map[string]shownAnswer](t, ctx, readAnswers)
	for id, a := range gated {
		if id == "urgent" {
			if a.Type != "refusal" || a.Fields["why"] != "label mass 0.75 < 0.8" || len(a.Bars) != 0 {
				t.Errorf("the gated predicate is shown as %+v, want a refusal saying its label mass", a)
			}
		} else if fmt.Sprint(a) != fmt.Sprint(jevShown[id]) {
			t.Errorf("%s under the gate is shown as %+v, without it %+v", id, a, jevShown[id])
		}
	}
	if len(gated) != 3 {
		t.Errorf("%d cards under the gate, want the three questions", len(gated))
	}
	if cmd := eval[string](t, ctx, `document.getElementById('curl').textContent`); !strings.Contains(cmd, `-H 'X-System1-Min-Label-Mass: 0.8'`) {
		t.Errorf("the curl command does not carry the gate: %s", cmd)
	}
	// A gate over all of it refuses every question.
	bound(t, ctx, chromedp.SetValue("#min-mass", "1"), chromedp.Click("#send"),
		wait(`document.querySelectorAll('#answers .answer[data-type=refusal]').length === 3`))
	why := eval[[]string](t, ctx, `[...document.querySelectorAll('#answers .answer [data-field=why]')].map((w) => w.textContent)`)
	if len(why) != 3 {
		t.Errorf("%d refusals say why, want 3", len(why))
	}
	for _, w := range why {
		if !strings.HasPrefix(w, "label mass 0.") || !strings.HasSuffix(w, " < 1") {
			t.Errorf("a refusal card says %q", w)
		}
	}
	// The System One tab, under the same gate, shows the 422 naming them.
	bound(t, ctx, chromedp.Click(`[data-wire=systemone]`), wait(`document.getElementById('route').textContent === 'POST /v1/systemone'`),
		chromedp.Click("#send"), wait(`document.querySelector('#send-error')`))
	if e := eval[string](t, ctx, `document.querySelector('#send-error').textContent`); !strings.HasPrefix(e, "422") || !strings.Contains(e, "questions.department: system1 will not stand behind this answer") {
		t.Errorf("the System One tab under the gate shows %q", e)
	}
	screenshot(t, ctx, "playground-decisions.png")
}

// histogramQuantile is Prometheus' histogram_quantile over one route's
// buckets in a /metrics text, read here independently of the page's
// parser.
func histogramQuantile(t *testing.T, text, route string, q float64) float64 {
	t.Helper()
	re := regexp.MustCompile(`(?m)^system1_request_seconds_bucket\{route="` + regexp.QuoteMeta(route) + `",le="([^"]+)"\} (\S+)$`)
	var les, counts []float64
	for _, m := range re.FindAllStringSubmatch(text, -1) {
		le := math.Inf(1)
		if m[1] != "+Inf" {
			le = number(t, m[1])
		}
		les, counts = append(les, le), append(counts, number(t, m[2]))
	}
	if len(les) == 0 {
		t.Fatalf("no buckets for %s in /metrics", route)
	}
	rank := q * counts[len(counts)-1]
	for i := range les {
		if counts[i] >= rank {
			if math.IsInf(les[i], 1) {
				return les[i-1]
			}
			lower, below := 0.0, 0.0
			if i > 0 {
				lower, below = les[i-1], counts[i-1]
			}
			// In the page's order of operations, so that a value on a
			// rounding edge rounds the same way.
			return lower + (les[i]-lower)*((rank-below)/(counts[i]-below))
		}
	}
	return math.NaN()
}

// sample is one line of a /metrics text.
type sample struct {
	name   string
	labels map[string]string
	value  float64
}

// samples reads a /metrics text, independently of the page's parser.
func samples(t *testing.T, text string) []sample {
	t.Helper()
	line := regexp.MustCompile(`^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)$`)
	label := regexp.MustCompile(`([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"`)
	var out []sample
	for _, l := range strings.Split(text, "\n") {
		m := line.FindStringSubmatch(l)
		if m == nil || strings.HasPrefix(l, "#") {
			continue
		}
		s := sample{name: m[1], labels: map[string]string{}, value: number(t, m[3])}
		for _, lm := range label.FindAllStringSubmatch(m[2], -1) {
			s.labels[lm[1]] = lm[2]
		}
		out = append(out, s)
	}
	return out
}

// checkEngines compares the engine table with /metrics and /health: per
// node and model the calls and the errors (calls that did not answer ok),
// per node the cooldowns, and the failovers /health reports per node
// ("—" where it reports none: /metrics counts them per model alone).
func checkEngines(t *testing.T, ctx context.Context, metricsText string, healthBody []byte) {
	t.Helper()
	rows := eval[[]map[string]string](t, ctx, `[...document.querySelectorAll('#engines tbody tr[data-node]')].map((r) =>
	  Object.fromEntries([['node', r.dataset.node], ['model', r.dataset.model], ...[...r.querySelectorAll('[data-col]')].map((c) => [c.dataset.col, c.textContent])]))`)
	var health struct {
		Nodes []map[string]any `json:"nodes"`
	}
	if err := json.Unmarshal(healthBody, &health); err != nil {
		t.Fatal(err)
	}
	calls, errs, cooldowns := map[string]float64{}, map[string]float64{}, map[string]float64{}
	for _, s := range samples(t, metricsText) {
		switch s.name {
		case "system1_engine_seconds_count":
			calls[s.labels["node"]+" "+s.labels["model"]] += s.value
		case "system1_engine_attempts_total":
			if s.labels["outcome"] != "ok" {
				errs[s.labels["node"]+" "+s.labels["model"]] += s.value
			}
		case "system1_cooldowns_total":
			cooldowns[s.labels["node"]] += s.value
		}
	}
	if len(rows) != len(calls) || len(rows) == 0 {
		t.Fatalf("%d engine rows shown, /metrics has %d node and model pairs: %v", len(rows), len(calls), rows)
	}
	failed := 0.0
	for _, r := range rows {
		k := r["node"] + " " + r["model"]
		failovers := "—"
		for _, n := range health.Nodes {
			if f, ok := n["failovers"].(float64); ok && n["name"] == r["node"] {
				failovers = strconv.FormatFloat(f, 'f', -1, 64)
			}
		}
		want := map[string]string{
			"calls":     strconv.FormatFloat(calls[k], 'f', -1, 64),
			"errors":    strconv.FormatFloat(errs[k], 'f', -1, 64),
			"cooldowns": strconv.FormatFloat(cooldowns[r["node"]], 'f', -1, 64),
			"failovers": failovers,
		}
		for col, w := range want {
			if r[col] != w {
				t.Errorf("engine row %s: %s shown %q, want %q", k, col, r[col], w)
			}
		}
		failed += errs[k]
	}
	if failed == 0 || len(cooldowns) == 0 {
		t.Errorf("%v engine errors shown and cooldowns %v in /metrics: their columns went untested", failed, cooldowns)
	}
}

// The dashboard's node table is /health's nodes, a cooling node with its
// reason; the request table's count and percentiles are /metrics'; with
// no calibration endpoint it says that no report is available.
func TestBrowserDashboard(t *testing.T) {
	ctx := browser(t)
	s := serve(t, options{nodes: 2, sick: true})
	coolDown(t, s)
	for range 5 {
		do(t, "POST", s.URL+"/v1/systemone", jev)
	}
	bound(t, ctx, chromedp.Navigate(s.URL+"/#dashboard"), wait(`Number(document.body.dataset.refreshed) >= 1`))
	rows := eval[[]map[string]string](t, ctx, `[...document.querySelectorAll('#nodes tbody tr')].map((r) => ({name: r.dataset.node,
	  healthy: r.querySelector('[data-col=healthy]').textContent, in_flight: r.querySelector('[data-col=in_flight]').textContent,
	  queued: r.querySelector('[data-col=queued]').textContent, until: r.querySelector('[data-col=cool_until]').title,
	  why: r.querySelector('[data-col=why]').textContent}))`)
	_, hb := get(t, s.URL+"/health")
	var health struct {
		Status string `json:"status"`
		Nodes  []struct {
			Name       string `json:"name"`
			Healthy    bool   `json:"healthy"`
			InFlight   int    `json:"in_flight"`
			Queued     int    `json:"queued"`
			CoolUntil  string `json:"cool_until"`
			CoolReason string `json:"cool_reason"`
		} `json:"nodes"`
	}
	if err := json.Unmarshal(hb, &health); err != nil {
		t.Fatal(err)
	}
	if len(rows) != len(health.Nodes) || len(rows) != 2 {
		t.Fatalf("%d rows shown, /health has %d nodes: %s", len(rows), len(health.Nodes), hb)
	}
	cooling := 0
	for i, n := range health.Nodes {
		r := rows[i]
		want := "healthy"
		if !n.Healthy {
			want = "cooling down"
			cooling++
		}
		if r["name"] != n.Name || r["healthy"] != want || r["in_flight"] != strconv.Itoa(n.InFlight) || r["queued"] != strconv.Itoa(n.Queued) ||
			r["until"] != n.CoolUntil || !strings.Contains(r["why"], n.CoolReason) {
			t.Errorf("row %v, /health %+v", r, n)
		}
	}
	if cooling != 1 {
		t.Fatalf("%d nodes cooling in /health, want the sick one: %s", cooling, hb)
	}
	// A node is down: the badge is not a green ok, whatever /health's
	// status says.
	badge := eval[struct{ Text, Class string }](t, ctx, `(() => { const b = document.querySelector('#server [data-fact=status] .status');
	  return {text: b.textContent, class: b.className}; })()`)
	if badge.Text != "degraded" || badge.Class != "status degraded" {
		t.Errorf("with a node cooling down the status badge is %+v (/health says %q)", badge, health.Status)
	}
	_, mt := get(t, s.URL+"/metrics")
	checkEngines(t, ctx, string(mt), hb)
	route := "POST /v1/systemone"
	shown := eval[map[string]string](t, ctx, `Object.fromEntries([...document.querySelector('#routes tbody tr[data-route="`+route+`"]').cells].map((c) => [c.dataset.col ?? 'route', c.textContent]))`)
	count := regexp.MustCompile(`(?m)^system1_request_seconds_count\{route="POST /v1/systemone"\} (\d+)$`).FindStringSubmatch(string(mt))
	if count == nil || shown["requests"] != count[1] {
		t.Errorf("requests shown %q, /metrics counts %v", shown["requests"], count)
	}
	for col, q := range map[string]float64{"p50": .5, "p90": .9, "p99": .99} {
		want := toFixed(histogramQuantile(t, string(mt), route, q)*1000, 1)
		if shown[col] != want {
			t.Errorf("%s shown %q ms, histogram_quantile of /metrics gives %s", col, shown[col], want)
		}
	}
	if got := eval[string](t, ctx, `document.getElementById('calibration').textContent`); !strings.Contains(got, "No calibration report is available (GET /v1/calibration answered 503)") {
		t.Errorf("calibration section says %q", got)
	}
	screenshot(t, ctx, "dashboard.png")
}

// With auth on, the page asks for a key and, until it has one, shows only
// what /health gives a caller without a key and /metrics, which needs
// none, and asks for nothing else; a wrong key is refused and dropped; the
// right one lives in sessionStorage alone and opens the playground.
func TestBrowserAuth(t *testing.T) {
	ctx := browser(t)
	s := serve(t, options{keys: []string{"sk-test"}})
	bound(t, ctx, chromedp.Navigate(s.URL+"/#dashboard"), wait(`document.body.dataset.auth === 'locked' && Number(document.body.dataset.refreshed) >= 1`))
	locked := eval[struct {
		Form, Playground         bool
		Nodes, Routes            int
		Calibration, MetricsNote string
		Fetched                  []string
	}](t, ctx, `({form: !document.getElementById('key-form').hidden, playground: !document.querySelector('#playground .unlocked').hidden,
	  nodes: document.querySelectorAll('#nodes tbody tr').length, routes: document.querySelectorAll('#routes tbody tr').length,
	  calibration: document.getElementById('calibration').textContent, metricsNote: document.getElementById('metrics-note').textContent,
	  fetched: performance.getEntriesByType('resource').map((e) => new URL(e.name).pathname).filter((p) => !p.startsWith('/ui/'))})`)
	_, hb := get(t, s.URL+"/health")
	var health struct {
		Nodes []json.RawMessage `json:"nodes"`
	}
	_ = json.Unmarshal(hb, &health)
	if !locked.Form || locked.Playground || locked.Nodes != len(health.Nodes) || !strings.Contains(locked.Calibration, "needs a key") {
		t.Errorf("without a key the page shows %+v; /health without a key gives %s", locked, hb)
	}
	// /metrics answers without a key, so the page shows it.
	if resp, _ := get(t, s.URL+"/metrics"); resp.StatusCode != http.StatusOK || locked.Routes == 0 || strings.Contains(locked.MetricsNote, "key") {
		t.Errorf("without a key /metrics answers %d, and the page shows %d routes and says %q", resp.StatusCode, locked.Routes, locked.MetricsNote)
	}
	for _, p := range locked.Fetched {
		if p != "/health" && p != "/v1/models" && p != "/metrics" {
			t.Errorf("without a key the page asked for %s", p)
		}
	}

	bound(t, ctx, chromedp.SendKeys("#key-input", "sk-wrong"), chromedp.Click("#key-form button[type=submit]"),
		wait(`document.getElementById('key-error').textContent !== ''`))
	if k := eval[string](t, ctx, `sessionStorage.getItem('system1.key') ?? ''`); k != "" {
		t.Errorf("a refused key is kept: %q", k)
	}
	bound(t, ctx, chromedp.SendKeys("#key-input", "sk-test"), chromedp.Click("#key-form button[type=submit]"),
		wait(`document.body.dataset.auth === 'open' && document.querySelectorAll('#model option').length > 0`))
	stored := eval[struct {
		Session      string
		Local        int
		Cookie, Auth string
	}](t, ctx, `({session: sessionStorage.getItem('system1.key'), local: localStorage.length, cookie: document.cookie, auth: document.getElementById('auth-state').textContent})`)
	if stored.Session != "sk-test" || stored.Local != 0 || stored.Cookie != "" || stored.Auth != "key accepted" {
		t.Errorf("with a key: %+v, want it in sessionStorage only", stored)
	}
	if v := eval[string](t, ctx, `document.getElementById('key-input').value`); v != "" {
		t.Errorf("the key stays in the input: %q", v)
	}
	bound(t, ctx, chromedp.Navigate(s.URL+"/#playground"), wait(`document.querySelectorAll('#model option').length > 0`),
		chromedp.Click("#send"), wait(`document.querySelectorAll('#answers .answer').length === 3`))
	if cmd := eval[string](t, ctx, `document.getElementById('curl').textContent`); strings.Contains(cmd, "sk-test") || !strings.Contains(cmd, "$SYSTEM1_KEY") {
		t.Errorf("the curl command shows the key or lacks its variable: %s", cmd)
	}
	bound(t, ctx, chromedp.Navigate(s.URL+"/#dashboard"), wait(`document.querySelectorAll('#routes tbody tr').length > 0`))

	// Another tab of a fresh session has no key: sessionStorage only.
	fresh, cancel := chromedp.NewContext(ctx)
	defer cancel()
	bound(t, fresh, chromedp.Navigate(s.URL+"/"), wait(`document.body.dataset.auth === 'locked'`))
}

// calibrationReport is a report of the shape GET /v1/calibration
// answers with, served by a stand-in so that its numbers are known.
const calibrationReport = `{"buckets":[
 {"model":"qwen2.5-0.5b","kind":"choice","options":3,"outcomes":412,"accuracy":0.81,"accuracy_calibrated":0.83,"ece":0.093,"ece_calibrated":0.021,"nll":0.52,"nll_calibrated":0.44,"temperature":1.7,
  "method":"vector","biases":[-0.9,0.2,0.4],
  "sets":[{"requested":0.9,"coverage":0.9,"method":"lac","outcomes":412,"threshold":0.7,"held_out":{"n":412,"covered":373,"coverage":0.9053398058252428,"mean_size":1.42,"empty":0,"singletons":240},"since_fit":{"n":0,"covered":0,"coverage":0,"mean_size":0,"empty":0,"singletons":0}}],
  "gate":{"threshold":0.72,"target_error":0.05,"coverage":0.64,"wrong_above":0.048},
  "reliability":[{"confidence":0.35,"accuracy":0.3,"count":20},{"confidence":0.55,"accuracy":0.5,"count":61},{"confidence":0.75,"accuracy":0.78,"count":140},{"confidence":0.95,"accuracy":0.96,"count":191}]},
 {"model":"qwen2.5-0.5b","kind":"noul","options":2,"outcomes":97,"accuracy":0.7,"ece":0.12,"ece_calibrated":0.05,"nll":0.61,"nll_calibrated":0.57,"temperature":1.3,
  "gate":{"threshold":0.8,"target_error":0.1,"coverage":0.41,"wrong_above":0.09},
  "reliability":[{"confidence":0.6,"accuracy":0.55,"count":40},{"confidence":0.9,"accuracy":0.85,"count":57}]},
 {"model":"qwen2.5-0.5b","kind":"score","options":3,"outcomes":12,"accuracy":0.5,"ece":0.2,"ece_calibrated":0.2,"nll":1.01,"nll_calibrated":1.01,"temperature":1,
  "gate":{"threshold":null,"target_error":0.02,"coverage":0,"wrong_above":0,"above":0,"upper_bound":1},
  "reliability":[{"confidence":0.5,"accuracy":0.5,"count":12}]}],
 "loop":{"refits":true,"every_s":600,"min_outcomes":30,"outcomes":521,"waiting_for":18,"status":"waiting for 18 more outcomes: qwen2.5-0.5b's score answers of 3 have 12 new of the 30 a refit needs, checked every 10m0s"},
 "drift":[
 {"model":"qwen2.5-0.5b","signature":"choice/3/7a929410aed7","kind":"choice","options":["billing","technical","sales"],"psi":0.393,
  "reference":200,"current":100,"confidence_psi":0.393,"label_psi":0.4091,"mean_confidence":[0.843,0.9487],"noise":[0.12,0.02],"threshold":0.25,
  "alarm":true,"reason":"the confidence moved: PSI 0.393 less noise 0.120 reaches 0.25"},
 {"model":"qwen2.5-0.5b","signature":"noul/2/1b2c3d4e5f60","kind":"noul","options":["true","false"],"psi":0.025,
  "reference":180,"current":90,"confidence_psi":0.025,"label_psi":0.0123,"mean_confidence":[0.71,0.7049],"noise":[0.135,0.0167],"threshold":0.25,"alarm":false}],
 "cascades":[
 {"model":"triage","target_error":0.05,"delta":0.05,"questions":300,"decisions":120,"certified":false,
  "cost_per_1000":"0.412500000001","last_stage_cost_per_1000":"1.25",
  "stages":[
   {"stage":"qwen2.5-0.5b","asked":300,"answered":210,"share":0.7,"wrong":6,"error":0.02857142857142857,"upper_bound":0.05514,
    "thresholds":[{"kind":"choice","bucket":"3","target_error":0.05,"delta":0.05,"certified":true,"threshold":0.81,"n":412,"above":250,"wrong_above":4,"upper_bound":0.0398}]},
   {"stage":"qwen2.5-7b","asked":90,"answered":90,"share":0.3,"wrong":9,"error":0.1,"upper_bound":0.1624,"thresholds":[]}]},
 {"model":"unpriced","target_error":0.2,"delta":0.05,"questions":40,"decisions":40,"certified":true,
  "cost_per_1000":null,"last_stage_cost_per_1000":null,
  "stages":[
   {"stage":"small","asked":40,"answered":40,"share":1,"wrong":2,"error":0.05,"upper_bound":0.1487,"thresholds":[]},
   {"stage":"large","asked":0,"answered":0,"share":0,"wrong":0,"error":0,"upper_bound":1,"thresholds":[]}]}]}`

// shadowReport is a report of the shape GET /v1/shadow answers with: one
// signature with outcomes on both sides, one without.
const shadowReport = `{"since":"2026-11-27T00:00:00Z","until":"2026-12-04T00:00:00Z","source":"shadow","signatures":[
 {"model":"qwen2.5-0.5b","candidate":"qwen2.5-1.5b","signature":"choice/3/7a929410aed7","kind":"choice","options":["billing","technical","sales"],
  "n":200,"skipped":0,"agreement":0.73,"mean_abs_change":0.1403,"confidence_shift":0.1042,"labelled":200,"labelled_requests":200,
  "primary_score":{"accuracy":0.66,"ece":0.205,"nll":1.065},"candidate_score":{"accuracy":0.48,"ece":0.476,"nll":4.338},
  "nll_diff":3.273,"nll_diff_se":0.2881,"accuracy_diff":-0.18,"accuracy_diff_se":0.0312,
  "recommendation":"keep","evidence":"keep: the candidate is worse: on 200 questions with outcomes its accuracy is 0.480 against 0.660"},
 {"model":"qwen2.5-0.5b","candidate":"qwen2.5-1.5b","signature":"noul/2/1b2c3d4e5f60","kind":"noul","options":["true","false"],
  "n":12,"skipped":0,"agreement":1,"mean_abs_change":0.0213,"confidence_shift":-0.004,"labelled":0,"labelled_requests":0,
  "nll_diff":0,"nll_diff_se":0,"accuracy_diff":0,"accuracy_diff_se":0,
  "recommendation":"undecided","evidence":"undecided: 12 pairs, fewer than 20"}]}`

// A stand-in server that answers /health in the bare form to a caller
// without a key and serves a calibration report: the page copes with the
// bare form and draws the report, per model and kind, with its gate.
func TestBrowserBareHealthAndCalibration(t *testing.T) {
	ctx := browser(t)
	st := standIn(t)
	bound(t, ctx, chromedp.Navigate(st.URL+"/#dashboard"), wait(`document.body.dataset.auth === 'locked' && Number(document.body.dataset.refreshed) >= 1`))
	note := eval[string](t, ctx, `document.getElementById('nodes-note').textContent`)
	status := eval[string](t, ctx, `document.querySelector('#server [data-fact=status]').textContent`)
	if status != "ok" || !strings.Contains(note, "status alone") || eval[int](t, ctx, `document.querySelectorAll('#nodes tbody tr').length`) != 0 {
		t.Errorf("bare /health shown as status %q, note %q", status, note)
	}
	bound(t, ctx, chromedp.SendKeys("#key-input", "k"), chromedp.Click("#key-form button[type=submit]"),
		wait(`document.querySelectorAll('#calibration [data-model]').length > 0 && document.querySelectorAll('#nodes tbody tr').length > 0`))
	// With the key: /health's degraded status, and its per-node failovers
	// and cooldowns beside /metrics' calls and errors.
	if got := eval[string](t, ctx, `document.querySelector('#server [data-fact=status] .status').className`); got != "status degraded" {
		t.Errorf("a degraded /health shown with the badge %q", got)
	}
	engines := eval[[]string](t, ctx, `[...document.querySelectorAll('#engines tbody tr')].map((r) => r.dataset.node + ' ' +
	  ['calls', 'errors', 'failovers', 'cooldowns'].map((c) => r.querySelector('[data-col=' + c + ']')?.textContent).join(' '))`)
	if want := []string{"gpu0 7 2 1 0", "gpu1 0 0 4 3"}; fmt.Sprint(engines) != fmt.Sprint(want) {
		t.Errorf("engine rows (node calls errors failovers cooldowns) %q, want %q", engines, want)
	}
	cards := eval[[]struct {
		Model, Kind string
		Facts       map[string]string
		Points      []int
	}](t, ctx, `[...document.querySelectorAll('#calibration [data-model]')].map((c) => ({model: c.dataset.model, kind: c.dataset.kind,
	  facts: Object.fromEntries([...c.querySelectorAll('[data-fact]')].map((d) => [d.dataset.fact, d.textContent])),
	  points: [...c.querySelectorAll('circle.pt')].map((p) => Number(p.dataset.count))}))`)
	var report struct {
		Buckets []struct {
			Model, Kind string
			Accuracy    float64
			Gate        struct {
				Threshold   *float64
				Coverage    float64
				TargetError float64 `json:"target_error"`
			}
			Reliability []struct{ Count int }
		}
	}
	if err := json.Unmarshal([]byte(calibrationReport), &report); err != nil {
		t.Fatal(err)
	}
	if len(cards) != len(report.Buckets) {
		t.Fatalf("%d cards for %d buckets", len(cards), len(report.Buckets))
	}
	// The learning loop says what it waits for, in the report's words.
	var loop struct{ Loop struct{ Status string } }
	if err := json.Unmarshal([]byte(calibrationReport), &loop); err != nil {
		t.Fatal(err)
	}
	if got := eval[string](t, ctx, `document.getElementById('loop')?.textContent ?? ''`); !strings.Contains(got, loop.Loop.Status) {
		t.Errorf("the page's learning loop says %q, the report %q", got, loop.Loop.Status)
	}
	// Calibrated accuracy, the calibrator and the prediction sets' held-out
	// coverage are shown where the report gives them, to four significant
	// digits.
	if f := cards[0].Facts; f["accuracy calibrated"] != "0.83" || f["calibrator"] != "vector" || f["sets at 0.9"] != "held out 0.9053 (size 1.42); from 412 outcomes" {
		t.Errorf("the first card's facts %v", f)
	}
	for i, b := range report.Buckets {
		c := cards[i]
		if c.Model != b.Model || c.Kind != b.Kind || !same(number(t, c.Facts["accuracy"]), b.Accuracy) || len(c.Points) != len(b.Reliability) {
			t.Errorf("card %+v for bucket %+v", c, b)
		}
		gate := c.Facts["suggested gate"]
		if b.Gate.Threshold == nil {
			// No gate holds the bound: the card says so, with the target,
			// and prints no threshold, no coverage.
			_, coverage := c.Facts["coverage"]
			if !strings.HasPrefix(gate, "none") || !strings.Contains(gate, strconv.FormatFloat(b.Gate.TargetError, 'f', -1, 64)) ||
				strings.Contains(gate, "—") || strings.Contains(gate, "-") || coverage {
				t.Errorf("%s %s has no gate; the card says %q (facts %v)", b.Model, b.Kind, gate, c.Facts)
			}
		} else if !same(number(t, c.Facts["coverage"]), b.Gate.Coverage) || !strings.Contains(gate, strconv.FormatFloat(*b.Gate.Threshold, 'f', -1, 64)) {
			t.Errorf("card %+v for bucket %+v", c, b)
		}
		for j, r := range b.Reliability {
			if c.Points[j] != r.Count {
				t.Errorf("%s %s point %d has count %d, want %d", b.Model, b.Kind, j, c.Points[j], r.Count)
			}
		}
	}
	bound(t, ctx, chromedp.ScrollIntoView("#calibration"))
	screenshot(t, ctx, "calibration.png")
}

// GET /v1/calibration reports a model's builds apart (a bucket per
// fingerprint): the dashboard's card names the build, so that the two
// cards of one model, kind and bucket can be told apart.
func TestBrowserCalibrationBuilds(t *testing.T) {
	ctx := browser(t)
	mux := http.NewServeMux()
	web.Register(mux)
	js := func(body string) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write([]byte(body))
		}
	}
	mux.Handle("GET /health", js(`{"status":"ok","auth":false,"nodes":[]}`))
	mux.Handle("GET /v1/models", js(`{"models":[],"object":"list","data":[]}`))
	bucket := func(fp string, acc float64) string {
		return fmt.Sprintf(`{"model":"m","kind":"choice","bucket":"3","outcomes":50,"accuracy":%v,"accuracy_calibrated":%v,"ece":0.1,"ece_calibrated":0.1,`+
			`"nll":0.5,"nll_calibrated":0.5,"brier":0.2,"brier_calibrated":0.2,"temperature":1,"method":"temperature",`+
			`"gate":{"threshold":null,"target_error":0.02,"coverage":0,"wrong_above":0,"above":0,"upper_bound":1},"fingerprint":%q,`+
			`"reliability":[{"confidence":0.9,"accuracy":%v,"count":50}],"sets":[]}`, acc, acc, fp, acc)
	}
	mux.Handle("GET /v1/calibration", js(`{"since":"2026-12-01T00:00:00Z","until":"2026-12-08T00:00:00Z","target_error":0.02,"buckets":[`+
		bucket("3f2a09c1d4e5b678", 0.9)+`,`+bucket("0badc0ffee123456", 0.6)+`],"label_mass":[],"drift":[]}`))
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	bound(t, ctx, chromedp.Navigate(srv.URL+"/#dashboard"), wait(`document.querySelectorAll('#calibration [data-model]').length === 2`))
	cards := eval[[]string](t, ctx, `[...document.querySelectorAll('#calibration [data-model] h3')].map((e) => e.textContent)`)
	for i, fp := range []string{"3f2a09c1d4e5b678", "0badc0ffee123456"} {
		if !strings.Contains(cards[i], fp) {
			t.Errorf("card %d is headed %q, not naming its build %s (the cards: %q)", i, cards[i], fp, cards)
		}
	}
}

// The dashboard's drift and shadow tables show what the API answers: a
// row per drift entry of GET /v1/calibration and per signature of GET
// /v1/shadow, in order, each number as the reply gives it (to four
// significant digits, as the page prints every number), an alarm and a
// recommendation as the reply says them.
func TestBrowserDriftAndShadow(t *testing.T) {
	ctx := browser(t)
	st := standIn(t)
	bound(t, ctx, chromedp.Navigate(st.URL+"/#dashboard"), wait(`document.body.dataset.auth === 'locked' && Number(document.body.dataset.refreshed) >= 1`))
	if note := eval[string](t, ctx, `document.getElementById('shadow-note').textContent`); note != "No shadow report is available (it needs a key)." {
		t.Errorf("without a key the shadow table says %q", note)
	}
	bound(t, ctx, chromedp.SendKeys("#key-input", "k"), chromedp.Click("#key-form button[type=submit]"),
		wait(`document.querySelectorAll('#drift tbody tr').length > 0 && document.querySelectorAll('#shadow tbody tr').length > 0`))
	table := func(id string) []map[string]string {
		return eval[[]map[string]string](t, ctx, `[...document.querySelectorAll('#`+id+` tbody tr')].map((r) => Object.fromEntries([...r.cells].map((c) => [c.dataset.col, c.textContent])))`)
	}
	// four is a number as the page prints it: four significant digits.
	four := func(x float64) string { return strconv.FormatFloat(x, 'g', 4, 64) }

	var cal struct {
		Drift []struct {
			Model, Signature, Reason string
			Reference, Current       int
			ConfidencePSI            float64    `json:"confidence_psi"`
			LabelPSI                 float64    `json:"label_psi"`
			MeanConfidence           [2]float64 `json:"mean_confidence"`
			Noise                    [2]float64
			Alarm                    bool
		}
	}
	if err := json.Unmarshal([]byte(calibrationReport), &cal); err != nil {
		t.Fatal(err)
	}
	drift := table("drift")
	if len(drift) != len(cal.Drift) || len(cal.Drift) == 0 {
		t.Fatalf("%d drift rows for %d entries: %v", len(drift), len(cal.Drift), drift)
	}
	for i, d := range cal.Drift {
		alarm := map[bool]string{true: "alarm", false: "no"}[d.Alarm]
		want := map[string]string{"model": d.Model, "signature": d.Signature, "reference": strconv.Itoa(d.Reference), "current": strconv.Itoa(d.Current),
			"confidence_psi": four(d.ConfidencePSI), "label_psi": four(d.LabelPSI), "noise": four(d.Noise[0]) + " / " + four(d.Noise[1]),
			"mean_confidence": four(d.MeanConfidence[0]) + " → " + four(d.MeanConfidence[1]), "alarm": alarm, "reason": d.Reason}
		if fmt.Sprint(drift[i]) != fmt.Sprint(want) {
			t.Errorf("drift row %d:\n%v\nthe API's:\n%v", i, drift[i], want)
		}
	}

	var sh struct {
		Signatures []struct {
			Model, Candidate, Signature, Recommendation, Evidence string
			N, Labelled                                           int
			Agreement                                             float64
			MeanAbsChange                                         float64 `json:"mean_abs_change"`
			ConfidenceShift                                       float64 `json:"confidence_shift"`
			NLLDiff                                               float64 `json:"nll_diff"`
			NLLDiffSE                                             float64 `json:"nll_diff_se"`
			AccuracyDiff                                          float64 `json:"accuracy_diff"`
			AccuracyDiffSE                                        float64 `json:"accuracy_diff_se"`
		}
	}
	if err := json.Unmarshal([]byte(shadowReport), &sh); err != nil {
		t.Fatal(err)
	}
	shadow := table("shadow")
	if len(shadow) != len(sh.Signatures) || len(sh.Signatures) == 0 {
		t.Fatalf("%d shadow rows for %d signatures: %v", len(shadow), len(sh.Signatures), shadow)
	}
	for i, s := range sh.Signatures {
		// The differences are measured on outcomes: none, none shown.
		nll, acc := "—", "—"
		if s.Labelled > 0 {
			nll, acc = four(s.NLLDiff)+" ± "+four(s.NLLDiffSE), four(s.AccuracyDiff)+" ± "+four(s.AccuracyDiffSE)
		}
		want := map[string]string{"model": s.Model, "candidate": s.Candidate, "signature": s.Signature, "n": strconv.Itoa(s.N),
			"agreement": four(s.Agreement), "mean_abs_change": four(s.MeanAbsChange), "confidence_shift": four(s.ConfidenceShift),
			"labelled": strconv.Itoa(s.Labelled), "nll_diff": nll, "accuracy_diff": acc, "recommendation": s.Recommendation, "evidence": s.Evidence}
		if fmt.Sprint(shadow[i]) != fmt.Sprint(want) {
			t.Errorf("shadow row %d:\n%v\nthe API's:\n%v", i, shadow[i], want)
		}
	}
	bound(t, ctx, chromedp.ScrollIntoView("#shadow"))
	screenshot(t, ctx, "shadow.png")
}

// The dashboard's cascades table shows GET /v1/calibration's cascades: a
// row per stage, in order, with its share answered and its error and
// bound as the reply gives them (four significant digits), and on each
// cascade's first row its target, whether it is certified and its two
// costs per 1,000 decisions as the exact decimals the API writes, a dash
// where a cost is unknown.
func TestBrowserCascades(t *testing.T) {
	ctx := browser(t)
	st := standIn(t)
	bound(t, ctx, chromedp.Navigate(st.URL+"/#dashboard"), wait(`document.body.dataset.auth === 'locked' && Number(document.body.dataset.refreshed) >= 1`))
	if note := eval[string](t, ctx, `document.getElementById('cascades-note').textContent`); note != "No cascade report is available (it needs a key)." {
		t.Errorf("without a key the cascades table says %q", note)
	}
	bound(t, ctx, chromedp.SendKeys("#key-input", "k"), chromedp.Click("#key-form button[type=submit]"),
		wait(`document.querySelectorAll('#cascades tbody tr').length > 0`))
	rows := eval[[]map[string]string](t, ctx, `[...document.querySelectorAll('#cascades tbody tr')].map((r) => Object.fromEntries([...r.cells].map((c) => [c.dataset.col, c.textContent])))`)
	four := func(x float64) string { return strconv.FormatFloat(x, 'g', 4, 64) }
	var cal struct {
		Cascades []struct {
			Model       string
			TargetError float64 `json:"target_error"`
			Certified   bool
			Cost        *string `json:"cost_per_1000"`
			LastCost    *string `json:"last_stage_cost_per_1000"`
			Stages      []struct {
				Stage           string
				Asked, Answered int
				Share, Error    float64
				UpperBound      float64 `json:"upper_bound"`
			}
		}
	}
	if err := json.Unmarshal([]byte(calibrationReport), &cal); err != nil {
		t.Fatal(err)
	}
	usd := func(s *string) string {
		if s == nil {
			return "—"
		}
		return "$" + *s
	}
	var want []map[string]string
	for _, c := range cal.Cascades {
		for i, s := range c.Stages {
			row := map[string]string{"stage": s.Stage, "asked": strconv.Itoa(s.Asked), "answered": strconv.Itoa(s.Answered),
				"share": four(s.Share), "error": four(s.Error), "upper_bound": four(s.UpperBound)}
			if i == 0 {
				row["cascade"], row["target"] = c.Model, four(c.TargetError)
				row["certified"] = map[bool]string{true: "yes", false: "no"}[c.Certified]
				row["cost_per_1000"], row["last_stage_cost_per_1000"] = usd(c.Cost), usd(c.LastCost)
			}
			want = append(want, row)
		}
	}
	if len(rows) != len(want) || len(want) == 0 {
		t.Fatalf("%d cascade rows for %d stages: %v", len(rows), len(want), rows)
	}
	for i := range want {
		if fmt.Sprint(rows[i]) != fmt.Sprint(want[i]) {
			t.Errorf("cascade row %d:\n%v\nthe API's:\n%v", i, rows[i], want[i])
		}
	}
	bound(t, ctx, chromedp.ScrollIntoView("#cascades"))
	screenshot(t, ctx, "cascades.png")
}

// usageReport is a report of the shape GET /v1/usage answers with,
// grouped by key: answers no key asked, and two keys.
const usageReport = `{"since":"2026-12-01T00:00:00Z","until":"2026-12-04T12:00:00Z","group_by":["key"],"groups":[
 {"key":"","usd":"0","unpriced":3,"decisions":3,"input_tokens":120,"output_tokens":3},
 {"key":"agents","usd":"4.000123456789","unpriced":0,"decisions":5012,"input_tokens":1502000,"output_tokens":5012},
 {"key":"ci","usd":"0.0005","unpriced":1,"decisions":11,"input_tokens":3300,"output_tokens":11}],
 "total":{"usd":"4.000623456789","unpriced":4,"decisions":5026,"input_tokens":1505420,"output_tokens":5026}}`

// The dashboard's spend table shows GET /v1/usage's groups by key, in
// order, each amount as the exact decimal the API writes; without a key
// it says it needs one.
func TestBrowserSpendPerKey(t *testing.T) {
	ctx := browser(t)
	st := standIn(t)
	bound(t, ctx, chromedp.Navigate(st.URL+"/#dashboard"), wait(`document.body.dataset.auth === 'locked' && Number(document.body.dataset.refreshed) >= 1`))
	if note := eval[string](t, ctx, `document.getElementById('usage-note').textContent`); note != "No usage is available (it needs a key)." {
		t.Errorf("without a key the spend table says %q", note)
	}
	bound(t, ctx, chromedp.SendKeys("#key-input", "k"), chromedp.Click("#key-form button[type=submit]"),
		wait(`document.querySelectorAll('#usage tbody tr').length > 0 || document.getElementById('usage-note').textContent.includes('answered')`))
	if note := eval[string](t, ctx, `document.getElementById('usage-note').textContent`); note != "" {
		t.Fatalf("the spend table says %q", note)
	}
	rows := eval[[]map[string]string](t, ctx, `[...document.querySelectorAll('#usage tbody tr')].map((r) => Object.fromEntries([...r.cells].map((c) => [c.dataset.col, c.textContent])))`)
	var rep struct {
		Groups []struct {
			Key, USD            string
			Unpriced, Decisions int
			InputTokens         int `json:"input_tokens"`
			OutputTokens        int `json:"output_tokens"`
		}
	}
	if err := json.Unmarshal([]byte(usageReport), &rep); err != nil {
		t.Fatal(err)
	}
	if len(rows) != len(rep.Groups) || len(rows) == 0 {
		t.Fatalf("%d rows for %d groups: %v", len(rows), len(rep.Groups), rows)
	}
	for i, g := range rep.Groups {
		key := g.Key
		if key == "" {
			key = "(no key)"
		}
		want := map[string]string{"key": key, "usd": "$" + g.USD, "decisions": strconv.Itoa(g.Decisions),
			"input_tokens": strconv.Itoa(g.InputTokens), "output_tokens": strconv.Itoa(g.OutputTokens),
			"unpriced": strconv.Itoa(g.Unpriced)}
		if fmt.Sprint(rows[i]) != fmt.Sprint(want) {
			t.Errorf("spend row %d:\n%v\nthe API's:\n%v", i, rows[i], want)
		}
	}
}

// standInHealth is /health with a key as the stand-in answers it: a
// status of degraded with one node down, and each node's errors,
// failovers and cooldowns, the fields the dashboard reads from /health.
const standInHealth = `{"status":"degraded","version":"stand-in","auth":true,"nodes":[
 {"name":"gpu0","dialect":"llamacpp","models":["qwen2.5-0.5b"],"priority":0,"healthy":true,"in_flight":1,"queued":0,"errors":2,"failovers":1,"cooldowns":0},
 {"name":"gpu1","dialect":"llamacpp","models":["qwen2.5-0.5b"],"priority":1,"healthy":false,"in_flight":0,"queued":0,"cool_until":"2030-01-01T00:00:00Z","cool_reason":"engine answered 500","errors":5,"failovers":4,"cooldowns":3}]}`

// standInMetrics is the stand-in's /metrics, public as system1's is: gpu0
// made 7 engine calls, 2 of them timed out; its cooldown count differs
// from /health's, which the page prefers.
const standInMetrics = `system1_requests_total{code="200",route="POST /v1/systemone"} 3
system1_engine_seconds_bucket{model="qwen2.5-0.5b",node="gpu0",le="0.1"} 5
system1_engine_seconds_bucket{model="qwen2.5-0.5b",node="gpu0",le="+Inf"} 7
system1_engine_seconds_sum{model="qwen2.5-0.5b",node="gpu0"} 20.2
system1_engine_seconds_count{model="qwen2.5-0.5b",node="gpu0"} 7
system1_engine_attempts_total{model="qwen2.5-0.5b",node="gpu0",outcome="ok"} 5
system1_engine_attempts_total{model="qwen2.5-0.5b",node="gpu0",outcome="timeout"} 2
system1_cooldowns_total{node="gpu1"} 9
`

// standIn serves the page in front of a stand-in API: /health bare
// without the key "k" and standInHealth with it, /metrics to anyone, the
// other routes 401 without it, GET /v1/calibration answering
// calibrationReport and GET /v1/shadow shadowReport.
func standIn(t *testing.T) *httptest.Server {
	mux := http.NewServeMux()
	web.Register(mux)
	authed := func(w http.ResponseWriter, r *http.Request) bool {
		if r.Header.Get("Authorization") == "Bearer k" {
			return true
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusUnauthorized)
		_, _ = w.Write([]byte(`{"error":{"message":"no key","type":"authentication_error"},"detail":{"error_type":"authentication_error","message":"no key"}}`))
		return false
	}
	reply := func(body string) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			if authed(w, r) {
				w.Header().Set("Content-Type", "application/json")
				_, _ = w.Write([]byte(body))
			}
		}
	}
	mux.HandleFunc("GET /health", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		if r.Header.Get("Authorization") != "Bearer k" {
			_, _ = w.Write([]byte(`{"status":"ok"}`))
			return
		}
		_, _ = w.Write([]byte(standInHealth))
	})
	mux.Handle("GET /v1/models", reply(`{"models":[{"name":"qwen2.5-0.5b","description":"served by gpu0","release_date":"2026-12-01"}],"object":"list","data":[]}`))
	mux.Handle("GET /v1/calibration", reply(calibrationReport))
	mux.Handle("GET /v1/shadow", reply(shadowReport))
	mux.HandleFunc("GET /v1/usage", func(w http.ResponseWriter, r *http.Request) {
		// The page asks this UTC month's spend by key, and nothing else.
		want := url.Values{"group_by": {"key"}, "since": {time.Now().UTC().Format("2006-01") + "-01"}}
		if r.URL.Query().Encode() != want.Encode() {
			w.WriteHeader(http.StatusUnprocessableEntity)
			return
		}
		reply(usageReport)(w, r)
	})
	mux.HandleFunc("GET /metrics", func(w http.ResponseWriter, r *http.Request) {
		_, _ = w.Write([]byte(standInMetrics))
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv
}

// /docs renders every operation of /openapi.json, with its responses.
func TestBrowserDocs(t *testing.T) {
	ctx := browser(t)
	s := serve(t, options{})
	bound(t, ctx, chromedp.Navigate(s.URL+"/docs"), wait(`document.body.dataset.ready === 'true'`))
	var doc struct {
		Paths map[string]map[string]struct {
			OperationID string `json:"operationId"`
			Responses   map[string]json.RawMessage
		}
	}
	if err := json.Unmarshal(web.OpenAPI(), &doc); err != nil {
		t.Fatal(err)
	}
	for path, ops := range doc.Paths {
		for method, op := range ops {
			got := eval[struct {
				Title     string
				Responses []string
				Props     int
			}](t, ctx, `(() => { const s = document.getElementById('`+op.OperationID+`'); return s && {title: s.querySelector('h2').textContent,
			  responses: [...s.querySelectorAll('details summary b')].map((b) => b.textContent), props: s.querySelectorAll('.prop').length}; })()`)
			if !strings.Contains(got.Title, strings.ToUpper(method)+path) || len(got.Responses) != len(op.Responses) {
				t.Errorf("%s %s shown as %+v", method, path, got)
			}
			if path != "/metrics" && got.Props == 0 {
				t.Errorf("%s %s: no schema properties shown", method, path)
			}
		}
	}
	screenshot(t, ctx, "docs.png")
}

// /docs shows each operation's parameters (the query parameters of
// /v1/usage and /v1/calibration, the request headers, the {id} path
// parameter) with where each goes and whether it is required, and each
// response's headers under that response.
func TestBrowserDocsParameters(t *testing.T) {
	ctx := browser(t)
	s := serve(t, options{})
	bound(t, ctx, chromedp.Navigate(s.URL+"/docs"), wait(`document.body.dataset.ready === 'true'`))
	var doc struct {
		Paths map[string]map[string]struct {
			OperationID string `json:"operationId"`
			Parameters  []struct {
				Name, In string
				Required bool
			}
			Responses map[string]struct {
				Headers map[string]json.RawMessage
			}
		}
	}
	if err := json.Unmarshal(web.OpenAPI(), &doc); err != nil {
		t.Fatal(err)
	}
	checked := 0
	for path, ops := range doc.Paths {
		for method, op := range ops {
			type shown struct{ Name, In, Text string }
			got := eval[struct {
				Params  []shown
				Headers map[string][]string
			}](t, ctx, `(() => { const s = document.getElementById('`+op.OperationID+`');
			  return {params: [...s.querySelectorAll('.param')].map((p) => ({name: p.dataset.name, in: p.dataset.in, text: p.textContent})),
			    headers: Object.fromEntries([...s.querySelectorAll('details')].map((d) => [d.querySelector('summary b').textContent,
			      [...d.querySelectorAll('.header')].map((e) => e.dataset.name)]))}; })()`)
			var want []shown
			for _, p := range op.Parameters {
				want = append(want, shown{Name: p.Name, In: p.In})
				checked++
			}
			if len(got.Params) != len(want) {
				t.Errorf("%s %s: parameters shown %+v, the document has %+v", method, path, got.Params, op.Parameters)
			}
			for i, p := range op.Parameters[:min(len(got.Params), len(op.Parameters))] {
				g := got.Params[i]
				if g.Name != p.Name || g.In != p.In || !strings.Contains(g.Text, p.Name) || strings.Contains(g.Text, "required") != p.Required {
					t.Errorf("%s %s: parameter %d shown as %+v, the document has %+v", method, path, i, g, p)
				}
			}
			for code, r := range op.Responses {
				var names []string
				for n := range r.Headers {
					names = append(names, n)
					checked++
				}
				slices.Sort(names)
				g := slices.Sorted(slices.Values(got.Headers[code]))
				if !slices.Equal(g, names) {
					t.Errorf("%s %s %s: response headers shown %v, the document has %v", method, path, code, g, names)
				}
			}
		}
	}
	if checked == 0 {
		t.Fatal("the document has no parameters or response headers to check")
	}
}

// schemaNames are the property names a schema holds, to depth levels of
// nesting: through $ref, items, additionalProperties and each
// alternative of oneOf and anyOf.
func schemaNames(doc map[string]any, s any, depth int, out map[string]bool) {
	m, _ := s.(map[string]any)
	for m != nil && m["$ref"] != nil {
		ref, _ := m["$ref"].(string)
		var n any = doc
		for _, k := range strings.Split(strings.TrimPrefix(ref, "#/"), "/") {
			n = n.(map[string]any)[k]
		}
		m, _ = n.(map[string]any)
	}
	if m == nil || depth < 0 {
		return
	}
	props, _ := m["properties"].(map[string]any)
	for name, p := range props {
		out[name] = true
		schemaNames(doc, p, depth-1, out)
	}
	for _, k := range []string{"oneOf", "anyOf"} {
		alts, _ := m[k].([]any)
		for _, a := range alts {
			schemaNames(doc, a, depth-1, out)
		}
	}
	for _, k := range []string{"items", "additionalProperties"} {
		schemaNames(doc, m[k], depth-1, out)
	}
}

// /docs shows every property of each request body and response, at
// every level of nesting the page says it goes to: those of a body that
// is one of several shapes (anyOf, POST /v1/feedback's one outcome or
// batch), of an array's items that are one of several shapes (the
// questions of POST /v1/decisions), and of an array that may be null
// (the buckets of GET /v1/calibration).
func TestBrowserDocsSchemas(t *testing.T) {
	ctx := browser(t)
	s := serve(t, options{})
	bound(t, ctx, chromedp.Navigate(s.URL+"/docs"), wait(`document.body.dataset.ready === 'true'`))
	var doc map[string]any
	if err := json.Unmarshal(web.OpenAPI(), &doc); err != nil {
		t.Fatal(err)
	}
	for path, ops := range doc["paths"].(map[string]any) {
		for method, op0 := range ops.(map[string]any) {
			op := op0.(map[string]any)
			want := map[string]bool{}
			var bodies []any
			if rb, ok := op["requestBody"].(map[string]any); ok {
				bodies = append(bodies, rb)
			}
			for _, r := range op["responses"].(map[string]any) {
				bodies = append(bodies, r)
			}
			for _, b := range bodies {
				content, _ := b.(map[string]any)["content"].(map[string]any)
				for _, m := range content {
					schemaNames(doc, m.(map[string]any)["schema"], 3, want)
				}
			}
			shown := eval[[]string](t, ctx, `[...document.getElementById('`+op["operationId"].(string)+`').querySelectorAll('.schema .prop > .name')].map((e) => e.textContent)`)
			var missing []string
			for name := range want {
				if !slices.Contains(shown, name) {
					missing = append(missing, name)
				}
			}
			slices.Sort(missing)
			if len(missing) > 0 {
				t.Errorf("%s %s: not shown: %v", method, path, missing)
			}
			types := eval[[]string](t, ctx, `[...document.getElementById('`+op["operationId"].(string)+`').querySelectorAll('.schema .prop > .type')].map((e) => e.textContent).filter((x) => x === 'any')`)
			if len(types) > 0 {
				t.Errorf("%s %s: %d properties of a known type shown as 'any'", method, path, len(types))
			}
		}
	}
}

// The playground starts with the README's request: the same state and
// questions, in the same order (the model is the one this server serves).
func TestBrowserPresetIsTheReadmeRequest(t *testing.T) {
	ctx := browser(t)
	s := serve(t, options{})
	bound(t, ctx, chromedp.Navigate(s.URL+"/#playground"), wait(`document.querySelectorAll('#model option').length > 0`),
		chromedp.Click("#send"), wait(`document.querySelectorAll('#answers .answer').length > 0 || document.querySelector('#send-error')`))
	sent := curlBody(t, eval[string](t, ctx, `document.getElementById('curl').textContent`))
	readme, _ := readmeExample(t)
	var got, want map[string]json.RawMessage
	if err := json.Unmarshal([]byte(sent), &got); err != nil {
		t.Fatalf("the page sent %s: %v", sent, err)
	}
	if err := json.Unmarshal(readme, &want); err != nil {
		t.Fatal(err)
	}
	for _, field := range []string{"state", "questions"} {
		var g, w any
		_ = json.Unmarshal(got[field], &g)
		_ = json.Unmarshal(want[field], &w)
		if !reflect.DeepEqual(g, w) {
			t.Errorf("%s: the page sends %s, the README %s", field, got[field], want[field])
		}
	}
	order := func(raw json.RawMessage) []string {
		ms, err := jsonx.Members(raw)
		if err != nil {
			t.Fatal(err)
		}
		var ids []string
		for _, m := range ms {
			ids = append(ids, m.Key)
		}
		return ids
	}
	if g, w := order(got["questions"]), order(want["questions"]); !slices.Equal(g, w) {
		t.Errorf("the page asks the questions in the order %v, the README %v", g, w)
	}
}

// layout is what a narrow screen shows of the page: how wide the document
// is against the window, and the Min confidence input's room against its
// placeholder's width.
type layout struct {
	Page, Window      int
	Placeholder, Room float64
	Wide              []string
}

const readLayout = `(() => {
  const i = document.getElementById('d-min'), cs = getComputedStyle(i);
  const c = document.createElement('canvas').getContext('2d');
  c.font = cs.font;
  const wide = [...document.querySelectorAll('body *')].filter((e) => e.getBoundingClientRect().right > innerWidth + 0.5 &&
    !e.closest('.scroll, pre')).slice(0, 5).map((e) => e.tagName.toLowerCase() + (e.id ? '#' + e.id : '') + (e.className ? '.' + e.className : ''));
  return {page: document.documentElement.scrollWidth, window: innerWidth,
    placeholder: c.measureText(i.placeholder).width,
    room: i.clientWidth - parseFloat(cs.paddingLeft) - parseFloat(cs.paddingRight), wide};
})()`

// At a phone's 390 px the playground, its answers, the dashboard and the
// API reference fit the window (wide tables scroll inside their own box),
// and the Min confidence input shows its whole placeholder.
func TestBrowserNarrow(t *testing.T) {
	ctx := browser(t)
	s := serve(t, options{nodes: 2, sick: true})
	coolDown(t, s)
	const width = 390
	bound(t, ctx, chromedp.EmulateViewport(width, 844), chromedp.Navigate(s.URL+"/#playground"),
		wait(`document.querySelectorAll('#model option').length > 0`),
		chromedp.Click("#send"), wait(`document.querySelectorAll('#answers .answer').length === 3`),
		chromedp.Click("#d-send"), wait(`document.querySelector('#decide-answer')`))
	check := func(where string) layout {
		t.Helper()
		l := eval[layout](t, ctx, readLayout)
		if l.Window != width || l.Page > l.Window || len(l.Wide) > 0 {
			t.Errorf("%s: the page is %d px wide in a %d px window; past its edge: %v", where, l.Page, l.Window, l.Wide)
		}
		return l
	}
	if l := check("playground"); l.Placeholder > l.Room {
		t.Errorf("the Min confidence placeholder needs %.1f px, its input has %.1f", l.Placeholder, l.Room)
	}
	bound(t, ctx, chromedp.Navigate(s.URL+"/#dashboard"), wait(`Number(document.body.dataset.refreshed) >= 1 && document.querySelectorAll('#engines tbody tr[data-node]').length > 0`))
	check("dashboard")
	bound(t, ctx, chromedp.Navigate(s.URL+"/docs"), wait(`document.body.dataset.ready === 'true'`))
	if l := eval[struct{ Page, Window int }](t, ctx, `({page: document.documentElement.scrollWidth, window: innerWidth})`); l.Page > l.Window {
		t.Errorf("/docs: the page is %d px wide in a %d px window", l.Page, l.Window)
	}
}

// The dashboard lists the build each node serves under each model as
// /health reports it, and marks one that changed since the server
// started.
func TestBrowserDashboardBuilds(t *testing.T) {
	ctx := browser(t)
	s := serve(t, options{nodes: 2, build: "one"})
	s.router.Probe(t.Context())
	s.fakes[1].SetBuild("two")
	s.router.Probe(t.Context())
	_, hb := get(t, s.URL+"/health")
	var health struct {
		Nodes []fleet.State `json:"nodes"`
	}
	if err := json.Unmarshal(hb, &health); err != nil || len(health.Nodes) != 2 {
		t.Fatalf("/health: %v %s", err, hb)
	}
	bound(t, ctx, chromedp.Navigate(s.URL+"/#dashboard"), wait(`Number(document.body.dataset.refreshed) >= 1`))
	rows := eval[[]map[string]string](t, ctx, `[...document.querySelectorAll('#builds tbody tr')].map((r) => ({node: r.dataset.node, model: r.dataset.model,
	  changed: String(r.classList.contains('changed')), ...Object.fromEntries([...r.querySelectorAll('[data-col]')].map((c) => [c.dataset.col, c.textContent]))}))`)
	if len(rows) != 2 {
		t.Fatalf("%d builds shown: %v (/health %s)", len(rows), rows, hb)
	}
	for i, n := range health.Nodes {
		if len(n.Fingerprints) != 1 {
			t.Fatalf("node %s: fingerprints %+v", n.Name, n.Fingerprints)
		}
		f, r := n.Fingerprints[0], rows[i]
		changed := f.Changes > 0
		if r["node"] != n.Name || r["model"] != f.Model || r["fingerprint"] != f.ID || r["changes"] != strconv.FormatInt(f.Changes, 10) ||
			r["changed"] != strconv.FormatBool(changed) || (changed && !strings.Contains(r["change"], "changed from")) {
			t.Errorf("row %v, /health %+v", r, f)
		}
	}
	if health.Nodes[0].Fingerprints[0].Changes != 0 || health.Nodes[1].Fingerprints[0].Changes != 1 {
		t.Fatalf("changes %+v", health.Nodes)
	}
	if note := eval[string](t, ctx, `document.getElementById('builds-note').textContent`); !strings.Contains(note, "1 of 2 builds changed") {
		t.Errorf("note %q", note)
	}
}

// toFixed is JavaScript's Number.prototype.toFixed for x >= 0: the
// exact value of x rounded to digits decimals, a tie going up, where
// Go's %f rounds a tie to even (4.25 is "4.3" on the page, "4.2" in
// Go), so that a percentile on an exact tie reads alike on both sides.
func toFixed(x float64, digits int) string {
	scale := new(big.Int).Exp(big.NewInt(10), big.NewInt(int64(digits)), nil)
	r := new(big.Rat).SetFloat64(x)
	r.Mul(r, new(big.Rat).SetInt(scale))
	r.Add(r, big.NewRat(1, 2))
	n := new(big.Int).Quo(r.Num(), r.Denom())
	return new(big.Rat).SetFrac(n, scale).FloatString(digits)
}

// toFixed reads as Node's toFixed(1) read these (node -e), ties and the
// values just under one alike.
func TestToFixed(t *testing.T) {
	for x, want := range map[float64]string{4.25: "4.3", 4.35: "4.3", 0.05: "0.1", 1.45: "1.4", 0.25: "0.3", 12.75: "12.8", 0: "0.0"} {
		if got := toFixed(x, 1); got != want {
			t.Errorf("toFixed(%v, 1) = %s, want %s", x, got, want)
		}
	}
}

// A request counter that went down between two refreshes was reset (the
// server behind the page restarted): the route's rate counts what came
// since, never a negative one.
func TestBrowserDashboardRateAfterARestart(t *testing.T) {
	ctx := browser(t)
	var metrics atomic.Value
	set := func(n int) {
		metrics.Store(fmt.Sprintf(`system1_requests_total{code="200",route="POST /v1/systemone"} %[1]d
system1_request_seconds_bucket{route="POST /v1/systemone",le="0.1"} %[1]d
system1_request_seconds_bucket{route="POST /v1/systemone",le="+Inf"} %[1]d
system1_request_seconds_sum{route="POST /v1/systemone"} 1
system1_request_seconds_count{route="POST /v1/systemone"} %[1]d
`, n))
	}
	mux := http.NewServeMux()
	web.Register(mux)
	mux.HandleFunc("GET /health", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"status":"ok"}`))
	})
	mux.HandleFunc("GET /metrics", func(w http.ResponseWriter, r *http.Request) { _, _ = w.Write([]byte(metrics.Load().(string))) })
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)

	const row = `document.querySelector('#routes tbody tr[data-route="POST /v1/systemone"]')`
	set(1000)
	bound(t, ctx, chromedp.Navigate(srv.URL+"/#dashboard"), wait(row+`?.querySelector('[data-col=requests]').textContent === '1000'`))
	set(10)
	bound(t, ctx, chromedp.Click("#refresh"), wait(row+`.querySelector('[data-col=requests]').textContent === '10' && `+row+`.querySelector('[data-col=rate]').textContent !== '—'`))
	rate := eval[string](t, ctx, row+`.querySelector('[data-col=rate]').textContent`)
	if r, err := strconv.ParseFloat(rate, 64); err != nil || !(r > 0) {
		t.Errorf("after the counter went from 1000 to 10, the rate shown is %q", rate)
	}
}

// A refused question whose name X-System1-Refused escapes (a byte that is
// not printable ASCII) is still shown with why it was refused.
func TestBrowserRefusedNameEscaped(t *testing.T) {
	ctx := browser(t)
	s := serve(t, options{})
	const name = "département"
	bound(t, ctx, chromedp.Navigate(s.URL+"/#playground"), wait(`document.querySelectorAll('#model option').length > 0`),
		chromedp.Click(`[data-wire=decisions]`), wait(`document.getElementById('route').textContent === 'POST /v1/decisions'`),
		chromedp.Evaluate[chromedp.Void](`{ const q = document.querySelector('#questions .qid'); q.value = '`+name+`'; q.dispatchEvent(new Event('input', {bubbles: true})); q.dispatchEvent(new Event('change', {bubbles: true})); }`),
		chromedp.SetValue("#min-mass", "1"), chromedp.Click("#send"),
		wait(`document.querySelectorAll('#answers .answer[data-type=refusal]').length === 3 || document.querySelector('#send-error')`))
	shown := eval[map[string]shownAnswer](t, ctx, readAnswers)
	a, ok := shown[name]
	if !ok || a.Type != "refusal" || !strings.HasPrefix(a.Fields["why"], "label mass 0.") {
		t.Errorf("the refusal of %q is shown as %+v (all: %+v)", name, a, shown)
	}
}

// A request that never reaches the server (it went down, the network
// dropped) is shown as an error and the form given back, on both forms,
// where the page stayed at "asking…" with its button disabled until it
// was reloaded.
func TestBrowserRequestThatFailsToLeave(t *testing.T) {
	ctx := browser(t)
	s := serve(t, options{})
	bound(t, ctx, chromedp.Navigate(s.URL+"/#playground"), wait(`document.querySelectorAll('#model option').length > 0`))
	s.stop()
	for _, form := range []struct{ send, status, err string }{
		{"#send", "#send-status", "#send-error"},
		{"#d-send", "#d-status", "#d-error"},
	} {
		bound(t, ctx, chromedp.Evaluate[chromedp.Void](`document.querySelector('`+form.send+`').click()`),
			wait(`document.querySelector('`+form.err+`') || document.querySelector('`+form.status+`').textContent === 'asking…'`))
		bound(t, ctx, wait(`!document.querySelector('`+form.send+`').disabled && document.querySelector('`+form.err+`')`))
		if e := eval[string](t, ctx, `document.querySelector('`+form.err+`').textContent`); e == "" {
			t.Errorf("%s: the error shown is empty", form.send)
		}
	}
}
