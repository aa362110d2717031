package jobs

import (
	"strings"
	"testing"

	"system1/internal/decision"
)

func TestParseQuestions(t *testing.T) {
	for _, tc := range []struct {
		name, file, model string
		wantModel         string
		wantIDs           []string
		err               string
	}{
		{"a questions map", testQuestions, "m1", "m1", []string{"urgent", "dept"}, ""},
		{"a body without state", `{"model":"from-file","questions":` + testQuestions + `}`, "", "from-file", []string{"urgent", "dept"}, ""},
		// As the input files are: spreadsheet programs and Windows editors
		// begin a UTF-8 file with a byte order mark.
		{"a byte order mark", "\ufeff" + `{"model":"from-file","questions":` + testQuestions + `}`, "", "from-file", []string{"urgent", "dept"}, ""},
		{"the option's model wins", `{"model":"from-file","questions":` + testQuestions + `}`, "m2", "m2", []string{"urgent", "dept"}, ""},
		{"a question named questions", `{"questions":{"type":"noul"},"other":{"type":"noul"}}`, "m", "m", []string{"questions", "other"}, ""},
		{"no model", testQuestions, "", "", nil, "model: none given"},
		{"not JSON", `{"a":`, "m", "", nil, "not valid JSON"},
		{"not an object", `[1]`, "m", "", nil, "must be a JSON object"},
		{"a bad question, named", `{"q":{"type":"choice","criteria":{"a":"x"}},"r":{"type":"maybe"}}`, "m", "", nil,
			"questions.q.criteria: a choice needs at least 2 options; got 1"},
		{"every problem at once", `{"q":{"type":"choice","criteria":{"a":"x"}},"r":{"type":"maybe"}}`, "m", "", nil,
			`questions.r.type: type "maybe" is not one of choice, noul, score`},
		{"no questions", `{"model":"m","questions":{}}`, "", "", nil, "at least one question"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			job, err := ParseQuestions([]byte(tc.file), tc.model, decision.DefaultLimits())
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("%v, want %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var ids []string
			for _, q := range job.Questions {
				ids = append(ids, q.ID)
			}
			if job.Model != tc.wantModel || strings.Join(ids, ",") != strings.Join(tc.wantIDs, ",") || job.State != nil {
				t.Fatalf("model %q questions %v state %s", job.Model, ids, job.State)
			}
		})
	}
}
