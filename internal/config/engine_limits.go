package config

import "fmt"

// DefaultMaxEngineCalls is a node's default budget of engine calls per
// request. It admits the largest request the default limits allow on a
// llama.cpp node (1,000 questions of 255 options, one call each) with room
// for a wider second read of each, and on a node reading 20 labels a call
// (Ollama, the OpenAI default) 1,000 questions of up to 77 options (4
// calls each). A configuration raising max_questions should raise
// max_engine_calls with it.
const DefaultMaxEngineCalls = 4096

// checkEngineLimits checks a node's context size and call budget; at
// names the node in the file.
func (n Node) checkEngineLimits(at string) []error {
	var errs []error
	if n.NumCtx < 0 {
		errs = append(errs, fmt.Errorf("%s.num_ctx (%s): %d is negative", at, n.Name, n.NumCtx))
	} else if n.NumCtx > 0 && n.Dialect != "ollama" {
		errs = append(errs, fmt.Errorf("%s.num_ctx (%s): only an ollama node takes its context size per request (this one is %s); other engines fix it when they start (llama-server -c, vLLM --max-model-len, SGLang --context-length)", at, n.Name, n.Dialect))
	}
	if n.MaxEngineCalls < 0 {
		errs = append(errs, fmt.Errorf("%s.max_engine_calls (%s): %d is negative", at, n.Name, n.MaxEngineCalls))
	}
	return errs
}
