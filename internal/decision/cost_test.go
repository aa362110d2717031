package decision

import "testing"

func TestParseUSD(t *testing.T) {
	for _, c := range []struct {
		in   string
		want string // "" for an error
	}{
		{"0", "0"}, {"0.15", "0.15"}, {"2.50", "2.5"}, {"1e-6", "0.000001"}, {"10000", "10000"},
		{"0.000000000001", "0.000000000001"}, {".5", "0.5"}, {"3.", "3"},
		{"-1", ""}, {"10000.01", ""}, {"0.0000000000001", ""}, {"abc", ""}, {"", ""}, {".", ""}, {"1.2.3", ""}, {"NaN", ""}, {"1e300", ""},
	} {
		got, err := ParseUSD(c.in)
		switch {
		case c.want == "" && err == nil:
			t.Errorf("ParseUSD(%q) = %s, want an error", c.in, got)
		case c.want != "" && err != nil:
			t.Errorf("ParseUSD(%q): %v", c.in, err)
		case c.want != "" && got.String() != c.want:
			t.Errorf("ParseUSD(%q) = %s, want %s", c.in, got, c.want)
		}
	}
}

func TestPriceCost(t *testing.T) {
	in, _ := ParseUSD("0.15")
	out, _ := ParseUSD("0.6")
	ip, err := PerToken(in)
	if err != nil {
		t.Fatal(err)
	}
	op, _ := PerToken(out)
	req, _ := ParseUSD("0.001")
	p := Price{InputPerToken: ip, OutputPerToken: op, PerRequest: req}
	// 123 x 0.15/1e6 + 1 x 0.6/1e6 + 2 x 0.001, exact.
	if got, ok := p.Cost(123, 1, 2); !ok || got.String() != "0.00201905" {
		t.Errorf("Cost = %s, %v, want 0.00201905", got, ok)
	}
	fine, _ := ParseUSD("0.0000001")
	if _, err := PerToken(fine); err == nil {
		t.Error("PerToken(0.0000001 a million tokens) took a price finer than a pico-dollar a token")
	}
}
