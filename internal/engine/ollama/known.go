package ollama

import "system1/internal/engine/openai"

// KnownLabels is Labels, which needs no call on Ollama.
func (e *Engine) KnownLabels(model string, candidates []string, want int) ([]string, bool) {
	return openai.SafeLabels(candidates, want), true
}
