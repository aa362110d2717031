package httpapi_test

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	"system1/internal/answer"
	"system1/internal/calibration"
	"system1/internal/config"
	"system1/internal/decision"
	"system1/internal/fakeengine"
	"system1/internal/fleet"
	"system1/internal/gateway"
	"system1/internal/httpapi"
)

// /v1/systemone gives prediction sets in headers when asked with
// X-System1-Coverage, the body keeping Jev's shape: per question the
// option keys of its set, "unavailable" where the fit's outcomes are too
// few for the coverage or there is no fit, and the level the sets are
// built for; no set header unless asked; a coverage outside [0.5, 0.99],
// or given twice, is a 422 naming the header.
func TestSystemOneSetsHeaders(t *testing.T) {
	lac := func(coverage, threshold float64, n int) calibration.Conformal {
		return calibration.Conformal{Method: calibration.ConformalLAC, Coverage: coverage, N: n, Threshold: threshold}
	}
	fits := &calibration.Fits{Version: calibration.FitsVersion, Revision: "r", Fits: []calibration.Fit{
		// The engine gives 0.6, 0.3, 0.1: p >= 0.25 is billing, technical.
		{Model: "fake", Kind: decision.Choice, Bucket: "3-4", Temperature: 1, Sets: []calibration.Conformal{lac(0.9, 0.75, 400)}},
		// P(true) 2/3: p >= 0.5 is true alone.
		{Model: "fake", Kind: decision.Noul, Bucket: "2", Temperature: 1, Sets: []calibration.Conformal{lac(0.92, 0.5, 400)}},
		// Too few outcomes for 0.9: only a set at 0.8.
		{Model: "fake", Kind: decision.Score, Bucket: "3-4", Temperature: 1, Sets: []calibration.Conformal{lac(0.8, 0.5, 8)}},
	}}
	url := calServe(t, fits)
	post := func(coverage ...string) (*http.Response, string) {
		t.Helper()
		req, _ := http.NewRequest(http.MethodPost, url+"/v1/systemone", strings.NewReader(calRequest))
		req.Header.Set("Content-Type", "application/json")
		for _, c := range coverage {
			req.Header.Add("X-System1-Coverage", c)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp, string(body)
	}
	resp, body := post("0.9")
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("%d %s", resp.StatusCode, body)
	}
	if got, want := resp.Header.Get("X-System1-Sets"), "dept=billing,technical; urgent=true; anger unavailable"; got != want {
		t.Errorf("X-System1-Sets %q, want %q", got, want)
	}
	if got, want := resp.Header.Get("X-System1-Set-Coverage"), "dept=0.9; urgent=0.92"; got != want {
		t.Errorf("X-System1-Set-Coverage %q, want %q", got, want)
	}
	if strings.Contains(body, "billing,technical") || strings.Contains(body, "set") {
		t.Errorf("the body carries the sets: %s", body)
	}
	resp, _ = post()
	if h := resp.Header.Get("X-System1-Sets"); h != "" {
		t.Errorf("sets not asked for, yet %q", h)
	}
	resp, _ = post("0.8")
	if got := resp.Header.Get("X-System1-Set-Coverage"); got != "dept=0.9; urgent=0.92; anger=0.8" {
		t.Errorf("at 0.8: X-System1-Set-Coverage %q, sets %q", got, resp.Header.Get("X-System1-Sets"))
	}
	// A set whose keys do not fit in a header item, or could not be read
	// back from it (a key holding the list's separators, or ending in a
	// space, which the list trims, or beginning as the position form does),
	// is given whole by position, never cut or misread.
	long := func(c byte) string { return strings.Repeat(string(c), 120) }
	for _, keys := range [][3]string{
		{long('a'), long('b'), long('c')},
		{"billing, payments", "technical", "sales"},
		{"billing", "tech; ops", "sales"},
		{"billing", "technical ", "sales"},
		{"mask:8", "technical", "sales"}, // read as the position form
	} {
		req, _ := http.NewRequest(http.MethodPost, url+"/v1/systemone", strings.NewReader(`{"model":"fake","state":"Ticket.","questions":{"dept":{"type":"choice","criteria":{"`+
			keys[0]+`":null,"`+keys[1]+`":null,"`+keys[2]+`":null}}}}`))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("X-System1-Coverage", "0.9")
		lr, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		lr.Body.Close()
		if got := lr.Header.Get("X-System1-Sets"); lr.StatusCode != http.StatusOK || got != "dept=mask:c" {
			t.Errorf("a set of keys %.30q: %d X-System1-Sets %q, want the first two options by position", keys, lr.StatusCode, got)
		}
	}
	for _, bad := range [][]string{{"0.3"}, {"1"}, {"high"}, {"0.9", "0.8"}} {
		resp, body := post(bad...)
		if resp.StatusCode != http.StatusUnprocessableEntity || !strings.Contains(body, "X-System1-Coverage") {
			t.Errorf("coverage %q: %d %s", bad, resp.StatusCode, body)
		}
	}
}

