package config

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"reflect"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
)

// ParseContext is Parse that gives up when ctx ends (a signal while a
// large file loads).
//
// The file is read in time linear in its size. yaml.v3's decoder checks a
// mapping's keys for duplicates pair by pair, so a mapping of n keys
// costs n²/2 comparisons (50,000 aliases took 4 s, 200,000 minutes); and
// KnownFields reports an unknown key by line, not by key path. So the
// file is parsed into a node tree, checked here (duplicates through a
// set, unknown keys and durations by key path, the context every few
// thousand nodes), and decoded without the aliases, which are read from
// their nodes directly.
//
// A file under 64 KiB is read whole whatever ctx says: it takes well under
// a millisecond, and a command started with its context already done
// still says what is wrong with its file.
func ParseContext(ctx context.Context, data []byte) (*Config, error) {
	if len(data) < interruptibleBytes {
		return parseTree(context.Background(), data)
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	type result struct {
		c   *Config
		err error
	}
	// yaml's own parse has no context: it runs aside, and a cancelled
	// read returns at once, leaving it to end at its next check.
	done := make(chan result, 1)
	go func() {
		c, err := parseTree(ctx, data)
		done <- result{c, err}
	}()
	select {
	case r := <-done:
		return r.c, r.err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// interruptibleBytes is the size from which reading stops with its
// context.
const interruptibleBytes = 64 << 10

// LoadContext is Load that gives up when ctx ends.
func LoadContext(ctx context.Context, path string) (*Config, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	c, err := ParseContext(ctx, data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	c.Path = path
	c.Normalize()
	return c, nil
}

func parseTree(ctx context.Context, data []byte) (*Config, error) {
	var doc yaml.Node
	dec := yaml.NewDecoder(bytes.NewReader(data))
	// An empty file is an empty configuration.
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			return &Config{}, nil
		}
		return nil, err
	}
	// A second document ("---") would be ignored: two files pasted
	// together, where the second's settings silently do nothing.
	var next yaml.Node
	if err := dec.Decode(&next); !errors.Is(err, io.EOF) {
		line := next.Line
		if err != nil {
			return nil, err
		}
		return nil, fmt.Errorf("line %d: a second YAML document (after ---): the file is one configuration", line)
	}
	w := &walker{ctx: ctx, seen: map[walkKey]bool{}, fields: map[reflect.Type]map[string]reflect.Type{}}
	if err := w.walk(&doc, reflect.TypeFor[Config](), ""); err != nil {
		return nil, err
	}
	aliases := takeKey(&doc, "aliases")
	c := &Config{}
	if err := doc.Decode(c); err != nil {
		return nil, err
	}
	if aliases != nil {
		m, err := readAliases(ctx, aliases)
		if err != nil {
			return nil, err
		}
		c.Aliases = m
	}
	return c, nil
}

// takeKey removes key from the document's top mapping and returns its
// value (nil when absent).
func takeKey(doc *yaml.Node, key string) *yaml.Node {
	if len(doc.Content) == 0 || doc.Content[0].Kind != yaml.MappingNode {
		return nil
	}
	top := doc.Content[0]
	for i := 0; i+1 < len(top.Content); i += 2 {
		if k := top.Content[i]; k.Kind == yaml.ScalarNode && k.Value == key {
			v := top.Content[i+1]
			top.Content = append(top.Content[:i:i], top.Content[i+2:]...)
			return v
		}
	}
	return nil
}

// readAliases reads the aliases mapping, already checked for duplicate
// keys: model id to model id.
func readAliases(ctx context.Context, n *yaml.Node) (map[string]string, error) {
	n = resolve(n)
	if n.Kind == yaml.ScalarNode && n.ShortTag() == "!!null" {
		return nil, nil
	}
	if n.Kind != yaml.MappingNode {
		return nil, fmt.Errorf("aliases: line %d: a mapping of model ids to models, such as `aliases: {fast: qwen3-0.6b}`", n.Line)
	}
	m := make(map[string]string, len(n.Content)/2)
	for i := 0; i+1 < len(n.Content); i += 2 {
		if i%8192 == 0 {
			if err := ctx.Err(); err != nil {
				return nil, err
			}
		}
		// Lines are where the alias is written, not where an anchor it
		// uses was.
		kLine, vLine := n.Content[i].Line, n.Content[i+1].Line
		k, v := resolve(n.Content[i]), resolve(n.Content[i+1])
		if k.Kind == yaml.ScalarNode && k.ShortTag() == "!!merge" {
			return nil, fmt.Errorf("aliases: line %d: merge keys (<<) are not read here: list each alias", kLine)
		}
		key, err := scalarString(k)
		if err != nil {
			return nil, fmt.Errorf("aliases: line %d: an alias is a model id: %v", kLine, err)
		}
		val, err := scalarString(v)
		if err != nil {
			return nil, fmt.Errorf("aliases[%q]: line %d: an alias names one model: %v", key, vLine, err)
		}
		m[key] = val
	}
	return m, nil
}

// scalarString is a scalar node's value as a string, as the decoder
// would give it ("1" for 1); !!binary and other non-text tags are refused.
func scalarString(n *yaml.Node) (string, error) {
	if n.Kind != yaml.ScalarNode {
		return "", fmt.Errorf("a %s is not a string", kindName(n.Kind))
	}
	switch n.ShortTag() {
	case "!!str", "!!int", "!!float", "!!bool":
		return n.Value, nil
	}
	return "", fmt.Errorf("a %s is not a string", n.ShortTag())
}

func kindName(k yaml.Kind) string {
	switch k {
	case yaml.MappingNode:
		return "mapping"
	case yaml.SequenceNode:
		return "list"
	}
	return "node"
}

func resolve(n *yaml.Node) *yaml.Node {
	for n.Kind == yaml.AliasNode && n.Alias != nil {
		n = n.Alias
	}
	return n
}

// walker checks a node tree against the type it decodes into.
type walker struct {
	ctx   context.Context
	steps int
	// seen are the anchored nodes already checked as a type: an anchor
	// used a million times (a "billion laughs" file) is checked once.
	seen   map[walkKey]bool
	fields map[reflect.Type]map[string]reflect.Type
}

type walkKey struct {
	n *yaml.Node
	t reflect.Type
}

var (
	durationType = reflect.TypeFor[Duration]()
	keyType      = reflect.TypeFor[Key]() // a string when written as one
)

func (w *walker) walk(n *yaml.Node, t reflect.Type, path string) error {
	if w.steps++; w.steps%4096 == 0 {
		if err := w.ctx.Err(); err != nil {
			return err
		}
	}
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch n.Kind {
	case yaml.DocumentNode:
		if len(n.Content) == 0 {
			return nil
		}
		return w.walk(n.Content[0], t, path)
	case yaml.AliasNode:
		k := walkKey{n.Alias, t}
		if n.Alias == nil || w.seen[k] {
			return nil
		}
		w.seen[k] = true
		return w.walk(n.Alias, t, path)
	}
	if t == durationType {
		if n.Kind != yaml.ScalarNode {
			return nil // the decoder says what it is
		}
		if _, err := parseDuration(n.Value); err != nil {
			return fmt.Errorf("%s: line %d: %v", name(path), n.Line, err)
		}
		return nil
	}
	if parse, ok := amountParsers[t]; ok {
		if _, err := parse(n); err != nil {
			return fmt.Errorf("%s: line %d: %v", name(path), n.Line, err)
		}
		return nil
	}
	if n.Kind == yaml.ScalarNode && (t.Kind() == reflect.String || t == keyType) && n.ShortTag() == "!!binary" {
		// Decoded, it is any bytes: a key or a name that is not text.
		return fmt.Errorf("%s: line %d: a !!binary value is not read here: write the text itself", name(path), n.Line)
	}
	switch {
	case t.Kind() == reflect.Struct && n.Kind == yaml.MappingNode:
		fields := w.fields[t]
		if fields == nil {
			fields = yamlFields(t)
			w.fields[t] = fields
		}
		seen := map[string]int{}
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := n.Content[i], n.Content[i+1]
			if k.Kind == yaml.ScalarNode && k.ShortTag() == "!!merge" {
				// `<<: *base` merges another mapping's keys; later keys
				// may override them.
				if err := w.walk(v, t, path); err != nil {
					return err
				}
				continue
			}
			k = resolve(k)
			if k.Kind != yaml.ScalarNode {
				return fmt.Errorf("%s: line %d: a key is a name, not a %s", name(path), k.Line, kindName(k.Kind))
			}
			at := join(path, k.Value)
			if first, dup := seen[k.Value]; dup {
				return fmt.Errorf("%s: line %d: the key appears twice (first at line %d)", at, k.Line, first)
			}
			seen[k.Value] = k.Line
			ft, ok := fields[k.Value]
			if !ok {
				return fmt.Errorf("%s: line %d: unknown key (known here: %s)", at, k.Line, strings.Join(fieldNames(t), ", "))
			}
			if err := w.walk(v, ft, at); err != nil {
				return err
			}
		}
	case t.Kind() == reflect.Map && n.Kind == yaml.MappingNode:
		seen := make(map[string]int, len(n.Content)/2)
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := resolve(n.Content[i]), n.Content[i+1]
			if k.Kind != yaml.ScalarNode {
				continue // the map's reader names it
			}
			at := fmt.Sprintf("%s[%q]", path, k.Value)
			if first, dup := seen[k.Value]; dup {
				return fmt.Errorf("%s: line %d: the key appears twice (first at line %d)", at, k.Line, first)
			}
			seen[k.Value] = k.Line
			if err := w.walk(v, t.Elem(), at); err != nil {
				return err
			}
		}
	case t.Kind() == reflect.Slice && n.Kind == yaml.SequenceNode:
		for i, item := range n.Content {
			if err := w.walk(item, t.Elem(), fmt.Sprintf("%s[%d]", path, i)); err != nil {
				return err
			}
		}
	}
	return nil
}

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

func name(path string) string { return cmp.Or(path, "the file") }

// parseDuration is a duration's check, shared with Duration's decoder.
func parseDuration(s string) (time.Duration, error) {
	v, err := time.ParseDuration(s)
	if err != nil {
		return 0, fmt.Errorf("%q is not a duration such as 30s or 250ms", s)
	}
	if v < 0 {
		return 0, fmt.Errorf("duration %s is negative", s)
	}
	return v, nil
}

// yamlFields maps a struct's yaml keys to their field types.
func yamlFields(t reflect.Type) map[string]reflect.Type {
	m := map[string]reflect.Type{}
	for i := range t.NumField() {
		f := t.Field(i)
		tag, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
		if tag == "-" || !f.IsExported() {
			continue
		}
		m[cmp.Or(tag, strings.ToLower(f.Name))] = f.Type
	}
	return m
}

func fieldNames(t reflect.Type) []string {
	var out []string
	for i := range t.NumField() {
		f := t.Field(i)
		if tag, _, _ := strings.Cut(f.Tag.Get("yaml"), ","); tag != "-" && tag != "" && f.IsExported() {
			out = append(out, tag)
		}
	}
	return out
}
