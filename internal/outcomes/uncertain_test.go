package outcomes

import (
	"context"
	"testing"
	"time"
)

// A swap's uncertain window, written to the log after the tracker
// counted its answers, takes them back at the next sync, and keeps them
// out of calibrate --from-log's groups (decisionlog.Log.Labelled) too;
// other nodes' and models' answers stay.
func TestUncertainWindowLeavesTheStatistics(t *testing.T) {
	ctx := context.Background()
	l := openLog(t)
	base := time.Now().Add(-3 * time.Hour)
	cs := banking12Like(100, 3)
	for i := range cs {
		cs[i].at = base.Add(time.Duration(i) * time.Minute)
	}
	record(t, l, "m", cs, inOrder(len(cs)))
	tr := NewTracker(l)
	opt := ReportOptions{Since: base.Add(-time.Hour), Until: time.Now()}
	rep, err := tr.Report(ctx, nil, opt)
	if err != nil || len(rep.Buckets) != 1 || rep.Buckets[0].Outcomes != 100 {
		t.Fatalf("before the window: %+v %v", rep.Buckets, err)
	}
	for _, w := range []struct {
		node, model string
	}{{"other", "m"}, {"n", "other"}, {"n", "m"}} {
		if err := l.RecordUncertain(ctx, w.node, w.model, base.Add(20*time.Minute), base.Add(39*time.Minute+30*time.Second), "was", "now"); err != nil {
			t.Fatal(err)
		}
	}
	rep, err = tr.Report(ctx, nil, opt)
	if err != nil || rep.Buckets[0].Outcomes != 80 || tr.Cases() != 80 {
		t.Fatalf("after the window: %d outcomes, %d cases, %v", rep.Buckets[0].Outcomes, tr.Cases(), err)
	}
	groups, err := l.Labelled(ctx, opt.Since, opt.Until, "")
	if err != nil || len(groups) != 1 || len(groups[0].Entries) != 80 {
		t.Fatalf("calibrate --from-log's groups: %+v %v", groups, err)
	}
	// A new tracker, reading the log first, never counts them.
	if rep, err := NewTracker(l).Report(ctx, nil, opt); err != nil || rep.Buckets[0].Outcomes != 80 {
		t.Fatalf("a new tracker: %+v %v", rep.Buckets, err)
	}
}
