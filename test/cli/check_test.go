package cli

import (
	"encoding/json"
	"encoding/xml"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"system1/internal/fakeengine"
)

// checkCases writes n cases of bench's format, each a ticket about
// billing or tech asking which team, the answer the ticket's topic.
func checkCases(t *testing.T, n int) string {
	t.Helper()
	var b strings.Builder
	for i := range n {
		topic := []string{"billing", "tech"}[i%2]
		fmt.Fprintf(&b, `{"id":"c-%d","set":"teams","state":{"body":"ticket %d about %s"},"questions":{"dept":{"type":"choice","instructions":"Which team?","criteria":{"billing":null,"tech":null}}},"expected":{"dept":%q}}`+"\n", i, i, topic, topic)
	}
	path := filepath.Join(t.TempDir(), "cases.jsonl")
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// system1 check holds a locked case set against its baseline: it exits 0
// against the baseline it wrote, and 1 once other weights answer under
// the same name and build identity (a GGUF copied over the served file),
// naming the build, the flips and the accuracy in its table and in the
// JUnit file; each build is kept in the configuration's builds file; what
// it cannot run on exits 2.
func TestCheckDriftGate(t *testing.T) {
	eng := fakeengine.New(fakeengine.Options{Dialect: fakeengine.LlamaCpp, Build: "one", Behavior: fakeengine.Behavior{Prompted: byTopic}})
	t.Cleanup(eng.Close)
	dir := t.TempDir()
	cfg := filepath.Join(dir, "config.yaml")
	yaml := fmt.Sprintf("decision_log: {off: true}\nfingerprint: {builds: builds.json}\nnodes:\n  - {name: local, url: %q, dialect: llamacpp, models: [fake, other]}\n", eng.URL)
	if err := os.WriteFile(cfg, []byte(yaml), 0o644); err != nil {
		t.Fatal(err)
	}
	cs, base, junit := checkCases(t, 20), filepath.Join(dir, "baseline.json"), filepath.Join(dir, "junit.xml")
	args := []string{"check", "--config", cfg, "--model", "fake", "--cases", cs, "--baseline", base}

	code, out, errOut := system1(t, nil, append(args, "--write-baseline")...)
	if code != 0 || !strings.Contains(out, "wrote the baseline of 20 cases") || strings.Contains(out, "(none)") {
		t.Fatalf("check --write-baseline: exit %d\nstdout: %s\nstderr: %s", code, out, errOut)
	}
	if n := strings.Count(readFile(t, filepath.Join(dir, "builds.json")), `"id"`); n != 1 {
		t.Errorf("the builds file holds %d builds after the baseline's run, want 1", n)
	}
	code, out, errOut = system1(t, nil, append(args, "--junit", junit)...)
	if code != 0 || !strings.Contains(out, "| flip rate | 0 | 0.000 (0/20) |") || strings.Contains(out, "**no**") {
		t.Fatalf("check against its own baseline: exit %d\nstdout: %s\nstderr: %s", code, out, errOut)
	}
	if s := readJUnit(t, junit); s.Tests < 6 || s.Failures != 0 {
		t.Errorf("JUnit of a held check: %+v", s)
	}

	// Other weights under the same name: every identity field unchanged,
	// the answers (and so the canary) other.
	eng.Set(fakeengine.Behavior{Logprobs: fakeengine.Halving})
	code, out, errOut = system1(t, nil, append(args, "--junit", junit)...)
	if code != 1 || !strings.Contains(errOut, "drifted from the baseline") {
		t.Fatalf("check after other weights: exit %d (want 1)\nstdout: %s\nstderr: %s", code, out, errOut)
	}
	for _, want := range []string{"| flip rate | 0 | 0.500 (10/20) |", "drifted: build ", "drifted: the top answer of 10 of 20 cases changed", "drifted: accuracy moved from 1.000 to 0.500"} {
		if !strings.Contains(out, want) {
			t.Errorf("check after other weights does not say %q:\n%s", want, out)
		}
	}
	if n := strings.Count(readFile(t, filepath.Join(dir, "builds.json")), `"id"`); n != 2 {
		t.Errorf("the builds file holds %d builds after other weights answered, want 2", n)
	}
	s := readJUnit(t, junit)
	failed := map[string]bool{}
	for _, c := range s.Cases {
		failed[c.Name] = c.Failure != nil
	}
	if !failed["build"] || !failed["flip rate"] || !failed["accuracy"] || failed["failed requests"] || s.Failures < 3 {
		t.Errorf("JUnit after other weights: %+v", s)
	}
	// --allow-build-change and wide limits: the same answers hold.
	code, out, _ = system1(t, nil, append(args, "--allow-build-change", "--max-flip-rate", "1", "--max-accuracy-drop", "1", "--max-ece-rise", "1", "--max-coverage-drop", "1")...)
	if code != 0 {
		t.Errorf("check with every limit wide: exit %d\n%s", code, out)
	}

	other := checkCases(t, 5)
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"no model", []string{"check", "--config", cfg, "--cases", cs, "--baseline", base}, "--model is required"},
		{"no cases", []string{"check", "--config", cfg, "--model", "fake", "--baseline", base}, "--cases is required"},
		{"no baseline flag", []string{"check", "--config", cfg, "--model", "fake", "--cases", cs}, "--baseline is required"},
		{"no baseline file", []string{"check", "--config", cfg, "--model", "fake", "--cases", cs, "--baseline", filepath.Join(dir, "none.json")}, "write one first with --write-baseline"},
		{"limit out of range", append(args[:len(args):len(args)], "--max-flip-rate", "1.5"), "--max-flip-rate 1.5 is not in [0, 1]"},
		{"another case set", []string{"check", "--config", cfg, "--model", "fake", "--cases", other, "--baseline", base}, "the cases are not the baseline's"},
		{"baseline of another model", []string{"check", "--config", cfg, "--model", "other", "--cases", cs, "--baseline", base}, "the baseline is of model fake, not other"},
		{"unknown flag", append(args[:len(args):len(args)], "--bogus"), "flag provided but not defined"},
		{"stray argument", append(args[:len(args):len(args)], "more.jsonl"), "unexpected argument"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, out, errOut := system1(t, nil, tc.args...)
			if code != 2 || !strings.Contains(errOut, tc.want) {
				t.Errorf("system1 %s: exit %d (want 2), no %q\nstdout: %s\nstderr: %s", strings.Join(tc.args, " "), code, tc.want, out, errOut)
			}
		})
	}
}