// POST /v1/decide with coverage, as an HTTP client reaches it: the body
// gives prediction_set, set_coverage and set_outcomes, act only for a set
// of the decision alone, set_note where the outcomes are too few, and a
// coverage outside [0.5, 0.99] is a 422 naming the field.
func TestDecideCoverageOverHTTP(t *testing.T) {
	f := fakeengine.New(fakeengine.Options{Dialect: fakeengine.LlamaCpp, Behavior: fakeengine.Behavior{Logprobs: fakeengine.Probs(0.6, 0.3, 0.1)}})
	t.Cleanup(f.Close)
	n, err := fleet.NewNode(config.Node{Name: "n", URL: f.URL, Dialect: "llamacpp", Models: []string{fakeengine.DefaultModel}},
		func(string) string { return "" }, http.DefaultClient)
	if err != nil {
		t.Fatal(err)
	}
	router := fleet.New([]*fleet.Node{n}, fleet.Options{})
	fits := &calibration.Fits{Version: calibration.FitsVersion, Revision: "r", Fits: []calibration.Fit{
		{Model: "fake", Kind: decision.Choice, Bucket: "3-4", Temperature: 1, N: 400, Sets: []calibration.Conformal{
			{Method: calibration.ConformalLAC, Coverage: 0.8, N: 400, Threshold: 0.5},  // p >= 0.5: the decision alone
			{Method: calibration.ConformalLAC, Coverage: 0.9, N: 400, Threshold: 0.75}, // p >= 0.25: two options
		}},
	}}
	cfg, err := config.Parse([]byte("gateway: {threshold: 0.5}\nproviders:\n  - {name: local, kind: engine, model: fake}\n"))
	if err != nil {
		t.Fatal(err)
	}
	ans := answer.New(answer.Options{Router: router, Fits: func() *calibration.Fits { return fits }})
	srv := httptest.NewServer(httpapi.New(httpapi.Options{Answer: ans, Rounding: -1, Decide: gateway.New(gateway.Options{Config: cfg, Answer: ans})}))
	t.Cleanup(srv.Close)
	s := &system1{URL: srv.URL, client: &http.Client{Transport: checker{t: t, base: http.DefaultTransport}}}
	for _, tc := range []struct {
		coverage string
		set      []string
		level    float64
		grade    string
		note     string
	}{
		{`,"coverage":0.8`, []string{"a"}, 0.8, gateway.GradeAct, ""},
		{`,"coverage":0.85`, []string{"a", "b"}, 0.9, gateway.GradeAsk, ""},
		{`,"coverage":0.95`, nil, 0, gateway.GradeAsk, "the fit's sets reach coverage 0.9 at most, on 400 outcomes"},
	} {
		r := s.do(t, http.MethodPost, "/v1/decide", `{"question":"Which?","options":["a","b","c"]`+tc.coverage+`}`)
		var res gateway.Response
		if r.status != http.StatusOK || json.Unmarshal(r.body, &res) != nil {
			t.Fatalf("%s: %s", tc.coverage, r)
		}
		if res.Grade != tc.grade || !slices.Equal(res.PredictionSet, tc.set) || !strings.Contains(res.SetNote, tc.note) || (tc.note == "") != (res.SetNote == "") {
			t.Errorf("%s: grade %s, set %v, note %q", tc.coverage, res.Grade, res.PredictionSet, res.SetNote)
		}
		if tc.set != nil && (res.SetCoverage == nil || *res.SetCoverage != tc.level || res.SetOutcomes == nil || *res.SetOutcomes != 400) {
			t.Errorf("%s: set_coverage %v, set_outcomes %v", tc.coverage, res.SetCoverage, res.SetOutcomes)
		}
	}
	r := s.do(t, http.MethodPost, "/v1/decide", `{"question":"Which?","options":["a","b","c"],"coverage":0.3}`)
	if r.status != http.StatusUnprocessableEntity || !strings.Contains(string(r.body), "coverage") {
		t.Errorf("coverage 0.3: %s", r)
	}
}

