package outcomes

import (
	"cmp"
	"context"
	"maps"
	"math"
	"slices"
	"strings"
	"sync"
	"time"

	"system1/internal/calibration"
	"system1/internal/calibration/fitting"
	"system1/internal/decision"
	"system1/internal/decisionlog"
)

// slotWidth is the span of decision time whose statistics a bucket keeps
// merged. A report adds up the slots inside its window and reads the
// cases of the one or two slots its edges cut, so its cost is a few
// hundred merges and at most two slots' cases, however many outcomes the
// window holds; six hours keep the slots of a month to 120 a bucket.
const slotWidth = 6 * time.Hour

// tailBatch is the most outcomes one read of the log's tail takes: a
// first read of a large log goes in steps, so that the writer and
// feedback, which share SQLite's one connection, run between them.
const tailBatch = 10000

// pruneEvery is how often the tracker asks the log which records it has
// pruned, to drop their statistics.
const pruneEvery = time.Minute

// ReportCoverages are the coverages whose prediction sets a calibration
// report measures.
func ReportCoverages() []float64 { return []float64{0.8, 0.9, 0.95} }

// Tracker keeps the calibration statistics of the decision log's
// labelled answers up to date as outcomes arrive, so that a report over
// a million outcomes reads a few hundred sums instead of a million
// records, and a refit reads the cases of the buckets due one from
// memory. It reads the log's outcomes in the order they were recorded
// (decisionlog.Log.OutcomesAfter), by this process or any other sharing
// the log, each once; the first read takes the whole log. Per model,
// kind and option bucket it keeps, by slots of decision time, the raw
// statistics and those calibrated by the bucket's fit (rebuilt from its
// cases when the fit's calibrator changes), the label masses decide
// answers had, and how the fit's prediction sets fared on the outcomes
// that came after them. An outcome reported again for the same answer
// replaces the one before (the latest wins, as everywhere), and records
// the log prunes leave the statistics. It is safe for concurrent use.
type Tracker struct {
	log *decisionlog.Log

	syncMu sync.Mutex // one reader of the log's tail at a time
	mu     sync.Mutex // guards what follows
	after  int64      // the last outcome read
	oldest int64      // the oldest record the log keeps, as last read
	pruned time.Time  // when oldest was last read
	cases  map[int64]*tcase
	bucket map[bucketKey]*tbucket
	// unc are the log's uncertain windows (a swap's answers that either
	// build may have given), by their end; their answers are not counted.
	unc []decisionlog.Uncertain

	drift drift // the drift report's histograms, under their own lock
}

// NewTracker tracks the outcomes of log, which must not be nil. It reads
// nothing until it is first asked.
func NewTracker(log *decisionlog.Log) *Tracker {
	return &Tracker{log: log, cases: map[int64]*tcase{}, bucket: map[bucketKey]*tbucket{}}
}

// bucketKey is a bucket of one build of a model: each build (its
// fingerprint, "" for answers recorded without one) has statistics and
// fits of its own.
type bucketKey struct {
	model       string
	fingerprint string
	kind        decision.Kind
	bucket      string
}

// tcase is one labelled record, as the statistics need it.
type tcase struct {
	id      int64 // the record's id
	at      int64 // decision time, ns
	node    string
	request string
	// dist is the distribution before calibration (Entry.Uncalibrated).
	dist    decision.Distribution
	options int
	// expected is the outcome's option, -1 when the outcome is that none
	// fit: then the case calibrates nothing.
	expected int
	// mass is the label mass counted for the label-mass gate, in scope
	// or not; NaN when the case is not one (not a decide answer, no mass
	// known, asked with none_option).
	mass    float64
	massIn  bool
	b       *tbucket
	s       *tslot
	setsRev int // the tbucket's setsRev the case was counted under in since; 0 when not
}

func (c *tcase) prediction() (calibration.Prediction, bool) {
	if c.expected < 0 {
		return calibration.Prediction{}, false
	}
	return calibration.Prediction{Kind: c.b.key.kind, Dist: c.dist, Expected: c.expected, Options: c.options, Request: c.request}, true
}

type tbucket struct {
	key     bucketKey
	options int // an option count of the bucket, to look its fit up by
	slots   map[int64]*tslot
	// cal is the calibrator the slots' calibrated statistics are under,
	// calKey its String.
	cal    calibration.Calibrator
	calKey string
	// sets are the fit's rules at ReportCoverages (a missing one is
	// Method ""), setsKey what they are, setsRev a count of changes, and
	// since how they fared on the outcomes that came after them.
	sets    []calibration.Conformal
	setsKey string
	setsRev int
	since   []calibration.SetCount
	refit   fitting.RefitState
}

type tslot struct {
	cases        map[int64]*tcase
	minAt, maxAt int64 // bounds of the cases' times; only ever widened
	raw, cal     fitting.Stats
	mass         fitting.MassStats
}

