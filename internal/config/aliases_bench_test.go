package config

import (
	"fmt"
	"strings"
	"testing"
)

// aliasesYAML is a configuration with n aliases.
func aliasesYAML(n int) []byte {
	var b strings.Builder
	b.WriteString("aliases:\n")
	for i := range n {
		fmt.Fprintf(&b, "  alias-%d: model-%d\n", i, i%7)
	}
	return []byte(b.String())
}

// Loading grows linearly with the number of aliases: compare ns/op of
// the sizes (go test -bench ParseAliases ./internal/config).
func BenchmarkParseAliases(b *testing.B) {
	for _, n := range []int{10_000, 50_000, 200_000} {
		data := aliasesYAML(n)
		b.Run(fmt.Sprintf("%dk", n/1000), func(b *testing.B) {
			b.SetBytes(int64(len(data)))
			for b.Loop() {
				c, err := Parse(data)
				if err != nil || len(c.Aliases) != n {
					b.Fatalf("%d aliases, %v", len(c.Aliases), err)
				}
			}
		})
	}
}
