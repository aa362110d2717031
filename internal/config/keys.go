package config

import (
	"cmp"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"time"
	"unicode"

	"go.yaml.in/yaml/v3"
)

// Scopes are what a key may be allowed: decide (both wires, decide and
// the batches), feedback, read (the reports, shadow, the model list) and
// admin. httpapi's route table says which route needs which, and its
// tests hold its scopes to these.
var Scopes = []string{"decide", "feedback", "read", "admin"}

// Key is one entry of keys: a bearer key, given in the file (key) or in a
// variable (key_env), with the name metrics and the log report it by,
// the scopes it may use and, optionally, its own rate limit and budget. Written as a
// plain string it is a key with every scope and the default rate, named
// by its place (keys[0]).
type Key struct {
	Name   string   `yaml:"name"`
	Key    string   `yaml:"key"`
	KeyEnv string   `yaml:"key_env"`
	Scopes []string `yaml:"scopes"`
	// RateLimit replaces rate_limit's per_second and burst for this key.
	RateLimit *KeyRateLimit `yaml:"rate_limit"`
	// Budget is what the key may spend a day or a month; nil is no limit.
	Budget *Budget `yaml:"budget"`
	// Line is where the entry is written, for its errors.
	Line int `yaml:"-"`
	// mapping is set for an entry written as a mapping, which must name
	// itself and its scopes.
	mapping bool
	// place is where APIKeys found the key (keys[1], keys_env[0]), for
	// its errors.
	place string
}

// KeyRateLimit is one key's token bucket; per_second 0 is unlimited.
type KeyRateLimit struct {
	PerSecond float64 `yaml:"per_second"`
	Burst     int     `yaml:"burst"`
}

// Budget is a key's spending limit: usd dollars of answers' cost
// (decision.USD, as X-System1-Cost says it) per UTC day or month, up
// to decision.MaxBudget.
type Budget struct {
	USD *BudgetDollars `yaml:"usd"`
	Per string         `yaml:"per"`
}

// BudgetPeriods are what a budget's per may be.
var BudgetPeriods = []string{"day", "month"}

// budgetPeriodMax is the longest each period may be, which the decision
// log must keep for a budget's spend to be read back.
var budgetPeriodMax = map[string]time.Duration{"day": 24 * time.Hour, "month": 31 * 24 * time.Hour}

// UnmarshalYAML reads a key as a plain string or as a mapping.
func (k *Key) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind == yaml.ScalarNode {
		var s string
		if err := n.Decode(&s); err != nil {
			return err
		}
		*k = Key{Key: s, Line: n.Line}
		return nil
	}
	type fields Key // without this method
	var f fields
	if err := n.Decode(&f); err != nil {
		return err
	}
	*k = Key(f)
	k.Line, k.mapping = n.Line, true
	return nil
}

