// Package simmodel is a simulated language model with real signal, for
// tests and benchmarks of calibration: a bag-of-words logistic regression
// per question, trained on labelled case files, served through the fake
// engine with its label logits made over-confident by a known temperature
// and biased toward the first label. Its answers are right often but not
// always, and wrong in a known way, so a calibration loop has something
// real to correct and a known answer to find.
//
// # States that fit no option
//
// Trained by TrainWithOutOfScope, a question's classifier has one more
// class, "fits none", learnt from states known to fit none of its options
// (for banking12's question: Banking77 messages whose intent is not one of
// the twelve, CLINC150's near out-of-scope). The model then serves what a
// pre-constraint engine reports when it does not see its answer among the
// labels: the labels together get DefaultMass*(1-P(none)), the rest going to
// tokens that are not labels, so system1's label mass falls with the
// model's own belief that no option fits. A prompt that also lists
// Options.NoneOption (the gateway's none_option) gets P(none) on that
// option's label instead, and the labels together get DefaultMass again. P(none)
// is the served one: the classifier's, biased and tempered with the
// options, as a real model's over-confidence would reach it too.
//
// These are a simulation's numbers. They show that min_label_mass and
// none_option act on a learnt signal and what they cost in-scope, not what
// a real model's label mass looks like: a bag of words knows nothing of a
// state's words it never saw, so a far out-of-scope state (a news story
// asked a banking question) gets what its few known words and the none
// class's prior (the share of out-of-scope states among the training
// cases) say, sharpened by the served temperature; and where a
// real model with a none option might still put some of its doubt off the
// labels, this one puts all of it on the none label.
package simmodel

import (
	"errors"
	"fmt"
	"hash/fnv"
	"math"
	"slices"
	"strings"
	"unicode"

	"system1/internal/calibration"
	"system1/internal/calibration/fitting"
	"system1/internal/cases"
	"system1/internal/decision"
	"system1/internal/engine"
	"system1/internal/fakeengine"
)

// Options configure training and serving.
type Options struct {
	// Temperature divides the served logits: below 1 is over-confident.
	// 0 is DefaultTemperature.
	Temperature float64
	// FirstBias is added, in nats, to the first label's logit before the
	// temperature. Negative is allowed; 0 is no bias.
	FirstBias float64
	// NoneOption is the option line of an implicit "none of these"
	// option (the gateway's NoneOption). A prompt listing it after the
	// options of a question trained with out-of-scope states is served
	// the none class's probability on its label; "" serves no such
	// option, and a prompt listing it is then an unknown question.
	NoneOption string
}

// DefaultOptions are the ones tests and benchmarks start from: served at
// temperature 0.5 (over-confident) with one nat of bias toward the first
// label.
func DefaultOptions() Options {
	return Options{Temperature: DefaultTemperature, FirstBias: 1}
}

// The model's constants: its default temperature; the probability
// served on the labels together (the rest goes to a token that is not a
// label, as a pre-constraint engine reports); training's weight decay and
// epochs of full-batch gradient descent.
const (
	DefaultTemperature = 0.5
	DefaultMass        = 0.9
	DefaultL2          = 1e-4
	DefaultEpochs      = 300
)

// Model is a trained simulated model: one classifier per question
// signature (its options as the prompt lists them).
type Model struct {
	Temperature, FirstBias float64
	// NoneOption is Options.NoneOption.
	NoneOption  string
	bySignature map[string]*Classifier
	// bySet maps a signature's options, sorted, to the signature.
	bySet map[string]string
}

// Classifier is a multinomial logistic regression over the words of the
// state, one class per option, and one more after them ("fits none")
// when it was trained with out-of-scope states.
type Classifier struct {
	// Options are the option lines, as the prompt shows them, in order.
	Options []string
	// None is set when the classifier has the "fits none" class, index
	// len(Options).
	None  bool
	vocab map[string]int
	// w[k] holds class k's weights, the bias last.
	w [][]float64
	// T0 is the temperature that calibrates the regression's own
	// logits, fitted on a part of the training cases it was not fitted
	// on; LogProbs applies it, so that the served temperature is the only
	// miscalibration by design.
	T0 float64
}

// ErrNoCases means there was nothing to train on.
var ErrNoCases = errors.New("simmodel: no cases")

