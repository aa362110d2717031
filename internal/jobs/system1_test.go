package jobs

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"system1/internal/decision"
	"system1/internal/fakeengine"
	"system1/internal/systemone"
	"system1/internal/testbin"
)

// A job through RemoteDecider against a real system1 server (the binary,
// over a fake llama.cpp engine): its batch route answers the rows, a
// batch holding a state over the limit is refused whole with a 422, and
// its rows asked one by one through /v1/systemone, where the 422 is that
// row's error alone.
func TestRemoteAgainstSystem1(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the system1 binary")
	}
	bin := testbin.Binary(t)
	eng := fakeengine.New(fakeengine.Options{Dialect: fakeengine.LlamaCpp})
	defer eng.Close()
	dir := t.TempDir()
	cfg := filepath.Join(dir, "config.yaml")
	if err := os.WriteFile(cfg, fmt.Appendf(nil, "nodes:\n  - name: local\n    url: %s\n    dialect: llamacpp\n", eng.URL), 0o644); err != nil {
		t.Fatal(err)
	}
	base, _, stop, err := testbin.Serve(bin, time.Minute, "--config", cfg, "--state-dir", filepath.Join(dir, "state"))
	if err != nil {
		t.Fatal(err)
	}
	defer stop()

	job, err := ParseQuestions([]byte(testQuestions), fakeengine.DefaultModel, decision.DefaultLimits())
	if err != nil {
		t.Fatal(err)
	}
	const n = 30
	var in strings.Builder
	for i := range n {
		state := fmt.Sprintf(`{"text":"ticket %d"}`, i)
		if i == 17 {
			state = `"` + strings.Repeat("x", decision.DefaultLimits().MaxStateBytes) + `"`
		}
		fmt.Fprintf(&in, `{"id":%d,"state":%s}`+"\n", i, state)
	}
	inPath, out := filepath.Join(dir, "in.jsonl"), filepath.Join(dir, "out.jsonl")
	if err := os.WriteFile(inPath, []byte(in.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	d := &RemoteDecider{URL: base}
	s, err := Run(t.Context(), Options{In: inPath, Out: out, Job: job, Decider: d})
	if err != nil {
		t.Fatal(err)
	}
	lines := readOut(t, out)
	if len(lines) != n || s.Rows != n || s.Errors != 1 {
		t.Fatalf("%d lines, summary %+v", len(lines), s)
	}
	for i, l := range lines {
		if string(l.ID) != fmt.Sprint(i) {
			t.Fatalf("line %d has id %s", i+1, l.ID)
		}
		if i == 17 {
			if l.Error == nil || l.Error.Type != ErrorRejected || l.Error.Status != 422 || !strings.Contains(l.Error.Message, "state") {
				t.Fatalf("the oversized row: %+v", l)
			}
			continue
		}
		var dept struct {
			Choice        string             `json:"choice"`
			Probabilities map[string]float64 `json:"probabilities"`
		}
		if l.Error != nil || json.Unmarshal(l.Answers["dept"], &dept) != nil || !slices.Contains([]string{"billing", "tech", "sales"}, dept.Choice) || len(dept.Probabilities) != 3 {
			t.Fatalf("line %d: %+v %s", i+1, l.Error, l.Answers["dept"])
		}
	}
	if d.MaxBatch() != systemone.MaxBatchStates {
		t.Fatalf("batches turned off against system1's batch route (MaxBatch %d)", d.MaxBatch())
	}
}
