package fleet

import (
	"slices"
	"strings"
)

// ollamaName is a model name as Ollama resolves it: a name without a tag
// is the one tagged latest, so "stories" and "stories:latest" are one
// model. The tag follows the last colon after the last slash; a colon
// before it is a registry's port ("host:5000/model").
func ollamaName(name string) string {
	if !strings.Contains(name[strings.LastIndex(name, "/")+1:], ":") {
		return name + ":latest"
	}
	return name
}

// servesName reports whether models holds model, read as the node's
// engine reads names: exactly, and on Ollama with its implicit :latest.
func (n *Node) servesName(models []string, model string) bool {
	if slices.Contains(models, model) {
		return true
	}
	if n.Dialect != "ollama" || model == "" {
		return false
	}
	want := ollamaName(model)
	return slices.ContainsFunc(models, func(m string) bool { return m != "" && ollamaName(m) == want })
}
