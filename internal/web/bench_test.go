package web_test

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"
)

// BenchmarkPageCost shows what registering the page costs POST
// /v1/systemone: two servers alike but for the page's routes, asked in
// turn within one loop so that both see the same machine. Each iteration
// sends one question through each over loopback HTTP to its own fake
// engine (the whole path), and one malformed request into each handler
// in process (routing, middleware and parsing alone, where a cost of the
// routes would show most). It reports the medians of each and their
// differences:
//
//	go test -run '^$' -bench BenchmarkPageCost -benchtime 3000x ./internal/web
func BenchmarkPageCost(b *testing.B) {
	with, without := serve(b, options{}), serve(b, options{noPage: true})
	hc := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 4}}
	b.Cleanup(hc.CloseIdleConnections)
	const question = `{"model":"fake","state":"Ticket: I was charged twice for my subscription.","questions":{` +
		`"dept":{"type":"choice","instructions":"Which department?","criteria":{"billing":null,"technical":null,"sales":null}}}}`
	post := func(url string) time.Duration {
		start := time.Now()
		resp, err := hc.Post(url+"/v1/systemone", "application/json", strings.NewReader(question))
		if err != nil {
			b.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			b.Fatalf("%s: status %d", url, resp.StatusCode)
		}
		return time.Since(start)
	}
	inProcess := func(h http.Handler) time.Duration {
		req := httptest.NewRequest(http.MethodPost, "/v1/systemone", bytes.NewReader([]byte(`{"model":"fake","questions":{}}`)))
		w := httptest.NewRecorder()
		start := time.Now()
		h.ServeHTTP(w, req)
		d := time.Since(start)
		if w.Code != http.StatusUnprocessableEntity {
			b.Fatalf("status %d", w.Code)
		}
		return d
	}
	if resp, _ := get(b, with.URL+"/"); resp.StatusCode != http.StatusOK {
		b.Fatal("the page is not served")
	}
	if resp, _ := get(b, without.URL+"/"); resp.StatusCode != http.StatusNotFound {
		b.Fatal("the page is served without its routes")
	}
	post(with.URL) // warm each: connections, label caches
	post(without.URL)
	var e2eWith, e2eWithout, inWith, inWithout []time.Duration
	for i := 0; b.Loop(); i++ {
		if i%2 == 0 { // alternate who goes first
			e2eWith, e2eWithout = append(e2eWith, post(with.URL)), append(e2eWithout, post(without.URL))
			inWith, inWithout = append(inWith, inProcess(with.handler)), append(inWithout, inProcess(without.handler))
		} else {
			e2eWithout, e2eWith = append(e2eWithout, post(without.URL)), append(e2eWith, post(with.URL))
			inWithout, inWith = append(inWithout, inProcess(without.handler)), append(inWith, inProcess(with.handler))
		}
	}
	med := func(d []time.Duration) float64 {
		slices.Sort(d)
		return float64(d[len(d)/2].Nanoseconds()) / 1000
	}
	mw, mo, hw, ho := med(e2eWith), med(e2eWithout), med(inWith), med(inWithout)
	b.ReportMetric(mw, "page-p50-µs")
	b.ReportMetric(mo, "nopage-p50-µs")
	b.ReportMetric(mw-mo, "added-p50-µs")
	b.ReportMetric(hw, "page-handler-p50-µs")
	b.ReportMetric(ho, "nopage-handler-p50-µs")
	b.ReportMetric(hw-ho, "added-handler-p50-µs")
}