// Sync reads the outcomes recorded since the last read and counts them.
func (t *Tracker) Sync(ctx context.Context) error {
	t.syncMu.Lock()
	defer t.syncMu.Unlock()
	if err := t.syncUncertain(ctx); err != nil {
		return err
	}
	t.mu.Lock()
	first := t.after == 0 && len(t.cases) == 0
	t.mu.Unlock()
	if first {
		// The whole log, in two passes; the tail from where it ended.
		var seen []decisionlog.Case
		upTo, err := t.log.EachCase(ctx, func(c decisionlog.Case) {
			seen = append(seen, c)
			if len(seen) == tailBatch {
				t.mu.Lock()
				for _, c := range seen {
					t.apply(c)
				}
				t.mu.Unlock()
				seen = seen[:0]
			}
		})
		if err != nil {
			return err
		}
		t.mu.Lock()
		for _, c := range seen {
			t.apply(c)
		}
		t.after = upTo
		t.mu.Unlock()
	}
	for {
		t.mu.Lock()
		after := t.after
		t.mu.Unlock()
		batch, next, err := t.log.OutcomesAfter(ctx, after, tailBatch)
		if err != nil {
			return err
		}
		if next == after {
			break
		}
		t.mu.Lock()
		for _, l := range batch {
			t.apply(l.Case())
		}
		t.after = next
		t.mu.Unlock()
	}
	if time.Since(t.pruned) < pruneEvery {
		return nil
	}
	oldest, err := t.log.Oldest(ctx)
	if err != nil {
		return err
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	t.pruned = time.Now()
	if oldest == t.oldest {
		return nil
	}
	t.oldest = oldest
	for id, c := range t.cases {
		if id < oldest {
			t.drop(c)
		}
	}
	return nil
}

// drop takes c out of the statistics and forgets it.
func (t *Tracker) drop(c *tcase) {
	t.remove(c)
	delete(c.s.cases, c.id)
	delete(t.cases, c.id)
}

// syncUncertain reads the log's uncertain windows and, when there are
// new ones, drops the cases counted that they hold: the answers between
// the last canary that confirmed a build and the probe that found it
// changed may be either build's, so neither build's statistics nor its
// refit take them (docs/fingerprints.md, Swap hygiene).
func (t *Tracker) syncUncertain(ctx context.Context) error {
	ws, err := t.log.Uncertain(ctx)
	if err != nil {
		return err
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if len(ws) == len(t.unc) {
		return nil
	}
	t.unc = ws
	for _, c := range t.cases {
		if decisionlog.InUncertain(ws, c.node, c.b.key.model, c.b.key.fingerprint, c.at) {
			t.drop(c)
		}
	}
	return nil
}

// apply counts one outcome: a new labelled case, or the latest outcome
// of one already counted, which replaces its earlier one.
func (t *Tracker) apply(e decisionlog.Case) {
	if e.ID < t.oldest {
		return
	}
	if decisionlog.InUncertain(t.unc, e.Node, e.Model, e.Fingerprint, e.At) {
		return
	}
	key := bucketKey{e.Model, e.Fingerprint, e.Kind, calibration.Bucket(e.Options)}
	c := t.cases[e.ID]
	if c == nil {
		b := t.bucket[key]
		if b == nil {
			b = &tbucket{key: key, options: e.Options, slots: map[int64]*tslot{}, cal: calibration.Identity(), calKey: calibration.Identity().String()}
			b.sets, b.since = make([]calibration.Conformal, len(ReportCoverages())), make([]calibration.SetCount, len(ReportCoverages()))
			t.bucket[key] = b
		}
		at := e.At
		si := at / int64(slotWidth)
		s := b.slots[si]
		if s == nil {
			s = &tslot{cases: map[int64]*tcase{}, minAt: at, maxAt: at}
			b.slots[si] = s
		}
		s.minAt, s.maxAt = min(s.minAt, at), max(s.maxAt, at)
		c = &tcase{id: e.ID, at: at, node: e.Node, request: e.RequestID, dist: e.Dist, options: e.Options, b: b, s: s}
		s.cases[e.ID] = c
		t.cases[e.ID] = c
	} else {
		t.remove(c)
	}
	c.expected = e.Expected
	c.mass = math.NaN()
	if e.HasLabelMass && (e.Face == decisionlog.FaceDecide || e.Face == decisionlog.FaceMCP) && !e.NoneOption {
		switch {
		case e.NoOptionFit:
			c.mass, c.massIn = e.LabelMass, false
		case c.expected >= 0:
			c.mass, c.massIn = e.LabelMass, true
		}
	}
	t.add(c)
	c.b.refit.Observe(1)
}

// add counts c in its slot, and in the sets' since counts.
func (t *Tracker) add(c *tcase) {
	if p, ok := c.prediction(); ok {
		c.s.raw.Add(p)
		cp := p
		cp.Dist = c.b.cal.Apply(p.Dist)
		c.s.cal.Add(cp)
		if c.b.setsRev > 0 {
			for i, rule := range c.b.sets {
				if rule.Method != "" { // under the rule's own calibrator, as served
					c.b.since[i].Add(rule.SetOf(p.Dist), p.Expected, 1)
				}
			}
			c.setsRev = c.b.setsRev
		}
	}
	if !math.IsNaN(c.mass) {
		c.s.mass.Add(c.mass, c.massIn)
	}
}

// remove takes c's counts back.
func (t *Tracker) remove(c *tcase) {
	if p, ok := c.prediction(); ok {
		c.s.raw.Remove(p)
		cp := p
		cp.Dist = c.b.cal.Apply(p.Dist)
		c.s.cal.Remove(cp)
		if c.setsRev > 0 && c.setsRev == c.b.setsRev {
			for i, rule := range c.b.sets {
				if rule.Method != "" {
					c.b.since[i].Add(rule.SetOf(p.Dist), p.Expected, -1)
				}
			}
		}
		c.setsRev = 0
	}
	if !math.IsNaN(c.mass) {
		c.s.mass.Remove(c.mass, c.massIn)
	}
}

// follow brings b's calibrated statistics and sets to the fit fits hold
// for it: the calibrated statistics are made again from the cases when
// the calibrator changed, and the sets' counts start again when the sets
// changed.
func (t *Tracker) follow(b *tbucket, fits *calibration.Fits) {
	cal := calibration.Identity()
	ft, ok, _ := fits.LookupServed("", b.key.model, b.key.fingerprint, b.key.kind, b.options)
	if ok {
		cal = ft.Calibrator()
	}
	if k := cal.String(); k != b.calKey {
		b.cal, b.calKey = cal, k
		for _, s := range b.slots {
			s.cal = fitting.Stats{}
			for _, c := range s.cases {
				if p, ok := c.prediction(); ok {
					p.Dist = cal.Apply(p.Dist)
					s.cal.Add(p)
				}
			}
		}
	}
	sets := make([]calibration.Conformal, len(ReportCoverages()))
	for i, cov := range ReportCoverages() {
		if ok {
			sets[i], _ = ft.SetFor(cov) // a missing one is Method ""
		}
	}
	if k := setsKey(sets); k != b.setsKey {
		b.sets, b.setsKey = sets, k
		b.setsRev++
		b.since = make([]calibration.SetCount, len(sets))
	}
}

// Prepare brings every bucket to fits: what a report or the gauge would
// otherwise do on its first read after a refit.
func (t *Tracker) Prepare(fits *calibration.Fits) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, b := range t.bucket {
		t.follow(b, fits)
	}
}

// window is what a report reads of one bucket: its statistics over the
// cases whose decision time is in [since, until].
type window struct {
	raw, cal fitting.Stats
	mass     fitting.MassStats
}

func (b *tbucket) window(since, until int64) window {
	var w window
	for _, s := range b.slots {
		if s.maxAt < since || s.minAt > until {
			continue
		}
		if s.minAt >= since && s.maxAt <= until {
			_ = w.raw.Merge(s.raw) // Stats of Add's shape always merge
			_ = w.cal.Merge(s.cal)
			w.mass.Merge(s.mass)
			continue
		}
		for _, c := range s.cases {
			if c.at < since || c.at > until {
				continue
			}
			if p, ok := c.prediction(); ok {
				w.raw.Add(p)
				p.Dist = b.cal.Apply(p.Dist)
				w.cal.Add(p)
			}
			if !math.IsNaN(c.mass) {
				w.mass.Add(c.mass, c.massIn)
			}
		}
	}
	return w
}

// sorted is the buckets by model, then kind and bucket in
// calibration.CompareGroups' order.
func (t *Tracker) sorted() []*tbucket {
	out := slices.Collect(maps.Values(t.bucket))
	slices.SortFunc(out, func(a, b *tbucket) int {
		return cmp.Or(strings.Compare(a.key.model, b.key.model), strings.Compare(a.key.fingerprint, b.key.fingerprint),
			calibration.CompareGroups(a.key.kind, a.key.bucket, b.key.kind, b.key.bucket))
	})
	return out
}

// bucketCases are one bucket's cases for a refit, with what the bucket's
// refit state said when they were taken.
type bucketCases struct {
	key     bucketKey
	options int // an option count of the bucket, to look its fit up by
	preds   []calibration.Prediction
	state   fitting.RefitState
}

// due takes the cases of every bucket that has at least minOutcomes
// outcomes new since its last refit, from decision time since on.
func (t *Tracker) due(minOutcomes int, since time.Time) []bucketCases {
	t.mu.Lock()
	defer t.mu.Unlock()
	from := since.UnixNano()
	var out []bucketCases
	for _, b := range t.sorted() {
		if !b.refit.Due(minOutcomes) {
			continue
		}
		bc := bucketCases{key: b.key, options: b.options, state: b.refit}
		for _, s := range b.slots {
			if s.maxAt < from {
				continue
			}
			for _, c := range s.cases {
				if p, ok := c.prediction(); ok && c.at >= from {
					bc.preds = append(bc.preds, p)
				}
			}
		}
		out = append(out, bc)
	}
	return out
}

// refitted records a refit of key over the outcomes seen when its cases
// were taken.
func (t *Tracker) refitted(key bucketKey, outcomes int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if b := t.bucket[key]; b != nil {
		b.refit.AtLastRefit = max(b.refit.AtLastRefit, outcomes)
	}
}
