package outcomes

import (
	"cmp"
	"context"
	"slices"
	"sync"
	"time"

	"system1/internal/calibration"
	"system1/internal/calibration/fitting"
	"system1/internal/decision"
	"system1/internal/decisionlog"
)

// Defaults of the label-free drift report.
const (
	// DefaultDriftWindow is the current window: the answers of the last
	// hour.
	DefaultDriftWindow = time.Hour
	// DefaultDriftReference is the reference window, just before the
	// current one.
	DefaultDriftReference = 24 * time.Hour
)

// DriftOptions are the windows a drift report compares and its alarm;
// zero values are the defaults.
type DriftOptions struct {
	// Window is the current window, ending at the report's end;
	// Reference the window just before it.
	Window, Reference time.Duration
	// Threshold is fitting.MeasureDrift's.
	Threshold float64
}

func (o DriftOptions) withDefaults() DriftOptions {
	if o.Window <= 0 {
		o.Window = DefaultDriftWindow
	}
	if o.Reference <= 0 {
		o.Reference = DefaultDriftReference
	}
	if !(o.Threshold > 0) {
		o.Threshold = fitting.DefaultDriftThreshold
	}
	return o
}

// SignatureDrift is one model and question signature's drift: how its
// answers in the current window compare with the reference window,
// without any outcome (fitting.MeasureDrift).
type SignatureDrift struct {
	Model     string        `json:"model"`
	Signature string        `json:"signature"`
	Kind      decision.Kind `json:"kind"`
	Options   []string      `json:"options"`
	// PSI is the larger of the two statistics.
	PSI float64 `json:"psi"`
	fitting.Drift
}

// driftSlotWidth is the span of decision time whose answers a drift
// slot counts together. A report adds up the slots inside its windows
// and reads again the records of the (at most three) its edges cut, so
// its windows are exact to the nanosecond, as they were when it read
// every record (docs/shadow.md, "drift").
const driftSlotWidth = time.Minute

// driftGrace is how long a record id under the last one read may still
// come: on PostgreSQL a process's insert may commit after another's of a
// larger id. An id still missing after it is taken never to come (its
// transaction rolled back).
const driftGrace = time.Minute

// driftSlack is how far under the last id its first read saw the drift
// state looks again for records committed during that read, for
// driftGrace.
const driftSlack = 10000

// driftBatch is the most records one read of the log's tail takes.
const driftBatch = 10000

// driftKey is one model and question signature.
type driftKey struct{ model, sig string }

// driftCell is one signature's answers in a slot.
type driftCell struct {
	kind    decision.Kind
	options []string
	hist    fitting.DriftHistogram
}

// driftSlot is the answers of one slot of decision time.
type driftSlot struct {
	minID, maxID int64 // of the answers counted
	cells        map[driftKey]*driftCell
}

// idMark is the last record id read at a time.
type idMark struct {
	at time.Time
	id int64
}

// drift keeps the histograms the label-free drift report compares, per
// slot of decision time, model and signature: built by one read of the
// records of both windows, then kept up to date by reading, by id, the
// records written since, by this process or any other sharing the log,
// each once; slots older than the reference window leave. A report adds
// up slots instead of reading every record of both windows. Shadow
// answers are not served ones and are left out; a signature seen in one
// window only is reported with zero answers in the other.
type drift struct {
	mu    sync.Mutex
	built bool
	from  int64 // the first slot kept
	slots map[int64]*driftSlot
	// low is the id up to which every record was read or is taken never
	// to come; seen are the ids above it read, and marks the last id read
	// by time, for driftGrace.
	low    int64
	seen   map[int64]struct{}
	marks  []idMark
	high   int64 // the last id read
	oldest int64 // the oldest record the log keeps, as last read
	pruned time.Time
}

func slotOf(ns int64) int64 {
	s := ns / int64(driftSlotWidth)
	if ns < 0 && ns%int64(driftSlotWidth) != 0 {
		s--
	}
	return s
}

func slotStart(s int64) time.Time { return time.Unix(0, s*int64(driftSlotWidth)) }

// sigCache is the signatures of the options of one read, by their first
// option's address and kind: the answers of a read share equal options
// (decisionlog.Answer).
type sigCache map[struct {
	first *string
	kind  decision.Kind
}]string

