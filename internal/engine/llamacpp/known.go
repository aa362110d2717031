package llamacpp

// KnownLabels is Labels from what the tokenizer has already said of
// model's candidates, without a call; ok is false while a candidate it
// would need has not been checked yet (the first question of that size).
func (e *Engine) KnownLabels(model string, candidates []string, want int) (labels []string, ok bool) {
	labels, unknown := e.known(model, candidates, want)
	return labels, unknown < 0
}

// known is Labels from what the tokenizer has said, and the index of the
// first candidate it would have to be asked about; -1 when none.
func (e *Engine) known(model string, candidates []string, want int) (labels []string, unknown int) {
	e.mu.Lock()
	defer e.mu.Unlock()
	for i, c := range candidates {
		if len(labels) == want {
			break
		}
		id, ok := e.ids[tokenKey{model, c}]
		if !ok {
			return nil, i
		}
		if id >= 0 {
			labels = append(labels, c)
		}
	}
	return labels, -1
}
