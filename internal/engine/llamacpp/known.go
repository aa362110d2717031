package llamacpp

// KnownLabels is Labels from what the tokenizer has already said of
// model's candidates, without a call; ok is false while a candidate it
// would need has not been checked yet (the first question of that size).
func (e *Engine) KnownLabels(model string, candidates []string, want int) (labels []string, ok bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, c := range candidates {
		if len(labels) == want {
			break
		}
		id, known := e.ids[tokenKey{model, c}]
		if !known {
			return nil, false
		}
		if id >= 0 {
			labels = append(labels, c)
		}
	}
	return labels, true
}
