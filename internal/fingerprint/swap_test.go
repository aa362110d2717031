package fingerprint_test

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"system1/internal/engine"
	"system1/internal/engine/llamacpp"
	"system1/internal/engine/ollama"
	"system1/internal/fingerprint"
	"system1/internal/testengine"
)

// prober probes one (node, model) as the fleet does: the identity read,
// the canary asked, the print held against the tracker's reference.
type prober struct {
	t *testing.T
	e interface {
		engine.Engine
		engine.Identifier
	}
	model string
	tr    *fingerprint.Tracker
}

func (p *prober) probe() fingerprint.Change {
	p.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	id, err := p.e.Identity(ctx, p.model)
	if err != nil {
		p.t.Fatalf("identity: %v", err)
	}
	r, _, err := engine.ReadCanary(ctx, p.e, p.model)
	if err != nil {
		p.t.Fatalf("canary: %v", err)
	}
	return p.tr.Observe(fingerprint.Key{Node: "node", Model: p.model}, fingerprint.Print{Identity: id, Canary: r}, fingerprint.DefaultTolerance)
}

// expect probes and checks the change: changed or not, the identity
// fields that differ, and whether the canary moved.
func (p *prober) expect(step string, changed bool, fields []string, moved bool) {
	p.t.Helper()
	c := p.probe()
	if c.Changed != changed || !slices.Equal(c.Fields, fields) || c.CanaryMoved() != moved {
		p.t.Fatalf("%s: change %+v (%s); want changed %v, fields %v, canary moved %v", step, c, c, changed, fields, moved)
	}
	p.t.Logf("%s: %s (canary delta %.3g)", step, c, c.Delta)
}

func copyFile(t *testing.T, src, dst string) {
	t.Helper()
	data, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(dst, data, 0o644); err != nil {
		t.Fatal(err)
	}
}

// Two random-weight GGUFs of one shape swapped under one name and one
// path, so that llama-server reports exactly the same metadata: only the
// canary sees the swap. The same file under another path, and the same
// weights in F16, are seen by the identity.
func TestSwapOnLlamaServer(t *testing.T) {
	needs(t, "SYSTEM1_LLAMA_SERVER")
	random := testengine.RandomModels(t, 1, 2)
	f16 := testengine.StoriesF16(t)
	served := filepath.Join(t.TempDir(), "model.gguf")
	copyFile(t, random[0], served)
	s := testengine.StartWith(t, testengine.Config{Model: served, Alias: alias})
	p := &prober{t: t, e: &llamacpp.Engine{BaseURL: s.URL}, model: alias, tr: fingerprint.NewTracker()}

	p.expect("first probe", false, nil, false)
	p.expect("probed again", false, nil, false)

	copyFile(t, random[1], served)
	s.Restart(t, testengine.Config{})
	p.expect("random-2 swapped in under the same path", true, nil, true)
	p.expect("probed again", false, nil, false)

	s.Restart(t, testengine.Config{Model: random[0]})
	p.expect("random-1 served from another path", true, []string{"model_path"}, true)

	copyFile(t, testengine.ModelPath(), served)
	s.Restart(t, testengine.Config{Model: served})
	p.expect("stories260K (F32) under the first path", true, []string{"meta.ftype", "meta.n_params", "meta.size", "model_ftype", "model_path"}, true)
	copyFile(t, f16, served)
	s.Restart(t, testengine.Config{})
	p.expect("the same weights in F16 under the same path", true, []string{"meta.ftype", "meta.size", "model_ftype"}, false)

	s.Restart(t, testengine.Config{Slots: 4})
	p.expect("restarted with 4 slots", false, nil, false)
}

// Ollama re-tagging a model: `ollama create` of another GGUF under the
// name, and `ollama cp` of another model onto it, each change the digest;
// creating the same content again does not.
func TestRetagOnOllama(t *testing.T) {
	needs(t, "SYSTEM1_OLLAMA")
	random := testengine.RandomModels(t, 1, 2)
	f16 := testengine.StoriesF16(t)
	o := testengine.StartOllama(t)
	name := testengine.OllamaModel
	p := &prober{t: t, e: &ollama.Engine{BaseURL: o.URL}, model: name, tr: fingerprint.NewTracker()}

	p.expect("first probe", false, nil, false)
	o.Create(t, name, testengine.ModelPath())
	p.expect("the same GGUF created again under the name", false, nil, false)

	o.Create(t, name, f16)
	p.expect("the same weights in F16 created under the name", true, []string{"digest", "quantization_level", "size"}, false)

	o.Create(t, name, random[0])
	p.expect("random-1 created under the name", true, []string{"digest", "parameter_size", "size"}, true)

	o.Create(t, name, random[1])
	p.expect("random-2 of the same shape created under the name", true, []string{"digest"}, false)

	o.Create(t, "other", testengine.ModelPath())
	o.Copy(t, "other", name)
	p.expect("ollama cp of stories260K onto the name", true, []string{"digest", "parameter_size", "quantization_level", "size"}, true)

	o.Restart(t)
	p.expect("ollama restarted", false, nil, false)
}