// keyName is what a key's name may be: it is a metrics label value and a
// log field, so plain ASCII that needs no quoting anywhere.
var keyName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$`)

// at names entry i in errors: its index, its name and its line, never
// its key.
func (k Key) at(i int) string {
	s := cmp.Or(k.place, fmt.Sprintf("keys[%d]", i))
	if k.Name != "" && k.Name != s {
		s += fmt.Sprintf(" (%s)", k.Name)
	}
	if k.Line > 0 {
		s += fmt.Sprintf(": line %d", k.Line)
	}
	return s
}

// check returns what is wrong with entry i on its own.
func (k Key) check(i int) []error {
	var errs []error
	bad := func(format string, a ...any) {
		errs = append(errs, fmt.Errorf("%s: "+format, append([]any{k.at(i)}, a...)...))
	}
	if k.mapping && k.Name == "" {
		bad("name is required (it is what metrics and the log report the key by)")
	}
	if k.Name != "" && !keyName.MatchString(k.Name) {
		bad("name %q is not 1 to 64 of A-Z, a-z, 0-9, _, . and -, beginning with a letter or digit", k.Name)
	}
	switch {
	case k.Key != "" && k.KeyEnv != "":
		bad("key and key_env go apart: give one")
	case k.KeyEnv != "":
	default:
		if err := CheckKey(k.Key); err != nil {
			if k.mapping && k.Key == "" {
				err = errors.New("key or key_env is required")
			}
			bad("%v", err)
		}
	}
	if k.mapping && len(k.Scopes) == 0 {
		bad("scopes is required: a list of %s (a key written as a plain string has every scope)", strings.Join(Scopes, ", "))
	}
	for _, s := range k.Scopes {
		if !slices.Contains(Scopes, s) {
			bad("scope %q is not one of %s", s, strings.Join(Scopes, ", "))
		}
	}
	if r := k.RateLimit; r != nil && !validRate(r.PerSecond, r.Burst) {
		bad("rate_limit: per_second must be a finite number >= 0 and burst >= 0")
	}
	if b := k.Budget; b != nil {
		if b.USD == nil {
			bad("budget: usd is required: the US dollars the key may spend each period")
		}
		if !slices.Contains(BudgetPeriods, b.Per) {
			bad("budget: per %q is not one of %s (periods are UTC)", b.Per, strings.Join(BudgetPeriods, ", "))
		}
	}
	return errs
}

// checkKeys returns every problem of the keys entries, alone and
// together: a name or a key given twice.
func checkKeys(keys []Key) []error {
	var errs []error
	for i, k := range keys {
		errs = append(errs, k.check(i)...)
	}
	if err := distinct(keys); err != nil {
		errs = append(errs, err)
	}
	return errs
}

// distinct reports the first name or key given twice, naming both
// entries but never the key.
func distinct(keys []Key) error {
	names, secrets := map[string]int{}, map[string]int{}
	for i, k := range keys {
		if j, dup := names[k.Name]; dup && k.Name != "" {
			return fmt.Errorf("%s: the name is %s's too", k.at(i), keys[j].at(j))
		}
		if j, dup := secrets[k.Key]; dup && k.Key != "" {
			return fmt.Errorf("%s: the same key as %s (each caller its own key)", k.at(i), keys[j].at(j))
		}
		names[k.Name], secrets[k.Key] = i, i
	}
	return nil
}

// APIKeys are the keys callers may present, from the file and from
// KeysEnv, each with its key read (key_env's variable), its name (a plain
// string's is its place: keys[0], keys_env[0]) and its scopes (every
// scope for a plain string); or an error naming the first entry that is
// wrong: a key that no caller could present (a blank key would let in
// whoever sends a blank token), a variable that is empty, a name or a key
// given twice. KeysEnv's entries are trimmed of the spaces and tabs
// around its commas.
func (c *Config) APIKeys(getenv func(string) string) ([]Key, error) {
	keys := make([]Key, 0, len(c.Keys))
	for i, k := range c.Keys {
		if errs := k.check(i); len(errs) > 0 {
			return nil, errs[0]
		}
		if k.KeyEnv != "" {
			k.Key = getenv(k.KeyEnv)
			if err := CheckKey(k.Key); err != nil {
				return nil, fmt.Errorf("%s: key_env: $%s: %w", k.at(i), k.KeyEnv, err)
			}
		}
		k.place = fmt.Sprintf("keys[%d]", i)
		k.Name = cmp.Or(k.Name, k.place)
		k.Scopes = slices.Clone(k.Scopes)
		if k.Scopes == nil {
			k.Scopes = slices.Clone(Scopes)
		}
		keys = append(keys, k)
	}
	if v := c.KeysEnv; v != "" && getenv(v) != "" {
		for i, s := range strings.Split(getenv(v), ",") {
			s = strings.Trim(s, " \t")
			if err := CheckKey(s); err != nil {
				return nil, fmt.Errorf("keys_env: entry %d of $%s: %w (the variable holds comma-separated keys)", i, v, err)
			}
			place := fmt.Sprintf("keys_env[%d]", i)
			keys = append(keys, Key{Name: place, Key: s, Scopes: slices.Clone(Scopes), place: place})
		}
	}
	if err := distinct(keys); err != nil {
		return nil, err
	}
	return keys, nil
}

// CheckKey says what is wrong with an API key, if anything: empty, blank,
// white space at either end (HTTP strips spaces and tabs from a header,
// so no caller could present it) or a control character (which a header
// cannot carry).
func CheckKey(k string) error {
	switch {
	case k == "":
		return errors.New("a key must not be empty")
	case strings.TrimFunc(k, unicode.IsSpace) == "":
		return errors.New("a key must not be blank (only white space)")
	case strings.TrimFunc(k, unicode.IsSpace) != k:
		return errors.New("a key must not begin or end with white space")
	case strings.ContainsFunc(k, unicode.IsControl):
		return errors.New("a key must not hold control characters")
	}
	return nil
}