// example is one question of a case as the prompt shows it.
type example struct {
	signature string
	options   []string
	state     string
	expected  int
}

// examples lays every question of every case out as system1 would and
// reads it back as the engine sees it, so the model trains on exactly the
// text it is served.
func examples(cs []cases.Case) ([]example, error) {
	var out []example
	for _, c := range cs {
		for i, q := range c.Request.Questions {
			labels := engine.Candidates(q)
			if len(labels) < len(q.Options) {
				return nil, fmt.Errorf("simmodel: case %s: %d options, more than one prompt labels", c.ID, len(q.Options))
			}
			p, ok := fakeengine.ParsePrompt(engine.Layout(c.Request.State, q, labels[:len(q.Options)]).User())
			if !ok {
				return nil, fmt.Errorf("simmodel: case %s: the prompt does not parse", c.ID)
			}
			opts := optionLines(p)
			e := example{signature: strings.Join(opts, "\n"), options: opts, state: p.State}
			if i < len(c.Expected) { // out-of-scope cases need none
				e.expected = c.Expected[i]
			}
			out = append(out, e)
		}
	}
	return out, nil
}

// optionLines are a prompt's option lines, in the order it lists them.
func optionLines(p fakeengine.Prompt) []string {
	out := make([]string, len(p.Order))
	for i, l := range p.Order {
		out[i] = p.Options[l]
	}
	return out
}

// Train fits one classifier per question signature of cs.
func Train(cs []cases.Case, opt Options) (*Model, error) {
	return TrainWithOutOfScope(cs, nil, opt)
}

// TrainWithOutOfScope fits one classifier per question signature of cs,
// with a "fits none" class for each signature asked in outOfScope: cases
// whose states fit none of their questions' options (their expected
// answers are not read). An out-of-scope question whose options were
// never asked in cs is an error: there is nothing in scope to learn.
func TrainWithOutOfScope(cs, outOfScope []cases.Case, opt Options) (*Model, error) {
	if !(opt.Temperature > 0) {
		opt.Temperature = DefaultTemperature
	}
	exs, err := examples(cs)
	if err != nil {
		return nil, err
	}
	if len(exs) == 0 {
		return nil, ErrNoCases
	}
	bySig := map[string][]example{}
	var order []string
	for _, e := range exs {
		if _, ok := bySig[e.signature]; !ok {
			order = append(order, e.signature)
		}
		bySig[e.signature] = append(bySig[e.signature], e)
	}
	oos, err := examples(outOfScope)
	if err != nil {
		return nil, err
	}
	none := map[string]bool{}
	for _, e := range oos {
		if _, ok := bySig[e.signature]; !ok {
			return nil, fmt.Errorf("simmodel: an out-of-scope state asked %d options %q that no case in scope asks", len(e.options), e.options)
		}
		e.expected = len(e.options)
		bySig[e.signature] = append(bySig[e.signature], e)
		none[e.signature] = true
	}
	m := &Model{Temperature: opt.Temperature, FirstBias: opt.FirstBias, NoneOption: opt.NoneOption, bySignature: map[string]*Classifier{}, bySet: map[string]string{}}
	for _, sig := range order {
		es := bySig[sig]
		c, err := trainCalibrated(es, none[sig])
		if err != nil {
			return nil, fmt.Errorf("simmodel: %d options %q: %w", len(es[0].options), es[0].options, err)
		}
		m.bySignature[sig] = c
		key := slices.Clone(es[0].options)
		slices.Sort(key)
		m.bySet[strings.Join(key, "\n")] = sig
	}
	return m, nil
}

// calibrationShare is the part of a signature's training cases held back
// to fit the classifier's own temperature.
const calibrationShare = 0.25

