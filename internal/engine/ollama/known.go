package ollama

import (
	"fmt"

	"system1/internal/engine"
	"system1/internal/engine/openai"
)

// KnownLabels is Labels, which needs no call on Ollama.
func (e *Engine) KnownLabels(model string, candidates []string, want int) ([]string, bool) {
	return openai.SafeLabels(candidates, want), true
}

// uncut refuses a reading whose prompt filled the whole context: that is
// what a prompt Ollama cut looks like (it keeps exactly num_ctx tokens), a
// guard for an Ollama that ignores "truncate": false. Only a node that
// sets num_ctx knows its context.
func uncut(promptTokens *int, numCtx int) error {
	if numCtx <= 0 || promptTokens == nil || *promptTokens < numCtx {
		return nil
	}
	return &engine.Failure{Kind: engine.Rejected, ContextTooLong: true, Err: fmt.Errorf(
		"the prompt took %d tokens, the whole context (num_ctx %d): it does not fit, or Ollama cut it", *promptTokens, numCtx)}
}
