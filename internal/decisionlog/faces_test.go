package decisionlog

import (
	"os"
	"strings"
	"testing"
)

// docs/decision-log.md's list of the faces a record names holds every
// face the log is given, so that a query by face (WHERE face = ...)
// written from it misses none.
func TestDecisionLogPageNamesEveryFace(t *testing.T) {
	b, err := os.ReadFile("../../docs/decision-log.md")
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(b), "Request id, question id")
	list, _, _ := strings.Cut(rest, "model and node")
	if !ok {
		t.Fatal("the page's list of a record's fields is not found")
	}
	for _, f := range []string{FaceSystemOne, FaceDecisions, FaceDecide, FaceMCP, FaceRun, FaceShadow} {
		if !strings.Contains(list, "`"+f+"`") {
			t.Errorf("docs/decision-log.md's faces (%s) do not name %q", strings.Join(strings.Fields(list), " "), f)
		}
	}
}
