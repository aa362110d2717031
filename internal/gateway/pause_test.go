package gateway

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"system1/internal/fakeengine"
	"system1/internal/pause"
)

// An unreadable pause state fails closed: decide abstains without asking
// the provider, health is paused and says how to repair the file, and
// capabilities say paused; a rewritten file turns it back on.
func TestUnreadableStateFailsClosed(t *testing.T) {
	ep := fakeengine.StartSystemOne(t, fakeengine.Reply{})
	g := gatewayFor(t, fmt.Sprintf("providers:\n  - {name: jev, kind: systemone, url: %s, model: jev-latest}\n", ep.URL))
	path := g.opt.StatePath
	if _, err := pause.Write(path, true, time.Now()); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(`{"paused":tru`), 0o644); err != nil {
		t.Fatal(err)
	}
	res := decide(t, g, `{"question":"Ship it?"}`)
	if res.Status != Abstained || ep.Calls.Load() != 0 || !strings.Contains(res.Rationale, filepath.Base(path)) || !strings.Contains(res.Rationale, "toggle on") {
		t.Errorf("decide: %+v (provider asked %d times)", res, ep.Calls.Load())
	}
	h := g.Health(context.Background())
	if h.Status != HealthPaused || !h.Paused || !strings.Contains(h.Summary, "unreadable") || !strings.Contains(h.Summary, "system1 toggle on") {
		t.Errorf("health: %+v", h)
	}
	if c := g.Capabilities(context.Background()); !c.Paused {
		t.Error("capabilities: not paused")
	}
	if _, err := pause.Write(path, false, time.Now()); err != nil {
		t.Fatal(err)
	}
	if res := decide(t, g, `{"question":"Ship it?"}`); res.Status != Decided {
		t.Errorf("after the repair: %+v", res)
	}
}
