// Command kquestions measures what K questions over one state cost against
// the compute floor: the latency of POST /v1/systemone with K = 1..8
// questions over a state of about 400 tokens, cold (a state no engine has
// seen) and warm (the state seen just before, the questions new), through
// two system1 servers over one llama-server side by side, cell by cell:
// one running a state's questions one after another on its slot
// (spread_slots: false, before), one spreading them over slots (after).
// The floor of a cell is the tokens it must evaluate (the state once plus
// each question's own tokens: what the serial server evaluated, read from
// llama-server's /metrics) at llama-server's own prefill rate (the fastest
// it reported for a whole cold prompt), plus one decode step. Run it through bench/kquestions.sh, which starts the engine
// and both servers.
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"

	"system1/internal/procstat"
	"system1/internal/testbin"
)

// story is about 400 tokens of state.
const story = `Support ticket #48213, opened by Dana Whitfield, account tier Business, region EU-West.
Dana writes: "Hello, this is the third time this month I am contacting you about the same problem. ` +
	`Our team of twelve uses the shared workspace every morning to prepare the daily shipping manifest. ` +
	`Since the update on the 3rd, the export to CSV silently drops every row after the first five hundred, ` +
	`and nobody notices until the warehouse calls to ask where the remaining orders are. Yesterday this ` +
	`cost us two missed pickups and a penalty from the carrier. I was told last week that a fix was ` +
	`coming 'in the next release', but the release notes from Tuesday do not mention it. I have attached ` +
	`the export from this morning (503 rows instead of 1,217) and a screenshot of the settings page. ` +
	`We are paying for the Business tier precisely because we were promised priority support and a ` +
	`response within four hours; the last two tickets took two days each. If this is not fixed by Friday ` +
	`I will have to escalate to our procurement team, who are already reviewing alternatives. I would ` +
	`also like to know whether we are entitled to a credit for the penalties caused by this bug, and ` +
	`whether there is a workaround we can use in the meantime, for example exporting in smaller batches ` +
	`or through the API. Please do not close this ticket until someone has confirmed the root cause." ` +
	`Previous tickets from this account: #47102 (export truncated, closed as 'cannot reproduce'), ` +
	`#47655 (slow dashboard, resolved). Account health score: 61/100, down from 84 last quarter. ` +
	`Renewal date: in 45 days. Assigned agent: none yet. Channel: email. Language: English.`

var questions = []string{
	`"department":{"type":"choice","instructions":"Which team should handle this ticket?","criteria":{"billing":"credits, refunds, invoices","engineering":"bugs and defects","success":"account health and renewals"}}`,
	`"urgent":{"type":"noul","instructions":"Does this ticket need a reply today?"}`,
	`"frustration":{"type":"score","instructions":"How frustrated is the customer?","criteria":["calm","annoyed","angry"]}`,
	`"churn":{"type":"noul","instructions":"Is the customer at risk of leaving?"}`,
	`"credit":{"type":"noul","instructions":"Does the customer ask for a credit?"}`,
	`"workaround":{"type":"noul","instructions":"Does the customer ask for a workaround?"}`,
	`"channel":{"type":"choice","instructions":"How should we reply?","criteria":{"email":null,"phone":null,"meeting":null}}`,
	`"severity":{"type":"score","instructions":"How severe is the defect?","criteria":["minor","major","critical"]}`,
}

