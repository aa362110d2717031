package fleet

// LimitQuestions sets the most questions one request may ask (the
// configuration's max_questions); 0 keeps decision.DefaultMaxQuestions.
// Call it before the router serves.
func (r *Router) LimitQuestions(n int) { r.maxQuestions = max(n, 0) }
