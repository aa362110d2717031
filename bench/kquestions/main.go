// Command kquestions measures what K questions over one state cost against
// one: the latency of POST /v1/systemone with 1, 2, 4 and 8 questions over
// a state of about 400 tokens, cold (a state no engine has seen) and warm
// (the state seen just before, the questions new), and prints the table
// with each K's ratio to one question. Run it through bench/kquestions.sh,
// which starts the engine and system1.
package main

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"slices"
	"strings"
	"time"
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
	url := flag.String("url", "http://127.0.0.1:3000", "system1's base URL")
	model := flag.String("model", "jev-latest", "model id")
	reps := flag.Int("reps", 5, "measurements per cell")
	flag.Parse()

	ks := []int{1, 2, 4, 8}
	cold := map[int]time.Duration{}
	warm := map[int]time.Duration{}
	for _, k := range ks {
		var c, w []time.Duration
		for r := range *reps {
			// A fresh state opens with a nonce, so no engine has its prefix.
			state := fmt.Sprintf("[%d-%d-%d] %s", time.Now().UnixNano(), k, r, story)
			c = append(c, ask(*url, *model, state, k, ""))
			w = append(w, ask(*url, *model, state, k, " Answer again.")) // the state again, new questions
		}
		cold[k], warm[k] = median(c), median(w)
	}
	fmt.Printf("| questions | cold p50 (ms) | cold vs 1 | warm p50 (ms) | warm vs 1 |\n|---|---|---|---|---|\n")
	for _, k := range ks {
		fmt.Printf("| %d | %.0f | %.2fx | %.0f | %.2fx |\n", k, ms(cold[k]), ratio(cold[k], cold[1]), ms(warm[k]), ratio(warm[k], warm[1]))
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
	resp, err := http.Post(url+"/v1/systemone", "application/json", bytes.NewReader([]byte(body)))
	if err != nil {
		fmt.Fprintln(os.Stderr, "kquestions:", err)
		os.Exit(1)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		fmt.Fprintf(os.Stderr, "kquestions: status %d: %s\n", resp.StatusCode, b)
		os.Exit(1)
	}
	return time.Since(start)
}

func median(d []time.Duration) time.Duration {
	s := slices.Clone(d)
	slices.Sort(s)
	return s[len(s)/2]
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

func ratio(a, b time.Duration) float64 { return float64(a) / float64(b) }