func main() {
	spread := flag.String("url", "http://127.0.0.1:3000", "system1 spreading questions over slots (after)")
	serial := flag.String("serial-url", "", "system1 running them on one slot (before)")
	eng := flag.String("engine", "", "llama-server's base URL, started with --metrics")
	model := flag.String("model", "jev-latest", "model id")
	reps := flag.Int("reps", 3, "measurements per cell")
	kList := flag.String("k", "1,2,3,4,5,6,7,8", "question counts, comma-separated, at most 8")
	flag.Parse()
	var ks []int
	for _, f := range strings.Split(*kList, ",") {
		k, err := strconv.Atoi(f)
		if err != nil || k < 1 || k > len(questions) {
			fmt.Fprintf(os.Stderr, "kquestions: -k: %q is not a count from 1 to %d\n", f, len(questions))
			os.Exit(2)
		}
		ks = append(ks, k)
	}

	type cell struct {
		ms, tokens []float64
	}
	cells := map[string]*cell{}
	at := func(mode string, k int, warm bool) *cell {
		key := fmt.Sprint(mode, k, warm)
		if cells[key] == nil {
			cells[key] = &cell{}
		}
		return cells[key]
	}
	modes := map[string]string{"serial": *serial, "spread": *spread}
	var rate, decodeTok, decodeSec float64
	for r := range *reps {
		for _, k := range ks {
			for _, mode := range []string{"serial", "spread"} {
				// A fresh state opens with a nonce, so no engine has its prefix.
				state := fmt.Sprintf("[%d-%d-%d-%s] %s", time.Now().UnixNano(), k, r, mode, story)
				for _, warm := range []bool{false, true} {
					suffix := ""
					if warm {
						suffix = " Answer again." // the state again, new questions
					}
					before := metrics(*eng)
					d := ask(modes[mode], *model, state, k, suffix)
					after := metrics(*eng)
					c := at(mode, k, warm)
					c.ms = append(c.ms, procstat.MS(d))
					tok := after["llamacpp:prompt_tokens_total"] - before["llamacpp:prompt_tokens_total"]
					c.tokens = append(c.tokens, tok)
					// The floor's rate is the fastest full prefill seen: a
					// cold question of the serial server, one slot at a time.
					if sec := after["llamacpp:prompt_seconds_total"] - before["llamacpp:prompt_seconds_total"]; mode == "serial" && !warm && k == 1 && sec > 0 {
						rate = max(rate, tok/sec)
					}
					decodeTok += after["llamacpp:tokens_predicted_total"] - before["llamacpp:tokens_predicted_total"]
					decodeSec += after["llamacpp:tokens_predicted_seconds_total"] - before["llamacpp:tokens_predicted_seconds_total"]
				}
			}
		}
	}
	step := 1000 * decodeSec / max(decodeTok, 1)
	fmt.Printf("llama-server's own timings: prefill %.0f tokens/s (the fastest cold one-question prompt), decode step %.1f ms\n\n", rate, step)
	fmt.Println("| K | state | floor tokens | floor (ms) | before p50 (ms) | before / floor | after p50 (ms) | after / floor | after tokens |")
	fmt.Println("|---|---|---|---|---|---|---|---|---|")
	for _, warm := range []bool{false, true} {
		for _, k := range ks {
			s, p := at("serial", k, warm), at("spread", k, warm)
			floorTok := procstat.Median(s.tokens)
			floor := 1000*floorTok/rate + step
			name := map[bool]string{false: "cold", true: "warm"}[warm]
			fmt.Printf("| %d | %s | %.0f | %.0f | %.0f | %.2fx | %.0f | %.2fx | %.0f |\n", k, name, floorTok, floor,
				procstat.Median(s.ms), procstat.Median(s.ms)/floor, procstat.Median(p.ms), procstat.Median(p.ms)/floor, procstat.Median(p.tokens))
		}
	}
}

// ask sends the first k questions over state, with suffix added to each
// question's instructions.
func ask(url, model, state string, k int, suffix string) time.Duration {
	s, _ := json.Marshal(state)
	qs := make([]string, k)
	for i, q := range questions[:k] {
		qs[i] = strings.Replace(q, `?"`, `?`+suffix+`"`, 1)
	}
	body := fmt.Sprintf(`{"model":%q,"state":%s,"questions":{%s}}`, model, s, strings.Join(qs, ","))
	start := time.Now()
	if _, err := testbin.Post(http.DefaultClient, url+"/v1/systemone", strings.NewReader(body)); err != nil {
		fmt.Fprintln(os.Stderr, "kquestions:", err)
		os.Exit(1)
	}
	return time.Since(start)
}

// metrics reads llama-server's Prometheus counters, or ends the program.
func metrics(base string) map[string]float64 {
	m, err := testbin.Metrics(base)
	if err != nil {
		fmt.Fprintln(os.Stderr, "kquestions:", err)
		os.Exit(1)
	}
	return m
}
