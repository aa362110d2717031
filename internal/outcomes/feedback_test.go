package outcomes

import (
	"context"
	"database/sql"
	"encoding/json"
	"path/filepath"
	"strconv"
	"testing"

	"system1/internal/decision"
	"system1/internal/decisionlog"
	"system1/internal/testengine"
)

// A feedback batch is one transaction: when the store fails on one of its
// outcomes (a trigger refuses the sixth), none of the batch is recorded,
// the result is log_error with nothing in Recorded, and the same batch sent
// again once the store works is recorded whole, each outcome the first of
// its question.
func TestFeedbackBatchWriteFailsRecordsNone(t *testing.T) {
	for _, b := range []struct {
		name string
		open func(t *testing.T) (decisionlog.Options, *sql.DB)
		fail []string // SQL that makes inserting req-5's outcome fail
		heal string
	}{
		{"sqlite", func(t *testing.T) (decisionlog.Options, *sql.DB) {
			path := filepath.Join(t.TempDir(), "decisions.db")
			return decisionlog.Options{Path: path}, nil
		}, []string{`CREATE TRIGGER fail_req5 BEFORE INSERT ON outcomes WHEN NEW.request_id = 'req-5' BEGIN SELECT RAISE(ABORT, 'the disk is full'); END`},
			`DROP TRIGGER fail_req5`},
		{"postgres", func(t *testing.T) (decisionlog.Options, *sql.DB) {
			u := testengine.PostgresSchema(t, "fb_")
			db, err := sql.Open("pgx", u)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { db.Close() })
			return decisionlog.Options{URL: u}, db
		}, []string{
			`CREATE FUNCTION fail_req5() RETURNS trigger AS $$ BEGIN IF NEW.request_id = 'req-5' THEN RAISE EXCEPTION 'the disk is full'; END IF; RETURN NEW; END $$ LANGUAGE plpgsql`,
			`CREATE TRIGGER fail_req5 BEFORE INSERT ON outcomes FOR EACH ROW EXECUTE FUNCTION fail_req5()`,
		}, `DROP TRIGGER fail_req5 ON outcomes`},
	} {
		t.Run(b.name, func(t *testing.T) {
			ctx := context.Background()
			opt, db := b.open(t)
			opt.Linger = -1
			l, err := decisionlog.Open(ctx, opt)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = l.Close(context.Background()) })
			if db == nil { // SQLite: a second connection to the log's file
				if db, err = sql.Open("sqlite", "file:"+opt.Path+"?_pragma=busy_timeout(10000)"); err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { db.Close() })
			}
			var items []FeedbackItem
			for i := range 10 {
				req := "req-" + strconv.Itoa(i)
				l.Record(decisionlog.Record{RequestID: req, QuestionID: "q", Face: decisionlog.FaceSystemOne, Model: "m", Node: "n",
					Kind: decision.Choice, Options: []string{"a", "b"}, EngineDist: []float64{0.6, 0.4}})
				items = append(items, FeedbackItem{RequestID: req, Question: "q", Outcome: json.RawMessage(`"b"`), batched: true})
			}
			if err := l.Flush(ctx); err != nil {
				t.Fatal(err)
			}
			for _, q := range b.fail {
				if _, err := db.ExecContext(ctx, q); err != nil {
					t.Fatal(err)
				}
			}
			fb := NewFeedback(l)
			res := fb.Record(ctx, items)
			if res.Error == nil || res.Error.Code != FeedbackLogError || len(res.Recorded) != 0 {
				t.Fatalf("a failed write: %+v %+v, want log_error and nothing recorded", res.Error, res.Recorded)
			}
			var n int
			if err := db.QueryRowContext(ctx, "SELECT COUNT(*) FROM outcomes").Scan(&n); err != nil {
				t.Fatal(err)
			}
			if n != 0 {
				t.Errorf("%d outcomes of the failed batch recorded, want none", n)
			}
			if _, err := db.ExecContext(ctx, b.heal); err != nil {
				t.Fatal(err)
			}
			res = fb.Record(ctx, items)
			if res.Error != nil || len(res.Recorded) != len(items) {
				t.Fatalf("sent again: %+v, %d recorded", res.Error, len(res.Recorded))
			}
			for i, r := range res.Recorded {
				if r.RequestID != items[i].RequestID || r.Outcome != "b" || r.Outcomes != 1 {
					t.Errorf("recorded %d: %+v", i, r)
				}
			}
			if err := db.QueryRowContext(ctx, "SELECT COUNT(*) FROM outcomes").Scan(&n); err != nil || n != len(items) {
				t.Errorf("%d outcomes recorded (%v), want %d", n, err, len(items))
			}
		})
	}
}

