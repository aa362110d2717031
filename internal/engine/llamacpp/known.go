package llamacpp

// KnownLabels is Labels from what the tokenizer has already said of
// model's candidates, without a call; ok is false while a candidate it
// would need has not been checked yet (the first question of that size).
func (e *Engine) KnownLabels(model string, candidates []string, want int) (labels []string, ok bool) {
	labels, unknown := e.known(model, candidates, want)
	return labels, unknown < 0
}

// known is Labels from what the tokenizer has said, and the index of the
// first candidate it would have to be asked about; -1 when none. Up to
// the first candidate that is no token, the labels are the candidates'
// own (capped, so that an append copies), without an allocation: every
// question asks this twice, and most models have a token for each.
func (e *Engine) known(model string, candidates []string, want int) (labels []string, unknown int) {
	e.mu.Lock()
	defer e.mu.Unlock()
	n := 0 // labels kept, candidates[:n] while labels is nil
	for i, c := range candidates {
		if n == want {
			break
		}
		id, ok := e.ids[tokenKey{model, c}]
		if !ok {
			return nil, i
		}
		switch {
		case id < 0 && labels == nil:
			labels = make([]string, n, min(want, len(candidates)))
			copy(labels, candidates)
		case id < 0:
		case labels == nil:
			n++
		default:
			labels = append(labels, c)
			n++
		}
	}
	if n == 0 {
		return nil, -1
	}
	if labels == nil {
		return candidates[:n:n], -1
	}
	return labels, -1
}