// answerOf is a as drift counts it: its model and signature, and its
// answer; ok is false for a shadow answer, and a distribution that does
// not fit its options.
func answerOf(a decisionlog.Answer, sigs sigCache) (k driftKey, ans fitting.Answer, ok bool) {
	if a.Face == decisionlog.FaceShadow {
		return k, ans, false
	}
	if ans, ok = fitting.AnswerOf(calibration.Prediction{Kind: a.Kind, Dist: a.Dist, Options: len(a.Options)}); !ok {
		return k, ans, false
	}
	if len(a.Options) == 0 {
		return driftKey{a.Model, Signature(a.Kind, a.Options)}, ans, true
	}
	ck := struct {
		first *string
		kind  decision.Kind
	}{&a.Options[0], a.Kind}
	sig, found := sigs[ck]
	if !found {
		sig = Signature(a.Kind, a.Options)
		sigs[ck] = sig
	}
	return driftKey{a.Model, sig}, ans, true
}

// add counts a in its slot, when it is counted (answerOf) and of a slot
// kept.
func (d *drift) add(a decisionlog.Answer, sigs sigCache) {
	si := slotOf(a.At)
	if si < d.from {
		return
	}
	k, ans, ok := answerOf(a, sigs)
	if !ok {
		return
	}
	s := d.slots[si]
	if s == nil {
		s = &driftSlot{minID: a.ID, maxID: a.ID, cells: map[driftKey]*driftCell{}}
		d.slots[si] = s
	}
	s.minID, s.maxID = min(s.minID, a.ID), max(s.maxID, a.ID)
	c := s.cells[k]
	if c == nil {
		c = &driftCell{kind: a.Kind, options: a.Options}
		s.cells[k] = c
	}
	c.hist.Add(ans)
}

// driftLeeway is how many minutes before the oldest a report asked for
// the slots are kept: a report made at about the same time as the last,
// but a minute earlier, reads none again.
const driftLeeway = 5

// sync brings the histograms up to date, keeping the slots from from on
// (and driftLeeway before): all of them read again when one before those
// kept is asked for.
func (d *drift) sync(ctx context.Context, log *decisionlog.Log, from int64) error {
	if !d.built || from < d.from {
		if err := d.build(ctx, log, from-driftLeeway); err != nil {
			return err
		}
	}
	if keep := from - driftLeeway; keep > d.from {
		for s := range d.slots {
			if s < keep {
				delete(d.slots, s)
			}
		}
		d.from = keep
	}
	sigs := sigCache{}
	for after := d.low; ; {
		last, n, err := log.AnswersAfter(ctx, after, driftBatch, func(a decisionlog.Answer) {
			if _, ok := d.seen[a.ID]; ok {
				return
			}
			d.high = max(d.high, a.ID)
			d.add(a, sigs)
			// The next id moves low at once (advance's last step): seen
			// holds only the ids read out of order, not each of a
			// minute's records until the read ends (issue 34: a map
			// grown to a minute's ids never shrinks).
			if a.ID == d.low+1 {
				d.low++
			} else {
				d.seen[a.ID] = struct{}{}
			}
		})
		if err != nil {
			return err
		}
		if n < driftBatch {
			break
		}
		after = last
	}
	now := time.Now()
	d.marks = append(d.marks, idMark{now, d.high})
	d.advance(now)
	return d.prune(ctx, log)
}

// build reads the records of the slots from from on afresh.
func (d *drift) build(ctx context.Context, log *decisionlog.Log, from int64) error {
	d.built, d.from, d.high = false, from, 0
	d.slots, d.seen = map[int64]*driftSlot{}, map[int64]struct{}{}
	sigs := sigCache{}
	var ids []int64
	err := log.EachAnswer(ctx, slotStart(from), time.Now().Add(driftSlotWidth), func(a decisionlog.Answer) {
		ids = append(ids, a.ID)
		d.high = max(d.high, a.ID)
		d.add(a, sigs)
		// Only the ids above the last one's driftSlack are kept below;
		// those under the highest so far never will be, so they go
		// instead of a whole window's ids staying until the read ends.
		if len(ids) >= 2*driftSlack {
			ids = slices.DeleteFunc(ids, func(id int64) bool { return id <= d.high-driftSlack })
		}
	})
	if err != nil {
		return err
	}
	// Records committed during the read under the last id it saw, and
	// those of decision times outside it, are read by id from low on.
	d.low = max(d.high-driftSlack, 0)
	for _, id := range ids {
		if id > d.low {
			d.seen[id] = struct{}{}
		}
	}
	d.marks = []idMark{{time.Now(), d.high}}
	d.built = true
	return nil
}

