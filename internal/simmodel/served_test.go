package simmodel

import "strings"

// The tests read a trained model directly: a classifier by its options in
// the order it was trained on, and what the model serves from it. No
// caller outside the tests does (Logprobs finds the classifier for
// options in any order).

// Served are the log-probabilities the model serves over a question's
// options for a state: the classifier's log-probabilities s, with
// FirstBias added to the first option's, divided by Temperature, then
// normalised to sum to Mass, less the none class's share where the
// classifier has one (it is not shown). Over two options i and j,
// Temperature * (served_i - served_j) = s_i - s_j + FirstBias*([i=0] - [j=0]).
func (m *Model) Served(c *Classifier, text string) []float64 {
	s := c.LogProbs(text)
	if c.None {
		return m.serve(s[:len(c.Options)], s[len(c.Options):])
	}
	return m.serve(s, nil)
}

// Classifier is the classifier for a question whose options, as the
// prompt lists them, are options; nil when none was trained for it.
func (m *Model) Classifier(options []string) *Classifier {
	return m.bySignature[strings.Join(options, "\n")]
}
