package decisionlog

import (
	"strings"
	"testing"
	"time"
)

// Every record keeps the fingerprint of the build that answered it, and
// groups of labelled answers are per build.
func TestRecordsKeepTheFingerprint(t *testing.T) {
	for _, b := range backends(t) {
		t.Run(b.name, func(t *testing.T) {
			l := b.open(t, Options{})
			ctx := ctxT(t)
			at := time.Now()
			for i, fp := range []string{"aaaa", "aaaa", "bbbb", ""} {
				r := sample("r"+string(rune('0'+i)), "q", at)
				r.Fingerprint = fp
				l.Record(r)
			}
			if err := l.Flush(ctx); err != nil {
				t.Fatal(err)
			}
			for i, want := range []string{"aaaa", "aaaa", "bbbb", ""} {
				es, err := l.Lookup(ctx, "r"+string(rune('0'+i)))
				if err != nil || len(es) != 1 || es[0].Fingerprint != want {
					t.Fatalf("r%d: %+v, %v; want fingerprint %q", i, es, err, want)
				}
				if _, err := l.Outcome(ctx, "r"+string(rune('0'+i)), "q", "billing"); err != nil {
					t.Fatal(err)
				}
			}
			gs, err := l.Labelled(ctx, at.Add(-time.Hour), at.Add(time.Hour), "")
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, g := range gs {
				got = append(got, g.Fingerprint+":"+string(rune('0'+len(g.Entries))))
			}
			if strings.Join(got, " ") != "aaaa:2 bbbb:1 :1" {
				t.Fatalf("groups by fingerprint: %v", got)
			}
		})
	}
}

// A SQLite log written before fingerprints, costs and cascades opens: its table
// gains the columns, its rows read as of an unknown build and no cascade,
// and new rows keep theirs.
func TestOldLogGainsTheFingerprintColumn(t *testing.T) {
	path := oldLog(t, ",\n\t\t\tfingerprint TEXT NOT NULL DEFAULT '',\n\t\t\tcost_picousd BIGINT,\n\t\t\tcascade_model TEXT NOT NULL DEFAULT '',\n\t\t\tcascade_stage INTEGER NOT NULL DEFAULT 0",
		`INSERT INTO decisions (request_id, question_id, at_ns, face, model, node, kind, options, engine_dist, steps, final_dist, latency_us, state_sha256)
		VALUES ('old', 'q', ?, 'systemone', 'm1', 'n1', 'choice', '["a","b"]', '[0.6,0.4]', '[]', '[0.6,0.4]', 1, '')`, time.Now().UnixNano())
	for range 2 { // and again, once the column is there
		l := openLog(t, Options{Path: path})
		ctx := ctxT(t)
		r := sample("new", "q", time.Now())
		r.Fingerprint, r.Cascade, r.Stage = "cccc", "casc", 1
		l.Record(r)
		es, err := l.Lookup(ctx, "old")
		if err != nil || len(es) != 1 || es[0].Fingerprint != "" || es[0].Cascade != "" || es[0].Stage != 0 {
			t.Fatalf("the old row: %+v, %v", es, err)
		}
		if es, err = l.Lookup(ctx, "new"); err != nil || len(es) == 0 || es[0].Fingerprint != "cccc" || es[0].Cascade != "casc" || es[0].Stage != 1 {
			t.Fatalf("a new row: %+v, %v", es, err)
		}
		if err := l.Close(ctx); err != nil {
			t.Fatal(err)
		}
	}
}
