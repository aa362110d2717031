package fakeengine_test

import (
	"context"
	"maps"
	"math"
	"slices"
	"testing"

	"system1/internal/engine"
	"system1/internal/fakeengine"
	"system1/internal/fingerprint"
	"system1/internal/systemone"
)

// Each dialect's real client reads the fake's build as an identity, the
// same on every read (the fake stamps created and modified_at with the
// time, as the engines do), and another after SetBuild; Swap changes the
// answers with it, so a canary moves.
func TestBuildsAsSystem1SeesThem(t *testing.T) {
	wants := map[fakeengine.Dialect][]string{
		fakeengine.LlamaCpp: {"bos_token", "build_info", "chat_template_sha256", "eos_token", "meta.ftype", "meta.n_ctx_train", "meta.n_params", "meta.n_vocab", "meta.size", "model_ftype", "model_path"},
		fakeengine.Ollama:   {"digest", "families", "family", "format", "parameter_size", "quantization_level", "size", "version"},
		fakeengine.OpenAI:   {"max_model_len", "owned_by", "root", "version"},
	}
	for _, d := range dialects {
		t.Run(string(d), func(t *testing.T) {
			f := start(t, fakeengine.Options{Dialect: d, Build: "one"})
			e := client(d, f.URL)
			id := func() fingerprint.Identity {
				t.Helper()
				got, err := e.(engine.Identifier).Identity(context.Background(), fakeengine.DefaultModel)
				if err != nil {
					t.Fatal(err)
				}
				return got
			}
			canary := func() fingerprint.Reading {
				t.Helper()
				r, _, err := engine.ReadCanary(context.Background(), e, fakeengine.DefaultModel)
				if err != nil {
					t.Fatal(err)
				}
				return r
			}
			first, r1 := id(), canary()
			if names := first.Names(); !slices.Equal(names, wants[d]) {
				t.Errorf("identity fields %v, want %v", names, wants[d])
			}
			if again := id(); !maps.Equal(again.Fields, first.Fields) {
				t.Errorf("the same build read twice: %v, then %v", first, again)
			}
			f.SetBuild("two")
			if f.Build() != "two" {
				t.Errorf("Build() = %q after SetBuild(two)", f.Build())
			}
			second := id()
			if c := fingerprint.Compare(fingerprint.Print{Identity: first, Canary: r1}, fingerprint.Print{Identity: second, Canary: canary()}, 0); !c.Changed || c.CanaryMoved() {
				t.Errorf("another build, the same answers: %s", c)
			}
			f.SetBuild("three")
			f.Set(fakeengine.Behavior{Logprobs: fakeengine.Uniform})
			c := fingerprint.Compare(fingerprint.Print{Identity: second, Canary: r1}, fingerprint.Print{Identity: id(), Canary: canary()}, 0)
			if !c.Changed || !c.CanaryMoved() || len(c.Fields) == 0 {
				t.Errorf("another build and other answers: %s", c)
			}
		})
	}
}

// Without a build the fake answers as before builds were reported: no
// /props without slots, digest "0", no root and no /version.
func TestNoBuildReportsNone(t *testing.T) {
	for _, tc := range []struct {
		d    fakeengine.Dialect
		want []string // the identity's fields, or nil when the read fails
	}{
		{fakeengine.LlamaCpp, nil},
		{fakeengine.Ollama, []string{"digest", "families", "family", "format", "parameter_size", "quantization_level", "size", "version"}},
		{fakeengine.OpenAI, []string{"owned_by"}},
	} {
		t.Run(string(tc.d), func(t *testing.T) {
			f := start(t, fakeengine.Options{Dialect: tc.d})
			id, err := client(tc.d, f.URL).(engine.Identifier).Identity(context.Background(), fakeengine.DefaultModel)
			if tc.want == nil {
				if err == nil {
					t.Fatalf("identity %v without /props, want an error", id)
				}
				return
			}
			if err != nil || !slices.Equal(id.Names(), tc.want) {
				t.Fatalf("identity %v, %v; want fields %v", id, err, tc.want)
			}
			if tc.d == fakeengine.Ollama && id.Fields["digest"] != "0" {
				t.Errorf("digest %q, want 0", id.Fields["digest"])
			}
		})
	}
}

// A fake System One endpoint answers the canary, a score among its
// questions, with the model id of its Reply; Set changes both at once,
// and the client reads the new id and distributions.
func TestSystemOneSetChangesModelAndAnswers(t *testing.T) {
	s := fakeengine.StartSystemOne(t, fakeengine.Reply{Model: "jev-1"})
	c := &systemone.Client{BaseURL: s.URL}
	read := func() fingerprint.Reading {
		t.Helper()
		reply, err := c.Ask(context.Background(), fingerprint.Request("jev"))
		if err != nil {
			t.Fatal(err)
		}
		r, err := fingerprint.NewReading(reply.Dists, reply.Model)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	first := read()
	if first.Model != "jev-1" || math.Abs(first.Dists[2][0]-0.9) > 1e-12 {
		t.Fatalf("first reading %+v", first)
	}
	s.Set(fakeengine.Reply{Model: "jev-2", Probs: []float64{0.2, 0.3, 0.5}})
	second := read()
	c2 := fingerprint.Compare(fingerprint.Print{Canary: first}, fingerprint.Print{Canary: second}, 0)
	if !slices.Equal(c2.Fields, []string{fingerprint.AnsweredModel}) || !c2.CanaryMoved() || math.Abs(second.Dists[2][2]-0.5) > 1e-12 {
		t.Fatalf("after Set: %s, reading %+v", c2, second)
	}
	id, err := c.Identity(context.Background(), "jev-2")
	if err != nil || id.Fields["release_date"] != "2026-01-01" {
		t.Fatalf("identity %v, %v", id, err)
	}
}
