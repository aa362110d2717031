package main

import (
	"errors"
	"strings"
	"testing"
)

// check's threshold flags are checked in the order its help lists them,
// so two bad ones are always told of alike: the first, every run.
func TestCheckNamesTheFirstBadThreshold(t *testing.T) {
	for i := range 40 {
		_, stderr, err := cli(t, "check", "--model", "m", "--cases", "cases.jsonl", "--baseline", "b.json",
			"--max-accuracy-drop", "2", "--max-ece-rise", "3", "--max-coverage-drop", "4", "--max-flip-rate", "5")
		if !errors.Is(err, errUsage) || !strings.Contains(stderr, "--max-accuracy-drop 2 is not in [0, 1]") {
			t.Fatalf("run %d: %v, stderr %q", i, err, stderr)
		}
	}
}
