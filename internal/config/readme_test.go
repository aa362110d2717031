package config

import (
	"os"
	"strings"
	"testing"
)

// The README's configuration example is the reference users copy: it must
// parse and pass every check.
func TestReadmeExample(t *testing.T) {
	b, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(b), "## Configuration")
	if !ok {
		t.Fatal("the README has no Configuration section")
	}
	_, rest, ok = strings.Cut(rest, "```yaml\n")
	yaml, _, ok2 := strings.Cut(rest, "```")
	if !ok || !ok2 {
		t.Fatal("the Configuration section has no yaml block")
	}
	c, err := Parse([]byte(yaml))
	if err != nil {
		t.Fatal(err)
	}
	if errs := c.Check(); len(errs) > 0 {
		t.Fatal(errs)
	}
	if len(c.Nodes) != 2 || len(c.Gateway.Chain) != 2 || len(c.Providers) != 0 || c.Nodes[0].QueueTimeout == 0 || c.Calibration.Mode != "off" {
		t.Fatalf("parsed %+v", c)
	}
}
