package e2e

import (
	"database/sql"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"

	_ "github.com/jackc/pgx/v5/stdlib"

	"system1/internal/fakeengine"
	"system1/internal/testengine"
)

// Two system1 serve replicas write one PostgreSQL decision log, one
// naming its URL in the file (decision_log.url), the other in a variable
// (decision_log.url_env, as the Helm chart fills it from a Secret):
// answers given by either are all recorded, and an outcome for an answer
// of one is accepted by the other.
func TestTwoReplicasShareOnePostgresLog(t *testing.T) {
	pg := testengine.PostgresSchema(t, "e2e_")
	f := fakeengine.New(fakeengine.Options{Dialect: fakeengine.LlamaCpp})
	t.Cleanup(f.Close)
	nodes := fmt.Sprintf("nodes:\n  - {name: n1, url: %s, dialect: llamacpp, models: [%s]}\n", f.URL, fakeengine.DefaultModel)
	var a, b *server
	var wg sync.WaitGroup
	wg.Go(func() { a = startServe(t, nodes+fmt.Sprintf("decision_log:\n  url: %q\n", pg), serveOpts{}) })
	wg.Go(func() {
		b = startServe(t, nodes+"decision_log:\n  url_env: SYSTEM1_DECISION_LOG_URL\n", serveOpts{Env: []string{"SYSTEM1_DECISION_LOG_URL=" + pg}})
	})
	wg.Wait()
	if !strings.Contains(b.log.String(), `at="postgresql (decision_log.url_env: $SYSTEM1_DECISION_LOG_URL)"`) {
		t.Errorf("the replica with url_env did not open the PostgreSQL log:\n%s", b.log.String())
	}
	c := client()
	const each = 50
	ids := make([][]string, 2)
	for r, s := range []*server{a, b} {
		wg.Go(func() {
			for i := range each {
				rep, err := try(c, http.MethodPost, s.URL+"/v1/systemone", "", choice(fakeengine.DefaultModel, fmt.Sprintf("replica %d ticket %d", r, i)))
				if err != nil || rep.Status != http.StatusOK {
					t.Errorf("replica %d: %v %d %s", r, err, rep.Status, rep.Body)
					return
				}
				ids[r] = append(ids[r], rep.Header.Get("X-Typesafe-Request-Id"))
			}
		})
	}
	wg.Wait()
	// Each replica takes feedback on the other's answers.
	for r, s := range []*server{a, b} {
		for _, id := range ids[1-r] {
			rep := do(t, c, http.MethodPost, s.URL+"/v1/feedback", "", `{"request_id":"`+id+`","question":"dept","outcome":"billing"}`)
			if rep.Status != http.StatusOK {
				t.Fatalf("replica %d, feedback on the other's %s: %d %s", r, id, rep.Status, rep.Body)
			}
		}
	}
	db, err := sql.Open("pgx", pg)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var decisions, outcomes int
	if err := db.QueryRow("SELECT count(*) FROM decisions").Scan(&decisions); err != nil {
		t.Fatal(err)
	}
	if err := db.QueryRow("SELECT count(*) FROM outcomes").Scan(&outcomes); err != nil {
		t.Fatal(err)
	}
	if decisions != 2*each || outcomes != 2*each {
		t.Errorf("%d decisions and %d outcomes in the shared log; want %d of each", decisions, outcomes, 2*each)
	}
}