// advance moves low past the ids read in a row above it, and past those
// that were under the last id read driftGrace ago.
func (d *drift) advance(now time.Time) {
	low := d.low
	keep := d.marks[:0]
	for _, m := range d.marks {
		if now.Sub(m.at) >= driftGrace {
			low = max(low, m.id)
		} else {
			keep = append(keep, m)
		}
	}
	d.marks = keep
	if low > d.low {
		for id := range d.seen {
			if id <= low {
				delete(d.seen, id)
			}
		}
		d.low = low
	}
	for {
		if _, ok := d.seen[d.low+1]; !ok {
			break
		}
		delete(d.seen, d.low+1)
		d.low++
	}
	if len(d.seen) == 0 {
		d.seen = map[int64]struct{}{} // a map keeps the size it grew to
	}
}

// prune drops, once every pruneEvery, the answers of the records the log
// has pruned: the slots wholly under its oldest record, and the answers
// of a slot it cuts, which is read again.
func (d *drift) prune(ctx context.Context, log *decisionlog.Log) error {
	if time.Since(d.pruned) < pruneEvery {
		return nil
	}
	oldest, err := log.Oldest(ctx)
	if err != nil {
		return err
	}
	d.pruned = time.Now()
	if oldest == d.oldest {
		return nil
	}
	d.oldest = oldest
	sigs := sigCache{}
	for si, s := range d.slots {
		switch {
		case s.maxID < oldest:
			delete(d.slots, si)
		case s.minID < oldest:
			delete(d.slots, si)
			err := log.EachAnswer(ctx, slotStart(si), slotStart(si+1), func(a decisionlog.Answer) {
				_, seen := d.seen[a.ID]
				if a.ID >= oldest && (a.ID <= d.low || seen) {
					d.add(a, sigs)
				}
			})
			if err != nil {
				return err
			}
		}
	}
	return nil
}

// report compares, per model and signature, the slots of the window
// ending at until with those of the reference window before it.
func (d *drift) report(ctx context.Context, log *decisionlog.Log, until time.Time, opt DriftOptions) ([]SignatureDrift, error) {
	opt = opt.withDefaults()
	cut := until.Add(-opt.Window)
	first, mid, last := slotOf(cut.Add(-opt.Reference).UnixNano()), slotOf(cut.UnixNano()), slotOf(until.UnixNano())
	d.mu.Lock()
	defer d.mu.Unlock()
	if err := d.sync(ctx, log, first); err != nil {
		return nil, err
	}
	type sides struct {
		kind     decision.Kind
		options  []string
		ref, cur fitting.DriftHistogram
	}
	by := map[driftKey]*sides{}
	side := func(k driftKey, kind decision.Kind, options []string) *sides {
		sd := by[k]
		if sd == nil {
			sd = &sides{kind: kind, options: options}
			by[k] = sd
		}
		return sd
	}
	// The minutes inside a window add up; those its edges cut (the last
	// always: until is inside it) are read again, their answers counted
	// on their side of the edge.
	startNs, cutNs, untilNs := cut.Add(-opt.Reference).UnixNano(), cut.UnixNano(), until.UnixNano()
	cuts := func(si int64) bool {
		return si == last || si == first && slotStart(si).UnixNano() != startNs || si == mid && slotStart(si).UnixNano() != cutNs
	}
	var in []int64 // in order, so that the sums are the same report to report
	for si := range d.slots {
		if si >= first && si <= last && !cuts(si) {
			in = append(in, si)
		}
	}
	slices.Sort(in)
	for _, si := range in {
		for k, c := range d.slots[si].cells {
			if sd := side(k, c.kind, c.options); si < mid {
				sd.ref.Merge(c.hist)
			} else {
				sd.cur.Merge(c.hist)
			}
		}
	}
	sigs := sigCache{}
	for _, si := range slices.Compact([]int64{first, mid, last}) {
		if !cuts(si) {
			continue
		}
		err := log.EachAnswer(ctx, slotStart(si), slotStart(si+1), func(a decisionlog.Answer) {
			if a.At < startNs || a.At > untilNs {
				return
			}
			k, ans, ok := answerOf(a, sigs)
			if !ok {
				return
			}
			if sd := side(k, a.Kind, a.Options); a.At < cutNs {
				sd.ref.Add(ans)
			} else {
				sd.cur.Add(ans)
			}
		})
		if err != nil {
			return nil, err
		}
	}
	out := make([]SignatureDrift, 0, len(by))
	for k, s := range by {
		m := fitting.MeasureDriftOf(s.ref, s.cur, opt.Threshold)
		out = append(out, SignatureDrift{Model: k.model, Signature: k.sig, Kind: s.kind, Options: s.options, PSI: m.PSI(), Drift: m})
	}
	slices.SortFunc(out, func(a, b SignatureDrift) int {
		return cmp.Or(cmp.Compare(a.Model, b.Model), cmp.Compare(a.Signature, b.Signature))
	})
	return out, nil
}
