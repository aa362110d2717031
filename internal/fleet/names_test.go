package fleet

import "testing"

// On an Ollama node a name without a tag is the one tagged latest, both
// ways round; other tags, other dialects and a registry's port are not
// taken for it.
func TestServesOllamaImplicitLatest(t *testing.T) {
	for _, tc := range []struct {
		dialect string
		models  []string
		ask     string
		want    bool
	}{
		{"ollama", []string{"stories:latest"}, "stories", true},
		{"ollama", []string{"stories"}, "stories:latest", true},
		{"ollama", []string{"stories:latest"}, "stories:latest", true},
		{"ollama", []string{"stories:q4"}, "stories", false},
		{"ollama", []string{"stories:latest"}, "stories:q4", false},
		{"ollama", []string{"stories:latest"}, "stor", false},
		{"ollama", []string{"stories:latest"}, "", false},
		{"ollama", []string{"host:5000/team/stories:latest"}, "host:5000/team/stories", true},
		{"ollama", []string{"host:5000/team/stories:latest"}, "host/team/stories", false},
		{"llamacpp", []string{"stories:latest"}, "stories", false},
		{"openai", []string{"stories:latest"}, "stories", false},
	} {
		n := &Node{Name: "n", Dialect: tc.dialect, claimed: tc.models}
		if got := n.Serves(tc.ask); got != tc.want {
			t.Errorf("%s node serving %q: Serves(%q) = %v, want %v", tc.dialect, tc.models, tc.ask, got, tc.want)
		}
	}
}
