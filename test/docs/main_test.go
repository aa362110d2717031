package docs_test

import (
	"testing"

	"system1/internal/testbin"
)

// TestMain removes the binary the tests built.
func TestMain(m *testing.M) { testbin.Main(m) }
