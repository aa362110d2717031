package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"system1/internal/fakeengine"
	"system1/internal/gateway"
)

// shellQuote's words read back as they were in a POSIX shell, so that
// the feedback command decide prints runs as copied whatever the path.
func TestShellQuote(t *testing.T) {
	for _, s := range []string{"/tmp/config.yaml", "/tmp/my dir/c.yaml", "it's", `a"b`, "$HOME", "req_0123", "", "a\\b", "x;rm -rf y", "~/c.yaml"} {
		out, err := exec.Command("sh", "-c", "printf %s "+shellQuote(s)).Output()
		if err != nil || string(out) != s {
			t.Errorf("shellQuote(%q) = %s: the shell read %q (%v)", s, shellQuote(s), out, err)
		}
	}
}

// decide's summary says why it abstained: what the gateway's rationale
// says, where the reason is neither a pause nor the threshold, never
// that the provider declined when the answer was refused for another
// reason (the label mass, the implicit none option).
func TestDecideSummaryAbstentions(t *testing.T) {
	p := func(f float64) *float64 { return &f }
	local := "local"
	ok := []gateway.Attempt{{Provider: local, Outcome: gateway.OutcomeOK}}
	for _, c := range []struct {
		name      string
		res       gateway.Response
		want, not string
	}{
		{"paused", gateway.Response{Status: gateway.Abstained}, "System 1 is paused", ""},
		{"under the threshold", gateway.Response{Status: gateway.Abstained, Confidence: p(0.5), Threshold: p(0.6), Provider: &local, Attempts: ok,
			Rationale: "System 1 is not confident enough to decide"}, "under the threshold 0.6", "declined"},
		{"declined", gateway.Response{Status: gateway.Abstained, Confidence: p(0.9), Threshold: p(0.6), Provider: &local,
			Attempts:  []gateway.Attempt{{Provider: local, Outcome: gateway.OutcomeAbstained}},
			Rationale: `System 1 abstained: provider "local" declined to decide (the engine refused).`}, "declined to decide", ""},
		{"label mass", gateway.Response{Status: gateway.Abstained, Confidence: p(0.9), Threshold: p(0.6), Provider: &local, Attempts: ok,
			Rationale: "System 1 abstained: no option seemed to fit. The model put only 0.1 of its probability on the options at all (under min_label_mass 0.5)"},
			"min_label_mass 0.5", "declined"},
		{"none of these", gateway.Response{Status: gateway.Abstained, Confidence: p(0.7), Threshold: p(0.6), Provider: &local, Attempts: ok,
			Rationale: `System 1 abstained: no option seemed to fit. The implicit option "none" won`}, "no option seemed to fit", "declined"},
	} {
		t.Run(c.name, func(t *testing.T) {
			got := summary(&c.res)
			if !strings.Contains(got, c.want) || c.not != "" && strings.Contains(got, c.not) {
				t.Errorf("summary:\n%s\nwant %q, not %q", got, c.want, c.not)
			}
		})
	}
}

