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

// checkEngineLimits checks a node's context size, prompts per call,
// labels a call and call budget; at names the node in the file.
func (n Node) checkEngineLimits(at string) []error {
	var errs []error
	if n.NumCtx < 0 {
		errs = append(errs, fmt.Errorf("%s.num_ctx (%s): %d is negative", at, n.Name, n.NumCtx))
	} else if n.NumCtx > 0 && n.Dialect != "ollama" {
		errs = append(errs, fmt.Errorf("%s.num_ctx (%s): only an ollama node takes its context size per request (this one is %s); other engines fix it when they start (llama-server -c, vLLM --max-model-len, SGLang --context-length)", at, n.Name, n.Dialect))
	}
	switch {
	case n.PromptsPerCall < 0:
		errs = append(errs, fmt.Errorf("%s.prompts_per_call (%s): %d is negative", at, n.Name, n.PromptsPerCall))
	case n.PromptsPerCall > 1 && n.Dialect != "llamacpp":
		errs = append(errs, fmt.Errorf("%s.prompts_per_call (%s): only a llamacpp node takes several prompts in one call (this one is %s)", at, n.Name, n.Dialect))
	case n.PromptsPerCall > 1 && (n.PinSlots != nil && *n.PinSlots || n.SpreadSlots != nil && *n.SpreadSlots):
		errs = append(errs, fmt.Errorf("%s.prompts_per_call (%s): the server gives the prompts of one call their slots, so a slot cannot be pinned; leave pin_slots and spread_slots out", at, n.Name))
	}
	if n.MaxLabels > 0 {
		switch n.Dialect {
		case "ollama":
			errs = append(errs, fmt.Errorf("%s.max_labels (%s): an ollama node reads Ollama's cap of 20 labels a call; only a llamacpp or openai node takes max_labels", at, n.Name))
		case "systemone", "decisions":
			errs = append(errs, fmt.Errorf("%s.max_labels (%s): a %s node forwards the questions whole, and its endpoint reads their labels; only a llamacpp or openai node takes max_labels", at, n.Name, n.Dialect))
		}
	}
	if n.MaxEngineCalls < 0 {
		errs = append(errs, fmt.Errorf("%s.max_engine_calls (%s): %d is negative", at, n.Name, n.MaxEngineCalls))
	}
	return errs
}
