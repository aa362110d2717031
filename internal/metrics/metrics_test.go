package metrics

import (
	"io"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

func TestExposition(t *testing.T) {
	m := New()
	m.Request("POST /v1/systemone", "200", "ci", 3*time.Millisecond)
	m.Attempt("local", "tiny", "ok", 2*time.Millisecond)
	m.Attempt("remote", "tiny", "timeout", time.Second)
	m.Failover("tiny")
	m.Cooldown("remote")
	m.WatchNodes(func() []Node {
		return []Node{{Name: "local", Healthy: true, InFlight: 2, Queued: 1, Constraint: "not_constrained"}, {Name: "remote", Constraint: "failed"}, {Name: "bare"},
			{Name: "lists", Listed: true, ListCalls: 3, ListPrompts: 20}}
	})
	w := httptest.NewRecorder()
	m.Handler().ServeHTTP(w, httptest.NewRequest("GET", "/metrics", nil))
	body, _ := io.ReadAll(w.Body)
	for _, want := range []string{
		`system1_requests_total{code="200",key="ci",route="POST /v1/systemone"} 1`,
		`system1_engine_attempts_total{model="tiny",node="remote",outcome="timeout"} 1`,
		`system1_engine_seconds_count{model="tiny",node="local"} 1`,
		`system1_failovers_total{model="tiny"} 1`,
		`system1_cooldowns_total{node="remote"} 1`,
		`system1_node_up{node="local"} 1`,
		`system1_node_up{node="remote"} 0`,
		`system1_node_in_flight{node="local"} 2`,
		`system1_node_queue_depth{node="local"} 1`,
		`system1_node_constraint{node="local",state="not_constrained"} 1`,
		`system1_node_constraint{node="local",state="holds"} 0`,
		`system1_node_constraint{node="remote",state="failed"} 1`,
		`system1_node_constraint{node="remote",state="unprobed"} 0`,
		`system1_node_list_calls_total{node="lists"} 3`,
		`system1_node_list_prompts_total{node="lists"} 20`,
		`go_goroutines `,
		`process_resident_memory_bytes `,
	} {
		if !strings.Contains(string(body), want) {
			t.Errorf("metrics lack %q", want)
		}
	}
	if strings.Contains(string(body), `system1_node_constraint{node="bare"`) {
		t.Error("a node with no constraint state has constraint series")
	}
	if strings.Contains(string(body), `system1_node_list_calls_total{node="local"`) {
		t.Error("a node that sends no prompt lists has their series")
	}
}
