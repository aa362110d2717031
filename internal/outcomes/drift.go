package outcomes

import (
	"cmp"
	"context"
	"encoding/binary"
	"maps"
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
	// Threshold is fitting.MeasureDriftOf's.
	Threshold float64
}

func (o DriftOptions) withDefaults() DriftOptions {
	o.Window = cmp.Or(max(o.Window, 0), DefaultDriftWindow)
	o.Reference = cmp.Or(max(o.Reference, 0), DefaultDriftReference)
	if !(o.Threshold > 0) {
		o.Threshold = fitting.DefaultDriftThreshold
	}
	return o
}

// SignatureDrift is one model and question signature's drift: how its
// answers in the current window compare with the reference window,
// without any outcome (fitting.MeasureDriftOf).
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

// driftFineWidth is the span of the finer slots the recent minutes keep
// besides: a report's window ends now, inside the last minute, whose
// records it would otherwise read again whole at every report; it reads
// one second of them instead. driftFineMinutes is how many minutes before
// the current one keep them.
const (
	driftFineWidth   = time.Second
	driftFineMinutes = 2
)

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

func (k driftKey) compare(o driftKey) int {
	return cmp.Or(cmp.Compare(k.model, o.model), cmp.Compare(k.sig, o.sig))
}

// driftSignaturesMost bounds the signatures a minute counts: of those
// answered in it, the least by model then signature; the answers of the
// others in that minute are left out of the report, read again or not,
// so that fresh options with each request do not grow the state by a
// histogram a request for a day (docs/shadow.md, "drift").
const driftSignaturesMost = 1000

// driftCell is one signature's answers in a slot.
type driftCell struct {
	kind    decision.Kind
	options []string
	hist    fitting.DriftHistogram
}

type driftCells map[driftKey]*driftCell

func (cs driftCells) add(k driftKey, a decisionlog.Answer, ans fitting.Answer) {
	c := cs[k]
	if c == nil {
		c = &driftCell{kind: a.Kind, options: a.Options}
		cs[k] = c
	}
	c.hist.Add(ans)
}

// driftSlot is the answers of one slot of decision time.
type driftSlot struct {
	minID, maxID int64 // of the answers counted
	cells        driftCells
	// fine are the same answers by driftFineWidth, kept while the slot is
	// recent: nil where it was not when first counted, and once it is no
	// longer (never again then, so that they hold all its answers).
	fine map[int64]driftCells
	// top is the largest key of cells where topOK.
	top   driftKey
	topOK bool
}

// admits says whether the slot counts k's answers: it holds k, or has
// room, or k is under the largest it holds, which it then forgets (that
// key's answers are never counted in the minute again: it is no longer
// among the least driftSignaturesMost answered in it).
func (s *driftSlot) admits(k driftKey) bool {
	if _, ok := s.cells[k]; ok {
		return true
	}
	if len(s.cells) < driftSignaturesMost {
		s.topOK = false
		return true
	}
	if !s.topOK {
		s.top = slices.MaxFunc(slices.Collect(maps.Keys(s.cells)), driftKey.compare)
		s.topOK = true
	}
	if k.compare(s.top) > 0 {
		return false
	}
	delete(s.cells, s.top)
	for fi, cs := range s.fine {
		if delete(cs, s.top); len(cs) == 0 {
			delete(s.fine, fi)
		}
	}
	s.topOK = false
	return true
}

// counts says whether the answers of k in the slot si are counted, for
// a record read again; d.mu is held.
func (d *drift) counts(si int64, k driftKey) bool {
	s := d.slots[si]
	if s == nil {
		return true
	}
	_, ok := s.cells[k]
	return ok || len(s.cells) < driftSignaturesMost
}

// idMark is the last record id read at a time.
type idMark struct {
	at time.Time
	id int64
}

