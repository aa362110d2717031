package systemone

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
)

// BenchmarkParseBatchRequest reads a batch of 64 tickets of about 200
// bytes and two questions, what bench/throughput sends.
func BenchmarkParseBatchRequest(b *testing.B) {
	states := make([]string, 64)
	for i := range states {
		states[i] = fmt.Sprintf("[fake-%d] Ticket %d: %s", i, 10000+i, strings.Repeat("I was charged twice for the March invoice. ", 5))
	}
	ss, _ := json.Marshal(states)
	body := []byte(`{"model":"fake","states":` + string(ss) + `,"questions":{"dept":{"type":"choice","instructions":"Which team should handle this ticket?",` +
		`"criteria":{"billing":"payments, refunds, invoices","engineering":"bugs, outages, errors","success":"accounts, renewals, onboarding"}},` +
		`"urgent":{"type":"noul","instructions":"Does this ticket need an answer today?"}}}`)
	b.ReportAllocs()
	for b.Loop() {
		if p := ParseBatchRequest(body); len(p.States) != 64 || len(p.Problems) != 0 {
			b.Fatalf("%d states, problems %v", len(p.States), p.Problems)
		}
	}
}
