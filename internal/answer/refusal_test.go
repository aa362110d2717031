package answer

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"math"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"system1/internal/decision"
)

// The one rule of refusals: the nodes' own first (an abstention, or no
// label ranked), then the implicit none option winning (ties refuse),
// then too little label mass where the engine can tell; a gate left zero
// refuses nothing.
func TestRefuseRule(t *testing.T) {
	choice := decision.Question{ID: "c", Kind: decision.Choice, Options: []decision.Option{{Key: "a"}, {Key: "b"}, {Key: decision.NoneOption}}}
	plain := decision.Question{ID: "p", Kind: decision.Choice, Options: []decision.Option{{Key: "a"}, {Key: "b"}, {Key: "c"}}}
	noul := decision.Question{ID: "n", Kind: decision.Noul, Options: decision.NoulOptions(nil, nil)}
	no := &Refusal{Reason: RefusedUpstream, Detail: "no"}
	unranked := &Refusal{Reason: RefusedUnranked, Detail: "node n: the model ranked none of the labels"}
	for _, tc := range []struct {
		name     string
		q        decision.Question
		gate     Gate
		dist     decision.Distribution
		mass     float64
		declined *Refusal
		want     Reason
	}{
		{"nothing asked", choice, Gate{}, decision.Distribution{0.2, 0.2, 0.6}, 0.1, nil, ""},
		{"declined", plain, Gate{}, nil, math.NaN(), no, RefusedUpstream},
		{"declined before the gate", choice, Gate{None: true, MinLabelMass: 0.9}, decision.Distribution{0.1, 0.1, 0.8}, 0.1, no, RefusedUpstream},
		{"no label ranked", plain, Gate{MinLabelMass: 0.5}, nil, math.NaN(), unranked, RefusedUnranked},
		{"none wins", choice, Gate{None: true}, decision.Distribution{0.3, 0.2, 0.5}, 0.9, nil, RefusedNone},
		{"none ties", choice, Gate{None: true}, decision.Distribution{0.4, 0.2, 0.4}, 0.9, nil, RefusedNone},
		{"none loses", choice, Gate{None: true}, decision.Distribution{0.5, 0.2, 0.3}, 0.9, nil, ""},
		{"a none option the gate did not add", choice, Gate{}, decision.Distribution{0.3, 0.2, 0.5}, 0.9, nil, ""},
		{"a last option that is not none", plain, Gate{None: true}, decision.Distribution{0.3, 0.2, 0.5}, 0.9, nil, ""},
		{"none before mass", choice, Gate{None: true, MinLabelMass: 0.5}, decision.Distribution{0.3, 0.2, 0.5}, 0.1, nil, RefusedNone},
		{"mass under", noul, Gate{MinLabelMass: 0.5}, decision.Distribution{0.7, 0.3}, 0.49, nil, RefusedLabelMass},
		{"mass at", noul, Gate{MinLabelMass: 0.5}, decision.Distribution{0.7, 0.3}, 0.5, nil, ""},
		{"mass unknown", noul, Gate{MinLabelMass: 0.5}, decision.Distribution{0.7, 0.3}, math.NaN(), nil, ""},
	} {
		req := Request{Request: decision.Request{Questions: []decision.Question{tc.q}}, Gate: tc.gate}
		a := &Answer{Questions: []Question{{Dist: tc.dist, LabelMass: tc.mass}}}
		refuse(req, []*Refusal{tc.declined}, a)
		got := a.Questions[0].Refusal
		switch {
		case tc.want == "" && got != nil:
			t.Errorf("%s: refused: %s", tc.name, got)
		case tc.want != "" && (got == nil || got.Reason != tc.want):
			t.Errorf("%s: %+v, want %s", tc.name, got, tc.want)
		case got != nil && (got.String() == "" || got.Short() == ""):
			t.Errorf("%s: a refusal without words", tc.name)
		}
		if a.Refused() != (tc.want != "") {
			t.Errorf("%s: Refused() = %v", tc.name, a.Refused())
		}
	}
}

// docs/http-api.md names every reason system1_refusals_total counts by,
// and no other: the Reason constants, read from this package's source.
func TestRefusalReasonsDocumented(t *testing.T) {
	f, err := parser.ParseFile(token.NewFileSet(), "refusal.go", nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	var want []string
	for _, d := range f.Decls {
		if g, ok := d.(*ast.GenDecl); ok && g.Tok == token.CONST {
			for _, spec := range g.Specs {
				if v := spec.(*ast.ValueSpec); v.Type != nil && fmt.Sprint(v.Type) == "Reason" {
					want = append(want, strings.Trim(v.Values[0].(*ast.BasicLit).Value, `"`))
				}
			}
		}
	}
	doc, err := os.ReadFile("../../docs/http-api.md")
	if err != nil {
		t.Fatal(err)
	}
	_, after, ok := strings.Cut(string(doc), "`system1_refusals_total{model,reason}` counts them")
	para, _, _ := strings.Cut(after, "\n\n")
	var got []string
	for _, m := range regexp.MustCompile("`([a-z_]+)`").FindAllStringSubmatch(para, -1) {
		got = append(got, m[1])
	}
	slices.Sort(want)
	slices.Sort(got)
	if !ok || len(want) < 4 || !slices.Equal(got, want) {
		t.Errorf("docs/http-api.md lists the reasons %v; the code has %v", got, want)
	}
}
