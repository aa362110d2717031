package decision

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
)

// USD is an amount of US dollars, counted in pico-dollars (1e-12 USD) so
// that a price written to the pico-dollar and every cost made of it are
// exact: no float rounding between what a node's price says and what a
// reply, the log and the metric add up.
type USD int64

// picoPerUSD is how many USD units make one dollar.
const picoPerUSD = 1_000_000_000_000

// MaxPrice is the most any one price may say, in dollars: far above any
// real price, and low enough that a request's cost (a price times its
// tokens) cannot overflow.
const MaxPrice = 10_000

// MaxBudget is the most a key's budget may be, in dollars: a period's
// spend, past it by what the requests in flight cost, stays far within
// an int64 of pico-dollars.
const MaxBudget = 1_000_000

// String writes u as a decimal of dollars with no trailing zeros, such
// as "0.000123", "1.5" or "0": the form of X-System1-Cost and decide's
// cost.
func (u USD) String() string {
	neg := u < 0
	if neg {
		u = -u
	}
	s := strconv.FormatInt(int64(u/picoPerUSD), 10)
	if frac := int64(u % picoPerUSD); frac != 0 {
		s += "." + strings.TrimRight(fmt.Sprintf("%012d", frac), "0")
	}
	if neg {
		s = "-" + s
	}
	return s
}

// Dollars is u in dollars, as a float (for a Prometheus counter).
func (u USD) Dollars() float64 { return float64(u) / picoPerUSD }

// ParseUSD reads a non-negative decimal amount of dollars, at most
// MaxPrice and at most 12 decimal places (a pico-dollar), such as "0.15"
// or "2e-6" as YAML might write a float.
func ParseUSD(s string) (USD, error) { return parseUSD(s, MaxPrice, "a price") }

// ParseBudget reads a budget as ParseUSD reads a price, more than 0 (a
// request is let in while the spend is under it) and at most MaxBudget.
func ParseBudget(s string) (USD, error) {
	v, err := parseUSD(s, MaxBudget, "a budget")
	switch {
	case err == nil && v == 0:
		return 0, fmt.Errorf("%s lets the key spend nothing, so its every decision would be refused, period after period: a budget is more than 0 (to stop a key deciding, take decide from its scopes)", s)
	case err != nil && strings.HasPrefix(s, "-"):
		return 0, fmt.Errorf("%s is negative: a budget is more than 0", s)
	}
	return v, err
}

// parseUSD reads an amount of dollars of at most most, what it is (a
// price, a budget) named in its errors.
func parseUSD(s string, most int64, what string) (USD, error) {
	in := s
	if strings.ContainsAny(s, "eE") { // a float YAML wrote in exponent form
		f, err := strconv.ParseFloat(s, 64)
		if err != nil {
			return 0, fmt.Errorf("%q is not a decimal number of US dollars", in)
		}
		s = strconv.FormatFloat(f, 'f', -1, 64)
	}
	if strings.HasPrefix(s, "-") {
		return 0, fmt.Errorf("%s is negative: %s is at least 0", in, what)
	}
	s = strings.TrimPrefix(s, "+")
	whole, frac, _ := strings.Cut(s, ".")
	if whole == "" && frac == "" || !digits(whole) || !digits(frac) {
		return 0, fmt.Errorf("%q is not a decimal number of US dollars", in)
	}
	frac = strings.TrimRight(frac, "0")
	if len(frac) > 12 {
		return 0, fmt.Errorf("%s is finer than a pico-dollar (12 decimal places)", in)
	}
	whole = strings.TrimLeft(whole, "0")
	if len(whole) > len(strconv.FormatInt(most, 10)) {
		return 0, fmt.Errorf("%s is over %d US dollars, the most %s may be", in, most, what)
	}
	w, _ := strconv.ParseInt("0"+whole, 10, 64)
	f, _ := strconv.ParseInt(frac+strings.Repeat("0", 12-len(frac)), 10, 64)
	if w > most || w == most && f > 0 { // before w is in pico-dollars, which could overflow
		return 0, fmt.Errorf("%s is over %d US dollars, the most %s may be", in, most, what)
	}
	return USD(w*picoPerUSD + f), nil
}

func digits(s string) bool {
	return !strings.ContainsFunc(s, func(c rune) bool { return c < '0' || c > '9' })
}

// Price is what a node charges: per input and output token (its price
// per million tokens over a million, exact to the pico-dollar), and per
// request forwarded to a hosted endpoint.
type Price struct {
	InputPerToken, OutputPerToken, PerRequest USD
}

// ErrPriceTooFine says a price per million tokens is finer than a
// pico-dollar a token.
var ErrPriceTooFine = errors.New("finer than a pico-dollar a token (6 decimal places per million tokens)")

// PerToken is the price a token of a price per million tokens.
func PerToken(perMTok USD) (USD, error) {
	if perMTok%1_000_000 != 0 {
		return 0, fmt.Errorf("%s is %w", perMTok, ErrPriceTooFine)
	}
	return perMTok / 1_000_000, nil
}

// Cost is what in input tokens, out output tokens and requests forwarded
// cost at p; ok is false when it is more than a USD holds (a node's
// reply may claim any count), so that it is not known rather than
// wrapped.
func (p Price) Cost(in, out, requests int) (cost USD, ok bool) {
	for _, t := range []struct {
		n     int
		price USD
	}{{in, p.InputPerToken}, {out, p.OutputPerToken}, {requests, p.PerRequest}} {
		c, ok := mul(USD(t.n), t.price)
		if !ok {
			return 0, false
		}
		if cost, ok = Add(cost, c); !ok {
			return 0, false
		}
	}
	return cost, true
}

// Add is a+b of two amounts of at least 0; ok is false when the sum is
// more than a USD holds.
func Add(a, b USD) (USD, bool) {
	if a < 0 || b < 0 || a > math.MaxInt64-b {
		return 0, false
	}
	return a + b, true
}

// mul is n*price of n and price at least 0; ok is false past what a USD
// holds.
func mul(n, price USD) (USD, bool) {
	if n < 0 || price < 0 || price > 0 && n > math.MaxInt64/price {
		return 0, false
	}
	return n * price, true
}