// trainCalibrated fits a classifier on most of es and its temperature T0
// on the rest; with none, over one more class than options, for the
// examples expected there.
func trainCalibrated(es []example, none bool) (*Classifier, error) {
	var fitTexts, calTexts []string
	var fitLabels, calLabels []int
	for i, e := range es {
		if float64(i%100) < 100*calibrationShare {
			calTexts, calLabels = append(calTexts, e.state), append(calLabels, e.expected)
		} else {
			fitTexts, fitLabels = append(fitTexts, e.state), append(fitLabels, e.expected)
		}
	}
	if len(fitTexts) == 0 || len(calTexts) == 0 {
		return nil, fmt.Errorf("%d cases are too few to train and calibrate on", len(es))
	}
	k := len(es[0].options)
	if none {
		k++
	}
	c := TrainClassifier(fitTexts, fitLabels, k)
	c.Options, c.None = es[0].options, none
	preds := make([]calibration.Prediction, len(calTexts))
	for i, t := range calTexts {
		lp := c.LogProbs(t)
		d := make(decision.Distribution, k)
		for j, v := range lp {
			d[j] = math.Exp(v)
		}
		preds[i] = calibration.Prediction{Kind: decision.Choice, Dist: d, Expected: calLabels[i], Options: k}
	}
	t0, err := fitting.FitTemperature(preds)
	if err != nil {
		return nil, err
	}
	c.T0 = t0
	return c, nil
}

// words are the lower-cased runs of letters and digits of s, and their
// adjacent pairs.
func words(s string) []string {
	ws := strings.FieldsFunc(strings.ToLower(s), func(r rune) bool { return !unicode.IsLetter(r) && !unicode.IsDigit(r) })
	out := slices.Clone(ws)
	for i := 1; i < len(ws); i++ {
		out = append(out, ws[i-1]+" "+ws[i])
	}
	return out
}

// features are the indices of s's words in vocab, each once.
func features(vocab map[string]int, s string) []int {
	var fs []int
	for _, w := range words(s) {
		if i, ok := vocab[w]; ok && !slices.Contains(fs, i) {
			fs = append(fs, i)
		}
	}
	return fs
}

// TrainClassifier fits a multinomial logistic regression with binary word
// features and L2 weight decay (DefaultL2) by DefaultEpochs of full-batch
// gradient descent with Adam steps. labels[i] is texts[i]'s class among
// classes.
func TrainClassifier(texts []string, labels []int, classes int) *Classifier {
	vocab := map[string]int{}
	for _, t := range texts {
		for _, w := range words(t) {
			if _, ok := vocab[w]; !ok {
				vocab[w] = len(vocab)
			}
		}
	}
	d := len(vocab) + 1 // the bias last
	c := &Classifier{vocab: vocab, w: make([][]float64, classes), T0: 1}
	grad := make([][]float64, classes)
	m1 := make([][]float64, classes)
	m2 := make([][]float64, classes)
	for k := range classes {
		c.w[k], grad[k], m1[k], m2[k] = make([]float64, d), make([]float64, d), make([]float64, d), make([]float64, d)
	}
	feats := make([][]int, len(texts))
	for i, t := range texts {
		feats[i] = append(features(vocab, t), d-1)
	}
	const lr, b1, b2, eps = 0.1, 0.9, 0.999, 1e-8
	n := float64(len(texts))
	p := make([]float64, classes)
	for step := 1; step <= DefaultEpochs; step++ {
		for k := range classes {
			for j := range d {
				grad[k][j] = DefaultL2 * c.w[k][j]
			}
		}
		for i, fs := range feats {
			c.softmax(fs, p)
			for k := range classes {
				g := p[k]
				if k == labels[i] {
					g--
				}
				g /= n
				for _, j := range fs {
					grad[k][j] += g
				}
			}
		}
		c1, c2 := 1-math.Pow(b1, float64(step)), 1-math.Pow(b2, float64(step))
		for k := range classes {
			for j := range d {
				g := grad[k][j]
				m1[k][j] = b1*m1[k][j] + (1-b1)*g
				m2[k][j] = b2*m2[k][j] + (1-b2)*g*g
				c.w[k][j] -= lr * (m1[k][j] / c1) / (math.Sqrt(m2[k][j]/c2) + eps)
			}
		}
	}
	return c
}

// softmax writes the class probabilities of a feature set into p.
func (c *Classifier) softmax(fs []int, p []float64) {
	top := math.Inf(-1)
	for k, w := range c.w {
		var z float64
		for _, j := range fs {
			z += w[j]
		}
		p[k] = z
		top = math.Max(top, z)
	}
	var sum float64
	for k := range p {
		p[k] = math.Exp(p[k] - top)
		sum += p[k]
	}
	for k := range p {
		p[k] /= sum
	}
}