// junitSuite is what a CI system reads of system1 check's JUnit file.
type junitSuite struct {
	Tests    int `xml:"tests,attr"`
	Failures int `xml:"failures,attr"`
	Cases    []struct {
		Name    string    `xml:"name,attr"`
		Failure *struct{} `xml:"failure"`
	} `xml:"testcase"`
}

func readJUnit(t *testing.T, path string) junitSuite {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var s junitSuite
	if err := xml.Unmarshal(b, &s); err != nil {
		t.Fatalf("%s is not JUnit XML: %v\n%s", path, err, b)
	}
	return s
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// Two processes of one configuration name one build alike through its
// builds file: system1 decide run twice, the second reading the build a
// little otherwise (a value on the other side of an edge of the
// tolerance's grid, as a busy engine's batches move it), answers with one
// fingerprint; without a builds file the second names the build anew.
func TestDecideNamesOneBuildAcrossProcesses(t *testing.T) {
	skew := func(first float64) fakeengine.Behavior {
		return fakeengine.Behavior{Logprobs: func(labels []string) []float64 {
			lp := make([]float64, len(labels))
			for i := range lp {
				lp[i] = math.Log((1 - first) / float64(len(labels)-1))
			}
			lp[0] = math.Log(first)
			return lp
		}}
	}
	eng := fakeengine.New(fakeengine.Options{Dialect: fakeengine.LlamaCpp, Build: "one"})
	t.Cleanup(eng.Close)
	config := func(builds string) string {
		dir := t.TempDir()
		path := filepath.Join(dir, "config.yaml")
		yaml := fmt.Sprintf("decision_log: {off: true}\nfingerprint: {builds: %q}\ngateway:\n  threshold: 0\n  chain:\n    - {name: local, model: fake}\nnodes:\n  - {name: local, url: %q, dialect: llamacpp, models: [fake]}\n", builds, eng.URL)
		if builds == "" {
			yaml = strings.Replace(yaml, "fingerprint: {builds: \"\"}\n", "", 1)
		}
		if err := os.WriteFile(path, []byte(yaml), 0o644); err != nil {
			t.Fatal(err)
		}
		return path
	}
	served := func(cfg string) string {
		t.Helper()
		code, out, errOut := system1(t, nil, "decide", "--json", "--config", cfg, "Which?", "a", "b")
		var res struct {
			Served struct {
				Fingerprint string `json:"fingerprint"`
			} `json:"served"`
		}
		if err := json.Unmarshal([]byte(out), &res); code != 0 || err != nil || res.Served.Fingerprint == "" {
			t.Fatalf("decide: exit %d, %v\nstdout: %s\nstderr: %s", code, err, out, errOut)
		}
		return res.Served.Fingerprint
	}
	kept, alone := config("builds.json"), config("")
	eng.Set(skew(0.61 - 1e-6))
	first, firstAlone := served(kept), served(alone)
	eng.Set(skew(0.61 + 1e-6))
	if again := served(alone); again == firstAlone {
		t.Fatalf("without a builds file the build read across the grid's edge kept %s: the test shows nothing", again)
	}
	if again := served(kept); again != first {
		t.Errorf("with the builds file the second process named the build %s, the first %s", again, first)
	}
}

// check's threshold flags are checked in the order its help lists them,
// so two bad ones are always told of alike: the first, every run, with
// the usage exit status.
func TestCheckNamesTheFirstBadThreshold(t *testing.T) {
	for i := range 20 {
		code, _, errOut := system1(t, nil, "check", "--model", "m", "--cases", "cases.jsonl", "--baseline", "b.json",
			"--max-accuracy-drop", "2", "--max-ece-rise", "3", "--max-coverage-drop", "4", "--max-flip-rate", "5")
		if code != 2 || !strings.Contains(errOut, "--max-accuracy-drop 2 is not in [0, 1]") {
			t.Fatalf("run %d: exit %d, stderr %q", i, code, errOut)
		}
	}
}

// A baseline whose answers are not distributions over their options (a
// hand edit, a merge's leftovers) is refused naming the case and what is
// wrong (exit 1), where an empty distribution panicked system1 check and
// a short or out-of-range one was held against as if it were answers.
func TestCheckRefusesABaselineOfBrokenAnswers(t *testing.T) {
	eng := fakeengine.New(fakeengine.Options{Dialect: fakeengine.LlamaCpp, Build: "one", Behavior: fakeengine.Behavior{Prompted: byTopic}})
	t.Cleanup(eng.Close)
	dir := t.TempDir()
	cfg := filepath.Join(dir, "config.yaml")
	yaml := fmt.Sprintf("decision_log: {off: true}\nnodes:\n  - {name: local, url: %q, dialect: llamacpp, models: [fake]}\n", eng.URL)
	if err := os.WriteFile(cfg, []byte(yaml), 0o644); err != nil {
		t.Fatal(err)
	}
	// Each case asks a yes/no question beside the choice of team.
	cs, base := filepath.Join(dir, "cases.jsonl"), filepath.Join(dir, "baseline.json")
	cases := strings.ReplaceAll(readFile(t, checkCases(t, 4)), `}},"expected":{`, `},"urgent":{"type":"noul","instructions":"Is it urgent?"}},"expected":{"urgent":false,`)
	if err := os.WriteFile(cs, []byte(cases), 0o644); err != nil {
		t.Fatal(err)
	}
	args := []string{"check", "--config", cfg, "--model", "fake", "--cases", cs, "--baseline", base}
	if code, out, errOut := system1(t, nil, append(args, "--write-baseline")...); code != 0 {
		t.Fatalf("check --write-baseline: exit %d\nstdout: %s\nstderr: %s", code, out, errOut)
	}
	written := readFile(t, base)
	for _, tc := range []struct{ name, dist, want string }{
		{"empty", `[]`, "0 probabilities for 2 options"},
		{"short", `[1]`, "1 probabilities for 2 options"},
		{"out of range", `[2, -1]`, "probability 0 is 2"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var b map[string]any
			if err := json.Unmarshal([]byte(written), &b); err != nil {
				t.Fatal(err)
			}
			for _, q := range b["cases"].([]any)[1].(map[string]any)["questions"].([]any) {
				if q := q.(map[string]any); q["id"] == "urgent" {
					var d any
					_ = json.Unmarshal([]byte(tc.dist), &d)
					q["dist"] = d
				}
			}
			data, _ := json.Marshal(b)
			if err := os.WriteFile(base, data, 0o644); err != nil {
				t.Fatal(err)
			}
			code, out, errOut := system1(t, nil, args...)
			if code != 1 || !strings.Contains(errOut, "baseline case 1 (c-1): question urgent") || !strings.Contains(errOut, tc.want) || strings.Contains(errOut, "panic") {
				t.Errorf("check against a baseline of a %s distribution: exit %d, want 1 naming case c-1 and %q\nstdout: %s\nstderr: %s", tc.name, code, tc.want, out, errOut)
			}
		})
	}
}