// Feedback under a request id that holds a NUL is an unknown request id
// (a 404 naming request_id) on either store, as nothing can be recorded
// under it on PostgreSQL, where the lookup's error made it log_error (a
// 503 saying the log failed).
func TestFeedbackOnANULRequestIDIsUnknown(t *testing.T) {
	for _, b := range []struct {
		name string
		opt  func(t *testing.T) decisionlog.Options
	}{
		{"sqlite", func(t *testing.T) decisionlog.Options {
			return decisionlog.Options{Path: filepath.Join(t.TempDir(), "decisions.db")}
		}},
		{"postgres", func(t *testing.T) decisionlog.Options {
			return decisionlog.Options{URL: testengine.PostgresSchema(t, "fb_")}
		}},
	} {
		t.Run(b.name, func(t *testing.T) {
			opt := b.opt(t)
			opt.Linger = -1
			l, err := decisionlog.Open(context.Background(), opt)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = l.Close(context.Background()) })
			items, bad := ParseFeedback([]byte(`{"request_id": "req\u0000x", "outcome": "a"}`))
			if bad != nil {
				t.Fatalf("%+v", bad.Error)
			}
			res := NewFeedback(l).Record(context.Background(), items)
			if res.Error == nil || res.Error.Code != FeedbackUnknownRequest || res.Error.Param != "request_id" {
				t.Errorf("feedback on req\\x00x: %+v; want unknown_request naming request_id", res.Error)
			}
		})
	}
}

// Feedback naming an option whose key holds a NUL is answered alike on
// either store: SQLite records it; PostgreSQL, whose text cannot hold a
// NUL, refuses it naming the outcome (a 422), where the insert's error
// made it log_error (a 503 telling the caller to send the batch again,
// which never succeeds).
func TestFeedbackOnANULOptionNamesTheOutcome(t *testing.T) {
	for _, b := range []struct {
		name   string
		opt    func(t *testing.T) decisionlog.Options
		stores bool
	}{
		{"sqlite", func(t *testing.T) decisionlog.Options {
			return decisionlog.Options{Path: filepath.Join(t.TempDir(), "decisions.db")}
		}, true},
		{"postgres", func(t *testing.T) decisionlog.Options {
			return decisionlog.Options{URL: testengine.PostgresSchema(t, "fb_")}
		}, false},
	} {
		t.Run(b.name, func(t *testing.T) {
			ctx := context.Background()
			opt := b.opt(t)
			opt.Linger = -1
			l, err := decisionlog.Open(ctx, opt)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = l.Close(context.Background()) })
			l.Record(decisionlog.Record{RequestID: "req-nul", QuestionID: "q", Model: "m", Node: "n", Kind: decision.Choice,
				Options: []string{"a\x00b", "c"}, EngineDist: []float64{0.6, 0.4}, Final: []float64{0.6, 0.4}})
			if err := l.Flush(ctx); err != nil {
				t.Fatal(err)
			}
			for _, body := range []string{
				`{"request_id": "req-nul", "outcome": "a\u0000b"}`,
				`{"outcomes": [{"request_id": "req-nul", "outcome": "c"}, {"request_id": "req-nul", "outcome": "a\u0000b"}]}`,
			} {
				items, bad := ParseFeedback([]byte(body))
				if bad != nil {
					t.Fatalf("%+v", bad.Error)
				}
				res := NewFeedback(l).Record(ctx, items)
				param := "outcome"
				if len(items) > 1 {
					param = "outcomes.1.outcome"
				}
				switch {
				case b.stores && res.Error != nil:
					t.Errorf("%s: %+v; want it recorded", body, res.Error)
				case !b.stores && (res.Error == nil || res.Error.Code != FeedbackInvalid || res.Error.Param != param):
					t.Errorf("%s: %+v; want invalid_request naming %s", body, res.Error, param)
				}
			}
		})
	}
}
