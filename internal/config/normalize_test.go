package config

import (
	"reflect"
	"strings"
	"testing"
)

// The old providers: form is read as the chain and nodes: an engine
// provider is a link over its model; a systemone provider a node of its
// name (the same endpoint's node when one exists) and a link held to it.
func TestNormalizeTranslatesProviders(t *testing.T) {
	c, err := Parse([]byte(`nodes:
  - {name: local, url: http://127.0.0.1:8080, dialect: llamacpp, models: [tiny]}
  - {name: jev, url: https://api.typesafe.ai, dialect: systemone, models: [other]}
providers:
  - {name: local, kind: engine, model: tiny, timeout: 1s}
  - {name: laya, kind: systemone, url: http://laya:8000, key_env: LAYA_KEY, model: laya-1, max_options: 20}
  - {name: jev, kind: systemone, url: https://api.typesafe.ai, model: jev-latest}
`))
	if err != nil {
		t.Fatal(err)
	}
	c.Normalize()
	c.Normalize() // a second call changes nothing
	if !c.OldForm || c.Providers != nil {
		t.Fatalf("old form %v, providers %v", c.OldForm, c.Providers)
	}
	wantChain := []Link{
		{Name: "local", Model: "tiny", Timeout: Duration(1e9)},
		{Name: "laya", Model: "laya-1", Nodes: []string{"laya"}, MaxOptions: 20},
		{Name: "jev", Model: "jev-latest", Nodes: []string{"jev"}},
	}
	if !reflect.DeepEqual(c.Gateway.Chain, wantChain) {
		t.Errorf("chain %+v", c.Gateway.Chain)
	}
	if len(c.Nodes) != 3 || !reflect.DeepEqual(c.Nodes[2], Node{Name: "laya", URL: "http://laya:8000", Dialect: "systemone", KeyEnv: "LAYA_KEY", Models: []string{"laya-1"}, MaxOptions: 20}) {
		t.Errorf("nodes %+v", c.Nodes)
	}
	if !reflect.DeepEqual(c.Nodes[1].Models, []string{"other", "jev-latest"}) {
		t.Errorf("the same endpoint's node serves %v", c.Nodes[1].Models)
	}
	if errs := c.Check(); len(errs) > 0 {
		t.Errorf("check: %v", errs)
	}
}

// What cannot be translated is a configuration error: a provider whose
// name is a node of another endpoint, or both forms at once.
func TestNormalizeConflicts(t *testing.T) {
	for yaml, want := range map[string]string{
		"nodes:\n  - {name: jev, url: http://a:1, dialect: systemone}\nproviders:\n  - {name: jev, kind: systemone, url: http://b:2, model: m}\n": "another endpoint",
		"gateway:\n  chain: [{name: a, model: m}]\nproviders:\n  - {name: b, kind: engine, model: m}\n":                                           "both given",
		"gateway:\n  chain: [{name: a, model: m, nodes: [nope]}]\n":                                                                               `node "nope" is not configured`,
		"gateway:\n  chain: [{name: a}, {name: a, model: m}]\n":                                                                                   "used twice",
	} {
		c, err := Parse([]byte(yaml))
		if err != nil {
			t.Fatal(err)
		}
		c.Normalize()
		var msgs []string
		for _, e := range c.Check() {
			msgs = append(msgs, e.Error())
		}
		if !strings.Contains(strings.Join(msgs, "\n"), want) {
			t.Errorf("%s: errors %q lack %q", yaml, msgs, want)
		}
	}
}
