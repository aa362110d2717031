package httpapi_test

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"system1/internal/answer"
	"system1/internal/config"
	"system1/internal/decisionlog"
	"system1/internal/fakeengine"
	"system1/internal/fleet"
	"system1/internal/httpapi"
)

// BenchmarkDecisionLog measures what recording every answer costs a
// decision: two servers over one fake engine, one recording in a real
// SQLite decision log and one with the log off, asked in turn in the same
// loop, so both see the same machine. It reports each one's p50 and p99,
// the p50 added by the log in percent, the requests that did not answer
// 200 (errors), and the records the log dropped.
func BenchmarkDecisionLog(b *testing.B) {
	f := fakeengine.New(fakeengine.Options{Dialect: fakeengine.LlamaCpp})
	b.Cleanup(f.Close)
	dlog, err := decisionlog.Open(b.Context(), decisionlog.Options{Path: filepath.Join(b.TempDir(), "decisions.db")})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = dlog.Close(b.Context()) })
	start := func(rec answer.Recorder) string {
		n, err := fleet.NewNode(config.Node{Name: "n", URL: f.URL, Dialect: "llamacpp", Models: []string{fakeengine.DefaultModel}}, func(string) string { return "" }, nil)
		if err != nil {
			b.Fatal(err)
		}
		srv := httptest.NewServer(httpapi.New(httpapi.Options{Answer: answer.New(answer.Options{Router: fleet.New([]*fleet.Node{n}, fleet.Options{Policy: testPolicy}), Recorder: rec}), Rounding: 2}))
		b.Cleanup(srv.Close)
		return srv.URL
	}
	off, on := start(nil), start(dlog)
	hc := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 16}}
	b.Cleanup(hc.CloseIdleConnections)
	body := []byte(`{"model":"fake","state":"Ticket: I was charged twice for my subscription.","questions":{` +
		`"dept":{"type":"choice","instructions":"Which department?","criteria":{"billing":null,"technical":null,"sales":null}}}}`)
	errs := 0
	post := func(url string) time.Duration {
		t0 := time.Now()
		resp, err := hc.Post(url+"/v1/systemone", "application/json", bytes.NewReader(body))
		if err != nil {
			errs++
			return time.Since(t0)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			errs++
		}
		return time.Since(t0)
	}
	post(off) // warm both label caches
	post(on)
	var withLog, without []time.Duration
	for i := 0; b.Loop(); i++ {
		// Alternate which goes first, so neither always follows the other.
		if i%2 == 0 {
			without = append(without, post(off))
			withLog = append(withLog, post(on))
		} else {
			withLog = append(withLog, post(on))
			without = append(without, post(off))
		}
	}
	b.StopTimer()
	if err := dlog.Flush(b.Context()); err != nil {
		b.Fatal(err)
	}
	slices.Sort(withLog)
	slices.Sort(without)
	q := func(d []time.Duration, p float64) float64 { return float64(d[int(p*float64(len(d)-1))].Microseconds()) }
	b.ReportMetric(q(without, .5), "off-p50-µs")
	b.ReportMetric(q(without, .99), "off-p99-µs")
	b.ReportMetric(q(withLog, .5), "on-p50-µs")
	b.ReportMetric(q(withLog, .99), "on-p99-µs")
	b.ReportMetric(100*(q(withLog, .5)-q(without, .5))/q(without, .5), "added-p50-%")
	b.ReportMetric(float64(errs), "errors")
	b.ReportMetric(float64(dlog.Stats().Dropped), "dropped")
}