// With X-System1-None-Option a set is over the options as asked, the
// implicit one included, as docs/http-api.md says: a set that takes
// every option lists "none of these options fits" after the caller's.
func TestSetsWithTheNoneOption(t *testing.T) {
	fits := &calibration.Fits{Version: calibration.FitsVersion, Revision: "r", Fits: []calibration.Fit{
		{Model: "fake", Kind: decision.Choice, Bucket: "3-4", Temperature: 1,
			Sets: []calibration.Conformal{{Method: calibration.ConformalLAC, Coverage: 0.9, N: 400, Threshold: 1}}},
	}}
	url := calServe(t, fits)
	req, _ := http.NewRequest(http.MethodPost, url+"/v1/systemone", strings.NewReader(`{"model":"fake","state":"Ticket.","questions":{"dept":{"type":"choice","criteria":{"billing":null,"technical":null,"sales":null}}}}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-System1-Coverage", "0.9")
	req.Header.Set(httpapi.NoneOptionHeader, "true")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if got, want := resp.Header.Get("X-System1-Sets"), "dept=billing,technical,sales,"+decision.NoneOption; resp.StatusCode != http.StatusOK || got != want {
		t.Errorf("%d X-System1-Sets %q, want %q\n%s", resp.StatusCode, got, want, body)
	}
}

// A bad X-System1-Coverage is a 422 whose message says what the header
// takes in one sentence, where a value out of range read "the header
// X-System1-Coverage: must be ..." and one that is no number quoted
// strconv's error.
func TestCoverageHeaderMessage(t *testing.T) {
	url := calServe(t, nil)
	for _, v := range []string{"0.3", "high", "1"} {
		req, _ := http.NewRequest(http.MethodPost, url+"/v1/systemone", strings.NewReader(calRequest))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("X-System1-Coverage", v)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		want := "the header X-System1-Coverage must be a number in [0.5,0.99], such as 0.9, given once"
		if resp.StatusCode != http.StatusUnprocessableEntity || !strings.Contains(string(body), want) {
			t.Errorf("coverage %q: %d %s; want a 422 saying %q", v, resp.StatusCode, body, want)
		}
	}
}

// A key too long for a header item is never listed cut, whatever the
// question's id: where the key's escapes end near the item's bound, so
// that its cut form ("aaa...") and a one-byte id fit in 200 bytes, the
// set is still given by position, as docs/http-api.md says of a set
// whose keys do not fit.
func TestSetsNeverListACutKey(t *testing.T) {
	fits := &calibration.Fits{Version: calibration.FitsVersion, Revision: "r", Fits: []calibration.Fit{
		// The engine gives 0.6, 0.3, 0.1: p >= 0.5 is the first option alone.
		{Model: "fake", Kind: decision.Choice, Bucket: "3-4", Temperature: 1,
			Sets: []calibration.Conformal{{Method: calibration.ConformalLAC, Coverage: 0.9, N: 400, Threshold: 0.5}}},
	}}
	url := calServe(t, fits)
	for _, tc := range []struct{ id, key string }{
		{"q", strings.Repeat("a", 195) + "é"},  // escaped: 195 bytes, then \xc3\xa9, cut to 195 + "..."
		{"q", strings.Repeat("a", 194) + "éé"}, // cut to 194 + "..."
		{"qq", strings.Repeat("a", 194) + "é"},
	} {
		req, _ := http.NewRequest(http.MethodPost, url+"/v1/systemone", strings.NewReader(`{"model":"fake","state":"Ticket.","questions":{"`+tc.id+
			`":{"type":"choice","criteria":{"`+tc.key+`":null,"technical":null,"sales":null}}}}`))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("X-System1-Coverage", "0.9")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if got, want := resp.Header.Get("X-System1-Sets"), tc.id+"=mask:8"; resp.StatusCode != http.StatusOK || got != want {
			t.Errorf("id %q, a key of %d bytes: %d X-System1-Sets %q, want %q\n%s", tc.id, len(tc.key), resp.StatusCode, got, want, body)
		}
	}
}
