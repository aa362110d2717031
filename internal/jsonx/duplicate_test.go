package jsonx_test

import (
	"errors"
	"fmt"
	"testing"

	"system1/internal/jsonx"
)

// TestIsDuplicate holds IsDuplicate to errors.As, wrapped errors
// included, and to no allocation: errors.As made one of its target on
// every body read.
func TestIsDuplicate(t *testing.T) {
	d := &jsonx.DuplicateKeyError{Key: "k"}
	for _, err := range []error{nil, errors.New("other"), d, fmt.Errorf("wrapped: %w", d)} {
		var got, want *jsonx.DuplicateKeyError
		if ok, wantOK := jsonx.IsDuplicate(err, &got), errors.As(err, &want); ok != wantOK || got != want {
			t.Errorf("jsonx.IsDuplicate(%v) = %v, %v; errors.As: %v, %v", err, got, ok, want, wantOK)
		}
	}
	_, err := jsonx.Members([]byte(`{"a":1,"a":2}`))
	if n := testing.AllocsPerRun(100, func() {
		var dup *jsonx.DuplicateKeyError
		if !jsonx.IsDuplicate(err, &dup) || dup.Key != "a" {
			t.Fatal("the duplicate was not found")
		}
	}); n != 0 {
		t.Errorf("IsDuplicate made %v allocations, want 0", n)
	}
}