// decide's --min-confidence is the request's min_confidence whatever it
// is: one outside [0, 1] is refused as system1_decide refuses it, naming
// min_confidence (exit 1), never dropped for the configured threshold;
// one JSON cannot carry is a usage error naming the flag.
func TestDecideMinConfidenceOutOfRange(t *testing.T) {
	dir := t.TempDir()
	cfg := filepath.Join(dir, "config.yaml")
	if err := os.WriteFile(cfg, []byte("decision_log: {off: true}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		value string
		usage bool
	}{{"-0.5", false}, {"1.5", false}, {"NaN", true}, {"-Inf", true}} {
		t.Run(c.value, func(t *testing.T) {
			stdout, stderr, err := cli(t, "decide", "--config", cfg, "--state-dir", dir, "--json", "--min-confidence", c.value, "Ship it?")
			if c.usage {
				if !errors.Is(err, errUsage) || !strings.Contains(stderr, "--min-confidence") {
					t.Fatalf("err %v, stderr %q, stdout %s", err, stderr, stdout)
				}
				return
			}
			var res gateway.Response
			if jerr := json.Unmarshal([]byte(stdout), &res); jerr != nil || !errors.Is(err, errReported) ||
				res.Error == nil || res.Error.Code != gateway.CodeInvalidRequest || !strings.Contains(res.Error.Message, "min_confidence") {
				t.Fatalf("err %v, response %s (%v)", err, stdout, jerr)
			}
		})
	}
}

// decide --request reads the whole request from its file: a flag that
// would set a part of it is a usage error naming that flag, never left
// unread while the file's request is asked.
func TestDecideRequestRefusesItsParts(t *testing.T) {
	dir := t.TempDir()
	cfg := filepath.Join(dir, "config.yaml")
	req := filepath.Join(dir, "request.json")
	for file, data := range map[string]string{cfg: "decision_log: {off: true}\n", req: `{"question": "Ship it?"}`} {
		if err := os.WriteFile(file, []byte(data), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	for _, flags := range [][]string{
		{"--min-confidence", "0.9"},
		{"--context", `{"a": 1}`},
		{"--request-id", "r1"},
		{"--request-id", "r1", "--min-confidence", "0.9"},
	} {
		t.Run(strings.Join(flags, " "), func(t *testing.T) {
			args := append([]string{"decide", "--config", cfg, "--state-dir", dir, "--json", "--request", req}, flags...)
			stdout, stderr, err := cli(t, args...)
			if !errors.Is(err, errUsage) {
				t.Fatalf("err %v, stderr %q, stdout %s", err, stderr, stdout)
			}
			for i := 0; i < len(flags); i += 2 {
				if !strings.Contains(stderr, flags[i]) {
					t.Errorf("stderr %q does not name %s", stderr, flags[i])
				}
			}
		})
	}
}

// A flag of decide's given after the question is a usage error that says
// flags go first, never asked of the model as one more option while the
// flag is left unread (--json printing no JSON, --config another file
// read). An option that names no flag, or any word after "--", is an
// option.
func TestDecideFlagAfterTheQuestion(t *testing.T) {
	dir := t.TempDir()
	cfg := filepath.Join(dir, "config.yaml")
	if err := os.WriteFile(cfg, []byte("decision_log: {off: true}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		args []string
		flag string // the flag the usage error names; "" for none
	}{
		{[]string{"Ship it?", "yes", "no", "--json"}, "--json"},
		{[]string{"Ship it?", "-json"}, "-json"},
		{[]string{"Ship it?", "--min-confidence=0.9"}, "--min-confidence=0.9"},
		{[]string{"Ship it?", "yes", "no", "--config", cfg}, "--config"},
		{[]string{"Which level?", "-1", "0", "1"}, ""},
		{[]string{"--", "Which flag?", "--json", "--yaml"}, ""},
	} {
		t.Run(strings.Join(c.args, " "), func(t *testing.T) {
			args := append([]string{"decide", "--config", cfg, "--state-dir", dir}, c.args...)
			stdout, stderr, err := cli(t, args...)
			if c.flag == "" {
				if errors.Is(err, errUsage) {
					t.Fatalf("a usage error: %q", stderr)
				}
				return
			}
			if !errors.Is(err, errUsage) || !strings.Contains(stderr, c.flag) || !strings.Contains(stderr, "before the question") {
				t.Fatalf("err %v, stderr %q, stdout %q", err, stderr, stdout)
			}
		})
	}
}

// decide --request reads at most maxInput bytes, from stdin or a file,
// and refuses a larger request naming the flag and the limit, where it
// read any input whole (/dev/zero never ended).
func TestDecideRequestOverTheLimit(t *testing.T) {
	body := `{"question":"q?"}` + strings.Repeat(" ", maxInput)
	path := filepath.Join(t.TempDir(), "big.json")
	if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ name, request, stdin string }{{"stdin", "-", body}, {"a file", path, ""}} {
		t.Run(tc.name, func(t *testing.T) {
			var out, errb bytes.Buffer
			err := run(t.Context(), []string{"decide", "--request", tc.request}, func(string) string { return "" }, strings.NewReader(tc.stdin), &out, &errb)
			if !errors.Is(err, errUsage) || !strings.Contains(errb.String(), "over the 16 MiB a request may take") {
				t.Errorf("err %v, want a usage error saying the request is over 16 MiB\n%s%s", err, out.String(), errb.String())
			}
		})
	}
}

// decide's help gives --min-confidence one default, the configured
// threshold, where it also printed the flag's sentinel, "(default -1)".
func TestDecideHelpGivesOneDefault(t *testing.T) {
	var out, errb bytes.Buffer
	run(t.Context(), []string{"decide", "-h"}, func(string) string { return "" }, strings.NewReader(""), &out, &errb)
	help := out.String() + errb.String()
	if !strings.Contains(help, "(default: the configured threshold)") || strings.Contains(help, "(default -1)") {
		t.Errorf("decide -h:\n%s", help)
	}
}

// decide's summary of an abstention that lowering --min-confidence would
// not mend (the implicit none option won, or the label mass was under
// min_label_mass) says so in the gateway's words, even where the best
// option is also under the threshold, as it is whenever none wins at the
// default threshold: never "lower it with --min-confidence".
func TestDecideSummaryNotTheThreshold(t *testing.T) {
	eng := fakeengine.New(fakeengine.Options{Dialect: fakeengine.LlamaCpp, Models: []string{"tiny"},
		Behavior: fakeengine.Behavior{Logprobs: fakeengine.Probs(0.03, 0.03, 0.9)}})
	defer eng.Close()
	dir := t.TempDir()
	cfg := filepath.Join(dir, "config.yaml")
	if err := os.WriteFile(cfg, []byte(fmt.Sprintf("decision_log: {off: true}\nnodes:\n  - {name: n1, url: %s, dialect: llamacpp, models: [tiny]}\ngateway:\n  chain:\n    - {name: local, model: tiny}\n", eng.URL)), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ name, request, want string }{
		{"none won", `{"question":"Which?","options":["a","b"],"none_option":true}`, "no option seemed to fit"},
		{"label mass", `{"question":"Which?","options":["a","b"],"min_label_mass":0.5}`, "min_label_mass 0.5"},
	} {
		t.Run(c.name, func(t *testing.T) {
			req := filepath.Join(dir, "request.json")
			if err := os.WriteFile(req, []byte(c.request), 0o600); err != nil {
				t.Fatal(err)
			}
			stdout, stderr, err := cli(t, "decide", "--config", cfg, "--state-dir", dir, "--request", req)
			if !errors.Is(err, errAbstained) || !strings.Contains(stdout, c.want) || strings.Contains(stdout, "--min-confidence") {
				t.Errorf("err %v, want %q and no --min-confidence; stdout:\n%s\nstderr:\n%s", err, c.want, stdout, stderr)
			}
		})
	}
}

// decide's summary of a decision not graded act says its grade and why,
// in the gateway's words, where it told the person what it tells of an
// act: "check it where a mistake would be costly", with no word of the
// close runner-up the gateway says to ask about.
func TestDecideSummarySaysTheGrade(t *testing.T) {
	eng := fakeengine.New(fakeengine.Options{Dialect: fakeengine.LlamaCpp, Models: []string{"tiny"},
		Behavior: fakeengine.Behavior{Logprobs: fakeengine.Probs(0.55, 0.45)}})
	defer eng.Close()
	dir := t.TempDir()
	cfg := filepath.Join(dir, "config.yaml")
	if err := os.WriteFile(cfg, []byte(fmt.Sprintf("decision_log: {off: true}\nnodes:\n  - {name: n1, url: %s, dialect: llamacpp, models: [tiny]}\ngateway:\n  threshold: 0.5\n  chain:\n    - {name: local, model: tiny}\n", eng.URL)), 0o600); err != nil {
		t.Fatal(err)
	}
	stdout, stderr, err := cli(t, "decide", "--config", cfg, "--state-dir", dir, "Which?", "a", "b")
	if err != nil || !strings.Contains(stdout, "graded ask: the runner-up is within 0.1 of it") || strings.Contains(stdout, "check it where a mistake would be costly") {
		t.Errorf("err %v, want the grade ask and why; stdout:\n%s\nstderr:\n%s", err, stdout, stderr)
	}
}

// decide --request-id "" (an unset shell variable, say) is refused naming
// request_id, as system1_decide and POST /v1/decide refuse an empty one,
// where the model was asked under a generated id the caller did not
// expect.
func TestDecideEmptyRequestID(t *testing.T) {
	dir := t.TempDir()
	cfg := filepath.Join(dir, "config.yaml")
	if err := os.WriteFile(cfg, []byte("decision_log: {off: true}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	stdout, stderr, err := cli(t, "decide", "--config", cfg, "--state-dir", dir, "--json", "--request-id", "", "Ship it?")
	var res gateway.Response
	if jerr := json.Unmarshal([]byte(stdout), &res); jerr != nil || !errors.Is(err, errReported) ||
		res.Error == nil || res.Error.Code != gateway.CodeInvalidRequest || !strings.Contains(res.Error.Message, "request_id must not be empty") {
		t.Fatalf("err %v, response %s (%v), stderr %s", err, stdout, jerr, stderr)
	}
}

// The feedback command decide prints runs as copied, whatever the request
// id: one that begins with "-" follows a "--", where feedback read it as
// a flag and refused the command.
func TestDecideFeedbackHintRunsAsCopied(t *testing.T) {
	eng := fakeengine.New(fakeengine.Options{Dialect: fakeengine.LlamaCpp, Models: []string{"tiny"},
		Behavior: fakeengine.Behavior{Logprobs: fakeengine.Probs(0.9, 0.1)}})
	defer eng.Close()
	dir := t.TempDir()
	cfg := filepath.Join(dir, "config.yaml")
	if err := os.WriteFile(cfg, []byte(fmt.Sprintf("nodes:\n  - {name: n1, url: %s, dialect: llamacpp, models: [tiny]}\ngateway:\n  chain:\n    - {name: local, model: tiny}\n", eng.URL)), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"r-1", "-r1", "--config"} {
		t.Run(id, func(t *testing.T) {
			stdout, stderr, err := cli(t, "decide", "--config", cfg, "--state-dir", dir, "--request-id", id, "Which?", "a", "b")
			_, cmd, ok := strings.Cut(stdout, "`")
			cmd, _, ok2 := strings.Cut(cmd, "`")
			if err != nil || !ok || !ok2 {
				t.Fatalf("err %v, no command in stdout:\n%s\nstderr:\n%s", err, stdout, stderr)
			}
			// The shell's words of the command, as a person pasting it runs it.
			words, err := exec.Command("sh", "-c", "set -- "+strings.Replace(cmd, "OPTION", "a", 1)+`; printf '%s\n' "$@"`).Output()
			if err != nil {
				t.Fatal(err)
			}
			args := strings.Split(strings.TrimSuffix(string(words), "\n"), "\n")
			if args[0] != "system1" {
				t.Fatalf("command %q", cmd)
			}
			if out, errb, err := cli(t, args[1:]...); err != nil || !strings.Contains(out, `"request_id": "`+id+`"`) {
				t.Errorf("%s: err %v\n%s%s", cmd, err, out, errb)
			}
		})
	}
}

// decide's summary of an abstention where the model ranked none of the
// options says so, in the gateway's words (offer options that fit),
// where it said the provider declined to decide.
func TestDecideSummaryUnranked(t *testing.T) {
	eng := fakeengine.New(fakeengine.Options{Dialect: fakeengine.LlamaCpp, Models: []string{"tiny"},
		Behavior: fakeengine.Behavior{Logprobs: fakeengine.Probs()}}) // no label among the likeliest
	defer eng.Close()
	dir := t.TempDir()
	cfg := filepath.Join(dir, "config.yaml")
	if err := os.WriteFile(cfg, []byte(fmt.Sprintf("decision_log: {off: true}\nnodes:\n  - {name: n1, url: %s, dialect: llamacpp, models: [tiny]}\ngateway:\n  chain:\n    - {name: local, model: tiny}\n", eng.URL)), 0o600); err != nil {
		t.Fatal(err)
	}
	stdout, stderr, err := cli(t, "decide", "--config", cfg, "--state-dir", dir, "Which?", "a", "b")
	if !errors.Is(err, errAbstained) || !strings.Contains(stdout, "ranked none of the options") {
		t.Errorf("err %v, want the options ranked by none; stdout:\n%s\nstderr:\n%s", err, stdout, stderr)
	}
}
