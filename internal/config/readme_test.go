package config

import (
	"os"
	"reflect"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

// yamlBlock is the first yaml block after heading in the Markdown file.
func yamlBlock(t *testing.T, file, heading string) string {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(b), "\n"+heading+"\n")
	if !ok {
		t.Fatalf("%s has no section %s", file, heading)
	}
	_, rest, ok = strings.Cut(rest, "```yaml\n")
	block, _, ok2 := strings.Cut(rest, "```")
	if !ok || !ok2 {
		t.Fatalf("%s: %s has no yaml block", file, heading)
	}
	return block
}

// The configuration page's example is the reference users copy: it must
// parse, pass every check, and name every key of the file (but the old
// providers: form, which excludes gateway.chain and has its own example).
func TestConfigurationPageNamesEveryKey(t *testing.T) {
	block := yamlBlock(t, "../../docs/configuration.md", "## Every key")
	c, err := Parse([]byte(block))
	if err != nil {
		t.Fatal(err)
	}
	if errs := c.Check(); len(errs) > 0 {
		t.Fatal(errs)
	}
	if len(c.Nodes) != 4 || len(c.Gateway.Chain) != 2 || len(c.Providers) != 0 || c.Nodes[0].QueueTimeout == 0 || c.Calibration.Mode != "apply" {
		t.Fatalf("parsed %+v", c)
	}
	var doc yaml.Node
	if err := yaml.Unmarshal([]byte(block), &doc); err != nil {
		t.Fatal(err)
	}
	have := map[string]bool{}
	keyPaths(&doc, "", have)
	var missing []string
	for _, k := range fieldPaths(reflect.TypeFor[Config](), "") {
		if !have[k] && k != "providers" && !strings.HasPrefix(k, "providers[].") {
			missing = append(missing, k)
		}
	}
	if len(missing) > 0 {
		t.Errorf("docs/configuration.md's example does not name %v", missing)
	}
	if len(have) < 60 {
		t.Fatalf("read %d keys from the example: %v", len(have), have)
	}
}

// The README's shorter example parses and passes every check too.
func TestReadmeExample(t *testing.T) {
	c, err := Parse([]byte(yamlBlock(t, "../../README.md", "## Configuration")))
	if err != nil {
		t.Fatal(err)
	}
	if errs := c.Check(); len(errs) > 0 {
		t.Fatal(errs)
	}
	if len(c.Nodes) == 0 || len(c.Gateway.Chain) == 0 {
		t.Fatalf("parsed %+v", c)
	}
}

// keyPaths adds the dotted path of every mapping key under n to have, a
// sequence's items as name[].
func keyPaths(n *yaml.Node, at string, have map[string]bool) {
	switch n.Kind {
	case yaml.DocumentNode:
		for _, c := range n.Content {
			keyPaths(c, at, have)
		}
	case yaml.SequenceNode:
		for _, c := range n.Content {
			keyPaths(c, at+"[]", have)
		}
	case yaml.MappingNode:
		for i := 0; i+1 < len(n.Content); i += 2 {
			k := n.Content[i].Value
			if at != "" {
				k = at + "." + k
			}
			have[k] = true
			if at != "aliases" { // the aliases' keys are model ids
				keyPaths(n.Content[i+1], k, have)
			}
		}
	}
}

// fieldPaths lists the dotted yaml path of every field of t, as keyPaths
// writes them; a map is one key (its own keys are the user's).
func fieldPaths(t reflect.Type, at string) []string {
	var out []string
	for f := range t.Fields() {
		name, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
		if name == "" || name == "-" {
			continue
		}
		if at != "" {
			name = at + "." + name
		}
		out = append(out, name)
		ft := f.Type
		if ft.Kind() == reflect.Slice {
			ft, name = ft.Elem(), name+"[]"
		}
		if ft.Kind() == reflect.Struct {
			out = append(out, fieldPaths(ft, name)...)
		}
	}
	return out
}
