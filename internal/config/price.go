package config

import (
	"errors"
	"fmt"
	"reflect"

	"system1/internal/decision"

	"go.yaml.in/yaml/v3"
)

// Price is what a node charges, for what a decision cost (X-System1-Cost,
// decide's cost, the decision log, system1_cost_usd_total): an engine's
// tokens, or a hosted endpoint's requests. A node without one has an
// unknown cost, never a made-up 0.
type Price struct {
	// InputPerMTok and OutputPerMTok are US dollars a million input and
	// output tokens, as the node reports them; given together.
	InputPerMTok  *Dollars `yaml:"input_per_mtok"`
	OutputPerMTok *Dollars `yaml:"output_per_mtok"`
	// PerRequest is US dollars each request forwarded to a hosted
	// endpoint (dialect systemone or decisions) costs, whatever its
	// questions.
	PerRequest *Dollars `yaml:"per_request"`
}

// Dollars is a non-negative amount of US dollars, read exactly
// (decision.ParseUSD): "0.15" is 0.15, not the float nearest it.
type Dollars decision.USD

// UnmarshalYAML reads a decimal number of dollars.
func (d *Dollars) UnmarshalYAML(n *yaml.Node) error {
	v, err := parseDollars(n)
	if err != nil {
		return fmt.Errorf("line %d: %w", n.Line, err)
	}
	*d = Dollars(v)
	return nil
}

// MarshalYAML writes the amount as the decimal it was read from.
func (d Dollars) MarshalYAML() (any, error) { return decision.USD(d).String(), nil }

// BudgetDollars is a key's budget, read as Dollars is, up to
// decision.MaxBudget where a price stops at decision.MaxPrice.
type BudgetDollars decision.USD

// UnmarshalYAML reads a decimal number of dollars.
func (d *BudgetDollars) UnmarshalYAML(n *yaml.Node) error {
	v, err := parseBudget(n)
	if err != nil {
		return fmt.Errorf("line %d: %w", n.Line, err)
	}
	*d = BudgetDollars(v)
	return nil
}

// MarshalYAML writes the amount as the decimal it was read from.
func (d BudgetDollars) MarshalYAML() (any, error) { return decision.USD(d).String(), nil }

// amountParsers read each type of amount from its node, for the tree's
// check of every value (tree.go) as for UnmarshalYAML.
var amountParsers = map[reflect.Type]func(*yaml.Node) (decision.USD, error){
	reflect.TypeFor[Dollars]():       parseDollars,
	reflect.TypeFor[BudgetDollars](): parseBudget,
}

func parseDollars(n *yaml.Node) (decision.USD, error) {
	return parseAmount(n, "a price is a number of US dollars, such as 0.15", decision.ParseUSD)
}

func parseBudget(n *yaml.Node) (decision.USD, error) {
	return parseAmount(n, "a budget is a number of US dollars, such as 25", decision.ParseBudget)
}

// parseAmount reads a scalar number, or a string of one, with parse; a
// node of another kind is notNumber.
func parseAmount(n *yaml.Node, notNumber string, parse func(string) (decision.USD, error)) (decision.USD, error) {
	if n.Kind != yaml.ScalarNode || (n.ShortTag() != "!!int" && n.ShortTag() != "!!float" && n.ShortTag() != "!!str") {
		return 0, errors.New(notNumber)
	}
	return parse(n.Value)
}

// Decision is the price as the answer path applies it; nil when the node
// has none.
func (p *Price) Decision() *decision.Price {
	if p == nil {
		return nil
	}
	var out decision.Price
	if p.InputPerMTok != nil {
		out.InputPerToken, _ = decision.PerToken(decision.USD(*p.InputPerMTok))
	}
	if p.OutputPerMTok != nil {
		out.OutputPerToken, _ = decision.PerToken(decision.USD(*p.OutputPerMTok))
	}
	if p.PerRequest != nil {
		out.PerRequest = decision.USD(*p.PerRequest)
	}
	return &out
}

// checkPrice says what is wrong with a node's price: none of its keys,
// one token price without the other, a token price finer than a
// pico-dollar a token, or a per-request price on an engine (whose calls
// are priced by their tokens).
func (n Node) checkPrice(at string) []error {
	p := n.Price
	if p == nil {
		return nil
	}
	var errs []error
	bad := func(format string, a ...any) { errs = append(errs, fmt.Errorf(format, a...)) }
	at = fmt.Sprintf("%s.price (%s)", at, n.Name)
	if p.InputPerMTok == nil && p.OutputPerMTok == nil && p.PerRequest == nil {
		bad("%s: give input_per_mtok and output_per_mtok (US dollars a million tokens), or per_request (US dollars a request to a hosted endpoint)", at)
	}
	if (p.InputPerMTok == nil) != (p.OutputPerMTok == nil) {
		bad("%s: input_per_mtok and output_per_mtok go together (write 0 for a side that is free)", at)
	}
	for _, k := range []struct {
		key string
		v   *Dollars
	}{{"input_per_mtok", p.InputPerMTok}, {"output_per_mtok", p.OutputPerMTok}} {
		if k.v == nil {
			continue
		}
		if _, err := decision.PerToken(decision.USD(*k.v)); err != nil {
			bad("%s: %s: %v", at, k.key, err)
		}
	}
	if p.PerRequest != nil && n.Dialect != "systemone" && n.Dialect != "decisions" {
		bad("%s: per_request prices a hosted endpoint (dialect systemone or decisions); a %s engine is priced by its tokens (input_per_mtok and output_per_mtok)", at, n.Dialect)
	}
	return errs
}
