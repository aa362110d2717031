package httpapi_test

import (
	"bytes"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"system1/internal/fakeengine"
)

// BenchmarkOverhead measures what system1 adds to one engine call. Each
// iteration makes the same llama.cpp call twice against a fake engine
// that answers at once: directly, with the body system1 sends, and as a
// one-question POST /v1/systemone through system1 (real server, router
// and dialect engine over loopback HTTP). It reports the p50 and p99 of
// both and their differences, the overhead, and the requests per second
// one client gets through system1. bench/overhead.sh measures the same
// at a fixed request rate against the built binary.
func BenchmarkOverhead(b *testing.B) {
	n := startNode(b, "n", fakeengine.LlamaCpp, fakeengine.Behavior{})
	s := serve(b, setup{nodes: []node{n}})
	const question = `{"model":"fake","state":"Ticket: I was charged twice for my subscription.","questions":{` +
		`"dept":{"type":"choice","instructions":"Which department?","criteria":{"billing":null,"technical":null,"sales":null}}}}`
	if r := s.ask(b, question); r.status != http.StatusOK { // checked by the test client, and warms the label cache
		b.Fatal(r)
	}
	calls := n.fake.Inferences()
	if len(calls) != 1 {
		b.Fatalf("%d engine calls for one question", len(calls))
	}
	direct := calls[0].Body
	engineURL := n.fake.URL + fakeengine.LlamaCpp.InferencePath()
	hc := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 16}} // unchecked: the checks are not system1's time
	b.Cleanup(hc.CloseIdleConnections)
	post := func(url string, body []byte) time.Duration {
		start := time.Now()
		resp, err := hc.Post(url, "application/json", bytes.NewReader(body))
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
	var viaEngine, viaSystem1 []time.Duration
	body := []byte(question)
	for b.Loop() {
		viaEngine = append(viaEngine, post(engineURL, direct))
		viaSystem1 = append(viaSystem1, post(s.URL+"/v1/systemone", body))
	}
	slices.Sort(viaEngine)
	slices.Sort(viaSystem1)
	q := func(d []time.Duration, p float64) float64 { return float64(d[int(p*float64(len(d)-1))].Microseconds()) }
	b.ReportMetric(q(viaEngine, .5), "direct-p50-µs")
	b.ReportMetric(q(viaEngine, .99), "direct-p99-µs")
	b.ReportMetric(q(viaSystem1, .5), "system1-p50-µs")
	b.ReportMetric(q(viaSystem1, .99), "system1-p99-µs")
	b.ReportMetric(q(viaSystem1, .5)-q(viaEngine, .5), "added-p50-µs")
	b.ReportMetric(q(viaSystem1, .99)-q(viaEngine, .99), "added-p99-µs")
	var total time.Duration
	for _, d := range viaSystem1 {
		total += d
	}
	b.ReportMetric(float64(len(viaSystem1))/total.Seconds(), "system1-req/s")
	if !strings.Contains(string(direct), `"cache_prompt":true`) {
		b.Fatalf("the direct call is not system1's: %s", direct)
	}
}
