package systemone

import (
	"strings"
	"testing"

	"system1/internal/decision"
)

// BenchmarkParseResponse is the check of an upstream's reply: "now" reads
// it in one pass, "before" is encoding/json into maps and pointers as it
// was (parseResponseRef). "2q" is bench/forward's reply (a choice of three
// and a noul), "77" a choice of 77 options.
func BenchmarkParseResponse(b *testing.B) {
	var keys, probs []string
	for i := range 77 {
		k := "intent_" + strings.Repeat("x", i%7) + string(rune('a'+i%26)) + string(rune('a'+i/26))
		keys = append(keys, `"`+k+`":null`)
		p := "0.0"
		if i == 0 {
			p = "1.0"
		}
		probs = append(probs, `"`+k+`":`+p)
	}
	cases := []struct{ name, req, reply string }{
		{"2q",
			`{"model":"jev-stub","state":"s","questions":{"dept":{"type":"choice","criteria":{"billing":null,"technical":null,"sales":null}},"urgent":{"type":"noul"}}}`,
			`{"model":"jev-stub","answers":{"dept":{"type":"choice","choice":"billing","confidence":0.82,` +
				`"probabilities":{"billing":0.88,"technical":0.12,"sales":0.0}},"urgent":{"type":"noul","noul":0.31}},` +
				`"usage":{"input_tokens":42,"output_tokens":2}}`},
		{"77",
			`{"model":"m","state":"s","questions":{"intent":{"type":"choice","criteria":{` + strings.Join(keys, ",") + `}}}}`,
			`{"model":"m","answers":{"intent":{"type":"choice","choice":"intent_aa","confidence":1.0,"probabilities":{` +
				strings.Join(probs, ",") + `}}},"usage":{"input_tokens":420,"output_tokens":1}}`},
	}
	for _, c := range cases {
		p := ParseRequest([]byte(c.req))
		if len(p.Problems) > 0 {
			b.Fatal(p.Problems)
		}
		body := []byte(c.reply)
		for _, impl := range []struct {
			name  string
			parse func(decision.Request, []byte) (*Reply, error)
		}{{"now", ParseResponse}, {"before", parseResponseRef}} {
			b.Run(c.name+"/"+impl.name, func(b *testing.B) {
				b.ReportAllocs()
				b.SetBytes(int64(len(body)))
				for b.Loop() {
					if _, err := impl.parse(p.Request, body); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}

// BenchmarkAppendRequest is the body the client sends upstream: one
// allocation when sized by requestSize.
func BenchmarkAppendRequest(b *testing.B) {
	p := ParseRequest([]byte(`{"model":"jev-stub","state":"Ticket: I was charged twice for my subscription and want a refund.","questions":{` +
		`"dept":{"type":"choice","instructions":"Which department?","criteria":{"billing":null,"technical":null,"sales":null}},` +
		`"urgent":{"type":"noul","instructions":"Is it urgent?"}}}`))
	if len(p.Problems) > 0 {
		b.Fatal(p.Problems)
	}
	b.ReportAllocs()
	for b.Loop() {
		if body := AppendRequest(make([]byte, 0, requestSize(p.Request)), p.Request); len(body) > requestSize(p.Request) {
			b.Fatalf("%d bytes, sized for %d", len(body), requestSize(p.Request))
		}
	}
}