// LogProbs are the classifier's log-probabilities of each class for a
// state's text, tempered by T0.
func (c *Classifier) LogProbs(text string) []float64 {
	fs := append(features(c.vocab, text), len(c.vocab))
	p := make([]float64, len(c.w))
	c.softmax(fs, p)
	for k := range p {
		p[k] = math.Log(p[k]) / c.T0
	}
	lse := logSumExp(p)
	for k := range p {
		p[k] -= lse
	}
	return p
}

// logSumExp is log(sum exp(x)) over xs, shifted by the largest so that
// nothing overflows.
func logSumExp(xs []float64) float64 {
	top := slices.Max(xs)
	var sum float64
	for _, v := range xs {
		sum += math.Exp(v - top)
	}
	return top + math.Log(sum)
}

// serve biases, tempers and scales scores given in the order the prompt
// shows the options (the bias goes to whichever option is shown first),
// over them and the hidden scores together, which are not served: their
// share of DefaultMass goes to tokens that are not labels. Over two options i
// and j, Temperature * (served_i - served_j) = s_i - s_j +
// FirstBias*([i=0] - [j=0]).
func (m *Model) serve(s, hidden []float64) []float64 {
	z := slices.Concat(s, hidden)
	z[0] += m.FirstBias
	for k := range z {
		z[k] /= m.Temperature
	}
	lse := logSumExp(z)
	z = z[:len(s)]
	for k := range z {
		z[k] += math.Log(DefaultMass) - lse
	}
	return z
}

// reordered is the classifier trained on the options in any order, and
// where each option the prompt shows is among its classes (NoneOption,
// when the classifier has the none class, is that class); nil when none
// was trained on that set of options.
func (m *Model) reordered(options []string) (*Classifier, []int) {
	key := slices.Clone(options)
	none := m.NoneOption != "" && slices.Contains(key, m.NoneOption)
	if none {
		key = slices.DeleteFunc(key, func(o string) bool { return o == m.NoneOption })
		if len(key) != len(options)-1 {
			return nil, nil
		}
	}
	slices.Sort(key)
	c := m.bySignature[m.bySet[strings.Join(key, "\n")]]
	if c == nil || (none && !c.None) {
		return nil, nil
	}
	at := make([]int, len(options))
	for i, o := range options {
		at[i] = slices.Index(c.Options, o)
		if none && o == m.NoneOption {
			at[i] = len(c.Options)
		}
	}
	return c, at
}

// Logprobs answers an engine request, as fakeengine.Behavior.Prompted: it
// reads the state and the options from the prompt and serves the
// classifier's log-probabilities, as serve makes them, for the labels
// asked, the none class on NoneOption's label where the prompt lists it.
// A question no classifier was trained for, or a prompt that does not
// parse, gets no label reported at all (every entry -Inf), so system1
// reports the engine as not answering rather than read a made-up
// distribution.
func (m *Model) Logprobs(r fakeengine.Request) []float64 {
	lps := slices.Repeat([]float64{math.Inf(-1)}, len(r.Labels))
	p, ok := fakeengine.ParsePrompt(r.User)
	if !ok {
		return lps
	}
	opts := optionLines(p)
	// A question asked with its options in another order (order
	// debiasing) is the same question to the classifier; the first-label
	// bias follows the position, as a real model's does.
	c, at := m.reordered(opts)
	if c == nil {
		return lps
	}
	own := c.LogProbs(p.State)
	shown := make([]float64, len(at))
	for i, k := range at {
		shown[i] = own[k]
	}
	var hidden []float64
	if c.None && !slices.Contains(at, len(c.Options)) {
		hidden = own[len(c.Options):]
	}
	served := m.serve(shown, hidden)
	for i, l := range r.Labels {
		if k := slices.Index(p.Order, l); k >= 0 {
			lps[i] = served[k]
		}
	}
	return lps
}

// Behavior is the fake engine's behaviour that serves the model.
func (m *Model) Behavior() fakeengine.Behavior {
	return fakeengine.Behavior{Prompted: m.Logprobs}
}

// Split divides cases into a training part and a held-out part of about
// held (0..1) of them, by a fixed hash of each case id, so a case always
// falls on the same side whatever else is in the file.
func Split(cs []cases.Case, held float64) (train, test []cases.Case) {
	for _, c := range cs {
		h := fnv.New64a()
		h.Write([]byte(c.ID))
		if float64(h.Sum64()%10000)/10000 < held {
			test = append(test, c)
		} else {
			train = append(train, c)
		}
	}
	return train, test
}