// drift keeps the histograms the label-free drift report compares, per
// slot of decision time, model and signature: built by one read of the
// records of both windows, then kept up to date as this process's writer
// commits its records (decisionlog.Log.Follow, on SQLite) and by reading,
// by id, the records written since by any other process sharing the log
// (on PostgreSQL, this process's too), each once; slots older than the
// reference window leave. A report adds up slots instead of reading every
// record of both windows. Shadow answers are not served ones and are
// left out; a signature seen in one window only is reported with zero
// answers in the other.
type drift struct {
	// reporting makes one report at a time. mu guards the rest and is
	// never held while the log is read: the log's writer, which a read's
	// flush waits for, takes it to count what it wrote.
	reporting sync.Mutex
	mu        sync.Mutex
	unfollow  func() // stops the log's writer giving feed its answers; nil before
	built     bool
	from      int64 // the first slot kept
	fineFrom  int64 // the first slot that keeps fine slots
	slots     map[int64]*driftSlot
	// low is the id up to which every record was read or is taken never
	// to come; seen are the ids above it read, and marks the last id read
	// by time, for driftGrace.
	low    int64
	seen   map[int64]struct{}
	marks  []idMark
	high   int64 // the last id read
	oldest int64 // the oldest record the log keeps, as last read
	pruned time.Time
	sigs   sigCache // of the answers counted
}

// floorDiv is the slot of width w of ns, rounded down.
func floorDiv(ns int64, w time.Duration) int64 {
	s := ns / int64(w)
	if ns < 0 && ns%int64(w) != 0 {
		s--
	}
	return s
}

func slotOf(ns int64) int64 { return floorDiv(ns, driftSlotWidth) }

func slotStart(s int64) time.Time { return time.Unix(0, s*int64(driftSlotWidth)) }

// sigCache is the signatures of option lists, by kind and options: the
// same few of them come again and again. Its buffer makes a look-up
// allocate nothing.
type sigCache struct {
	by  map[string]string
	buf []byte
}

// sigCacheMost bounds a cache: past it, it starts again empty (hostile
// requests may each bring other options).
const sigCacheMost = 4096

func (c *sigCache) signature(kind decision.Kind, options []string) string {
	b := append(c.buf[:0], kind...)
	for _, o := range options {
		b = binary.AppendUvarint(b, uint64(len(o)))
		b = append(b, o...)
	}
	c.buf = b
	if sig, ok := c.by[string(b)]; ok {
		return sig
	}
	if c.by == nil || len(c.by) >= sigCacheMost {
		c.by = map[string]string{}
	}
	sig := Signature(kind, options)
	c.by[string(b)] = sig
	return sig
}

// answerOf is a as drift counts it: its model and signature, and its
// answer; ok is false for a shadow answer, and a distribution that does
// not fit its options.
func answerOf(a decisionlog.Answer, sigs *sigCache) (k driftKey, ans fitting.Answer, ok bool) {
	if a.Face == decisionlog.FaceShadow {
		return k, ans, false
	}
	if ans, ok = fitting.AnswerOf(calibration.Prediction{Kind: a.Kind, Dist: a.Dist, Options: len(a.Options)}); !ok {
		return k, ans, false
	}
	return driftKey{a.Model, sigs.signature(a.Kind, a.Options)}, ans, true
}

// add counts a in its slot, when it is counted (answerOf) and of a slot
// kept. d.mu is held.
func (d *drift) add(a decisionlog.Answer) {
	si := slotOf(a.At)
	if si < d.from {
		return
	}
	k, ans, ok := answerOf(a, &d.sigs)
	if !ok {
		return
	}
	s := d.slots[si]
	if s == nil {
		s = &driftSlot{minID: a.ID, maxID: a.ID, cells: driftCells{}}
		if si >= d.fineFrom {
			s.fine = map[int64]driftCells{}
		}
		d.slots[si] = s
	}
	s.minID, s.maxID = min(s.minID, a.ID), max(s.maxID, a.ID)
	if !s.admits(k) {
		return
	}
	s.cells.add(k, a, ans)
	if s.fine != nil {
		fi := floorDiv(a.At, driftFineWidth)
		cs := s.fine[fi]
		if cs == nil {
			cs = driftCells{}
			s.fine[fi] = cs
		}
		cs.add(k, a, ans)
	}
}

// take counts a unless its record was counted before (by id). d.mu is
// held.
func (d *drift) take(a decisionlog.Answer) {
	if a.ID <= d.low {
		return
	}
	if _, ok := d.seen[a.ID]; ok {
		return
	}
	d.high = max(d.high, a.ID)
	d.add(a)
	// The next id moves low at once, and the ids in a row after it:
	// seen holds only the ids counted out of order, not each of a
	// minute's records (issue 34: a map grown to a minute's ids never
	// shrinks).
	if a.ID != d.low+1 {
		d.seen[a.ID] = struct{}{}
		return
	}
	d.low++
	d.climb()
}

