package httpapi

import (
	"crypto/sha256"
	"go/ast"
	"go/parser"
	"go/token"
	"net/http/httptest"
	"strings"
	"testing"
)

// Keys are compared in constant time. A test cannot show that by timing:
// the difference it would look for is nanoseconds, well under the noise
// of a shared machine, so a timing test would either pass whatever the
// code does or fail at random. It asserts instead what makes the
// comparison constant-time, and that it still accepts and refuses the
// right keys:
//
//   - every key is kept as its SHA-256 digest, so that every comparison
//     is of 32 bytes whatever the key's length (TestAuthKeys);
//   - authenticate compares the caller's digest with every configured
//     digest using crypto/subtle, with no early exit from the loop
//     (TestAuthComparesEveryKeyInConstantTime reads the source);
//   - keys of very different lengths all work, through both headers, and
//     a wrong key of the same length as a right one, differing in its
//     first or last byte, a prefix or an extension of one, does not.

func TestAuthKeys(t *testing.T) {
	keys := []string{"k", "sk-" + strings.Repeat("a", 29), strings.Repeat("long-key-", 200)}
	var opt Options
	for _, k := range keys {
		opt.Keys = append(opt.Keys, Key{Secret: k})
	}
	s := New(opt)
	if len(s.keys) != len(keys) {
		t.Fatalf("%d digests for %d keys", len(s.keys), len(keys))
	}
	for i, k := range keys {
		if s.keys[i].digest != sha256.Sum256([]byte(k)) || s.keys[i].Secret != "" {
			t.Errorf("key %d is not kept as its SHA-256 digest", i)
		}
	}

	auth := func(header, value string) int {
		r := httptest.NewRequest("GET", "/v1/models", nil)
		if header != "" {
			r.Header.Set(header, value)
		}
		return s.authenticate(r)
	}
	for i, k := range keys {
		if got := auth("Authorization", "Bearer "+k); got != i {
			t.Errorf("Bearer key %d (%d bytes): got %d", i, len(k), got)
		}
		if got := auth("X-Api-Key", k); got != i {
			t.Errorf("X-Api-Key key %d (%d bytes): got %d", i, len(k), got)
		}
		flip := func(b byte) byte { return b ^ 1 }
		wrong := map[string]string{
			"first byte changed": string(flip(k[0])) + k[1:],
			"last byte changed":  k[:len(k)-1] + string(flip(k[len(k)-1])),
			"extended":           k + "x",
		}
		if len(k) > 1 {
			wrong["prefix"] = k[:len(k)-1]
		}
		for what, w := range wrong {
			if got := auth("Authorization", "Bearer "+w); got != -1 {
				t.Errorf("key %d with its %s: accepted as key %d", i, what, got)
			}
			if got := auth("X-Api-Key", w); got != -1 {
				t.Errorf("key %d with its %s in X-Api-Key: accepted as key %d", i, what, got)
			}
		}
	}
	for _, bad := range [][2]string{{"", ""}, {"Authorization", "Bearer "}, {"Authorization", keys[1]}, {"Authorization", "Basic " + keys[1]}, {"X-Api-Key", ""}} {
		if got := auth(bad[0], bad[1]); got != -1 {
			t.Errorf("%s: %q accepted as key %d", bad[0], bad[1], got)
		}
	}
}

// The loop in authenticate ranges over every configured digest, compares
// with subtle.ConstantTimeCompare, and neither breaks nor returns inside
// the loop, so that the time taken does not depend on which key matched,
// or whether one did. This is a guard against a change that would make it
// faster by making it leak, not a proof of constant time.
func TestAuthComparesEveryKeyInConstantTime(t *testing.T) {
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, "server.go", nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	var fn *ast.FuncDecl
	for _, d := range f.Decls {
		if fd, ok := d.(*ast.FuncDecl); ok && fd.Name.Name == "authenticate" {
			fn = fd
		}
	}
	if fn == nil {
		t.Fatal("server.go has no authenticate")
	}
	var loops []*ast.RangeStmt
	ast.Inspect(fn.Body, func(n ast.Node) bool {
		if r, ok := n.(*ast.RangeStmt); ok {
			loops = append(loops, r)
		}
		return true
	})
	if len(loops) != 1 {
		t.Fatalf("authenticate has %d range loops; want one, over the key digests", len(loops))
	}
	loop := loops[0]
	if sel, ok := loop.X.(*ast.SelectorExpr); !ok || sel.Sel.Name != "keys" {
		t.Errorf("authenticate's loop (%s) does not range over s.keys", fset.Position(loop.Pos()))
	}
	subtle := false
	ast.Inspect(loop.Body, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.ReturnStmt:
			t.Errorf("authenticate returns inside its loop over the keys (%s)", fset.Position(n.Pos()))
		case *ast.BranchStmt:
			if n.Tok == token.BREAK || n.Tok == token.GOTO {
				t.Errorf("authenticate leaves its loop over the keys early (%s)", fset.Position(n.Pos()))
			}
		case *ast.CallExpr:
			if sel, ok := n.Fun.(*ast.SelectorExpr); ok {
				if x, ok := sel.X.(*ast.Ident); ok && x.Name == "subtle" && sel.Sel.Name == "ConstantTimeCompare" {
					subtle = true
				}
			}
		case *ast.BinaryExpr:
			if n.Op == token.EQL || n.Op == token.NEQ {
				if _, isCall := n.X.(*ast.CallExpr); !isCall {
					t.Errorf("authenticate compares with %s in its loop (%s); only subtle.ConstantTimeCompare's result may be", n.Op, fset.Position(n.Pos()))
				}
			}
		}
		return true
	})
	if !subtle {
		t.Error("authenticate does not compare with subtle.ConstantTimeCompare in its loop over the keys")
	}
}