// climb moves low past the ids seen in a row above it. d.mu is held.
func (d *drift) climb() {
	for {
		if _, ok := d.seen[d.low+1]; !ok {
			return
		}
		delete(d.seen, d.low+1)
		d.low++
	}
}

// feed counts the answers this process's writer committed (Log.Follow),
// once the histograms are built; before, and while they are built
// again, the records are read by id after it.
func (d *drift) feed(as []decisionlog.Answer) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if !d.built {
		return
	}
	d.fineFrom = slotOf(time.Now().UnixNano()) - driftFineMinutes
	for _, a := range as {
		d.take(a)
	}
}

// close stops feed being given the writer's answers, for a tracker
// made for one report.
func (d *drift) close() {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.unfollow != nil {
		d.unfollow()
	}
}

// driftLeeway is how many minutes before the oldest a report asked for
// the slots are kept: a report made at about the same time as the last,
// but a minute earlier, reads none again.
const driftLeeway = 5

// sync brings the histograms up to date, keeping the slots from from on
// (and driftLeeway before): all of them read again when one before those
// kept is asked for. d.reporting is held.
func (d *drift) sync(ctx context.Context, log *decisionlog.Log, from int64) error {
	d.mu.Lock()
	if d.unfollow == nil {
		d.unfollow = log.Follow(d.feed)
	}
	rebuild := !d.built || from < d.from
	d.mu.Unlock()
	if rebuild {
		if err := d.build(ctx, log, from-driftLeeway); err != nil {
			return err
		}
	}
	d.mu.Lock()
	if keep := from - driftLeeway; keep > d.from {
		maps.DeleteFunc(d.slots, func(s int64, _ *driftSlot) bool { return s < keep })
		d.from = keep
	}
	d.fineFrom = slotOf(time.Now().UnixNano()) - driftFineMinutes
	for si, s := range d.slots {
		if si < d.fineFrom {
			s.fine = nil
		}
	}
	after := d.low
	d.mu.Unlock()
	// What this process wrote was counted as its writer committed it
	// (on SQLite): what is read here is what other processes wrote.
	for {
		last, n, err := log.AnswersAfter(ctx, after, driftBatch, func(a decisionlog.Answer) {
			d.mu.Lock()
			d.take(a)
			d.mu.Unlock()
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
	d.mu.Lock()
	d.marks = append(d.marks, idMark{now, d.high})
	d.advance(now)
	d.mu.Unlock()
	return d.prune(ctx, log)
}

// build reads the records of the slots from from on afresh. Until it
// ends, the writer's answers are not counted (feed): they are read by id
// after it.
func (d *drift) build(ctx context.Context, log *decisionlog.Log, from int64) error {
	d.mu.Lock()
	d.built, d.from, d.high = false, from, 0
	d.fineFrom = slotOf(time.Now().UnixNano()) - driftFineMinutes
	d.slots, d.seen = map[int64]*driftSlot{}, map[int64]struct{}{}
	d.mu.Unlock()
	var ids []int64
	err := log.EachAnswer(ctx, slotStart(from), time.Now().Add(driftSlotWidth), func(a decisionlog.Answer) {
		d.mu.Lock()
		defer d.mu.Unlock()
		ids = append(ids, a.ID)
		d.high = max(d.high, a.ID)
		d.add(a)
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
	d.mu.Lock()
	defer d.mu.Unlock()
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
// that were under the last id read driftGrace ago. d.mu is held.
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
		maps.DeleteFunc(d.seen, func(id int64, _ struct{}) bool { return id <= low })
		d.low = low
	}
	d.climb()
	if len(d.seen) == 0 {
		d.seen = map[int64]struct{}{} // a map keeps the size it grew to
	}
}

// prune drops, once every pruneEvery, the answers of the records the log
// has pruned: the slots wholly under its oldest record, and the answers
// of a slot it cuts, which is read again. d.reporting is held.
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
	var cut []int64
	d.mu.Lock()
	for si, s := range d.slots {
		switch {
		case s.maxID < oldest:
			delete(d.slots, si)
		case s.minID < oldest:
			delete(d.slots, si)
			cut = append(cut, si)
		}
	}
	d.mu.Unlock()
	for _, si := range cut {
		err := log.EachAnswer(ctx, slotStart(si), slotStart(si+1), func(a decisionlog.Answer) {
			d.mu.Lock()
			defer d.mu.Unlock()
			_, seen := d.seen[a.ID]
			if a.ID >= oldest && (a.ID <= d.low || seen) {
				d.add(a)
			}
		})
		if err != nil {
			return err
		}
	}
	return nil
}

// driftWindows are a report's edges, in nanoseconds: the reference
// window is [start, cut), the current one [cut, until].
type driftWindows struct{ start, cut, until int64 }

// Where a span of decision time falls.
const (
	spanOutside = iota
	spanReference
	spanCurrent
	spanCut // by an edge: its records are read again
)

// side is where the span [from, to) of decision time falls.
func (w driftWindows) side(from, to int64) int {
	switch {
	case to <= w.start || from > w.until:
		return spanOutside
	case from >= w.start && to <= w.cut:
		return spanReference
	case from >= w.cut && to-1 <= w.until:
		return spanCurrent
	}
	return spanCut
}

// report compares, per model and signature, the slots of the window
// ending at until with those of the reference window before it.
func (d *drift) report(ctx context.Context, log *decisionlog.Log, until time.Time, opt DriftOptions) ([]SignatureDrift, error) {
	opt = opt.withDefaults()
	cut := until.Add(-opt.Window)
	first := slotOf(cut.Add(-opt.Reference).UnixNano())
	d.reporting.Lock()
	defer d.reporting.Unlock()
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
	w := driftWindows{cut.Add(-opt.Reference).UnixNano(), cut.UnixNano(), until.UnixNano()}
	merge := func(cs driftCells, where int) {
		for k, c := range cs {
			if sd := side(k, c.kind, c.options); where == spanReference {
				sd.ref.Merge(c.hist)
			} else {
				sd.cur.Merge(c.hist)
			}
		}
	}
	// The minutes inside a window add up; those an edge cuts (the last
	// always: until is inside it) add up by second where they keep them,
	// and the spans an edge still cuts are read again, their answers
	// counted on their side of the edge. In order, so that the sums are
	// the same report to report.
	var reread [][2]int64
	cutMinute := func(si int64) {
		from, to := slotStart(si).UnixNano(), slotStart(si+1).UnixNano()
		s := d.slots[si]
		if s == nil || s.fine == nil {
			reread = append(reread, [2]int64{from, to})
			return
		}
		for _, fi := range slices.Sorted(maps.Keys(s.fine)) {
			f, t := fi*int64(driftFineWidth), (fi+1)*int64(driftFineWidth)
			switch where := w.side(f, t); where {
			case spanReference, spanCurrent:
				merge(s.fine[fi], where)
			case spanCut:
				reread = append(reread, [2]int64{f, t})
			}
		}
		// A second cut without an answer counted is read again too: one
		// may have come since.
		for _, e := range []int64{w.start, w.cut, w.until + 1} {
			if fi := floorDiv(e, driftFineWidth); e > from && e < to && e != fi*int64(driftFineWidth) {
				if _, ok := s.fine[fi]; !ok {
					reread = append(reread, [2]int64{fi * int64(driftFineWidth), (fi + 1) * int64(driftFineWidth)})
				}
			}
		}
	}
	d.mu.Lock()
	for _, si := range slices.Sorted(maps.Keys(d.slots)) {
		if where := w.side(slotStart(si).UnixNano(), slotStart(si+1).UnixNano()); where == spanReference || where == spanCurrent {
			merge(d.slots[si].cells, where)
		}
	}
	// A minute is cut only by an edge inside it: the minutes of the
	// edges, in order, are all that are cut, kept or not.
	var cutMinutes []int64
	for _, e := range []int64{w.start, w.cut, w.until} {
		if si := slotOf(e); w.side(slotStart(si).UnixNano(), slotStart(si+1).UnixNano()) == spanCut && !slices.Contains(cutMinutes, si) {
			cutMinutes = append(cutMinutes, si)
			cutMinute(si)
		}
	}
	d.mu.Unlock()
	sigs := sigCache{}
	for _, span := range reread {
		err := log.EachAnswer(ctx, time.Unix(0, span[0]), time.Unix(0, span[1]), func(a decisionlog.Answer) {
			if a.At < w.start || a.At > w.until {
				return
			}
			k, ans, ok := answerOf(a, &sigs)
			if !ok {
				return
			}
			d.mu.Lock()
			ok = d.counts(slotOf(a.At), k)
			d.mu.Unlock()
			if !ok {
				return
			}
			if sd := side(k, a.Kind, a.Options); a.At < w.cut {
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
