package e2e

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"system1/internal/fakeengine"
	"system1/internal/outcomes"
	"system1/internal/testbin"
)

// With the decision log on and nothing said of calibration, serve learns
// from outcomes: GET /v1/calibration's loop says refits are on and what
// they wait for (every outcome a bucket needs, before any is reported;
// fewer after), and the fits it would refit start empty in the state
// folder, so nothing changes until outcomes come. calibration: off says
// the loop is off.
func TestLearningLoopIsOnByDefault(t *testing.T) {
	f := fakeEngine(t, fakeengine.Behavior{})
	nodes := "nodes:\n" + engineNode("engine", f.URL, "fake", "")
	loop := func(s *server) outcomes.LoopStatus {
		t.Helper()
		r := do(t, client(), http.MethodGet, s.URL+"/v1/calibration", "", "")
		var rep outcomes.CalibrationReport
		if err := json.Unmarshal(r.Body, &rep); err != nil || r.Status != http.StatusOK || rep.Loop == nil {
			t.Fatalf("GET /v1/calibration: %d %s", r.Status, r.Body)
		}
		return *rep.Loop
	}

	s := startServe(t, nodes, serveOpts{})
	l := loop(s)
	want := outcomes.DefaultMinOutcomes
	if !l.Refits || l.EverySec != 600 || l.WaitingFor != want || l.Outcomes != 0 || !strings.Contains(l.Status, fmt.Sprintf("waiting for %d outcomes", want)) {
		t.Errorf("before any outcome: %+v", l)
	}
	r := do(t, client(), http.MethodPost, s.URL+"/v1/systemone", "", choice("fake", "a ticket"))
	if r.Status != http.StatusOK {
		t.Fatalf("/v1/systemone: %d %s", r.Status, r.Body)
	}
	body := fmt.Sprintf(`{"request_id":%q,"question":"dept","outcome":"billing"}`, r.Header.Get("X-Typesafe-Request-Id"))
	if fb := do(t, client(), http.MethodPost, s.URL+"/v1/feedback", "", body); fb.Status != http.StatusOK {
		t.Fatalf("feedback: %d %s", fb.Status, fb.Body)
	}
	if l = loop(s); !l.Refits || l.Outcomes != 1 || l.WaitingFor != want-1 || !strings.Contains(l.Status, fmt.Sprintf("waiting for %d more outcomes", want-1)) {
		t.Errorf("after one outcome: %+v", l)
	}
	if !strings.Contains(s.log.String(), "calibration on for /v1/systemone") || !strings.Contains(s.log.String(), filepath.Join("system1", "fits.json")) {
		t.Errorf("serve does not say it applies the fits it learns, in the state folder")
	}

	s = startServe(t, nodes+"calibration: off\n", serveOpts{})
	if l = loop(s); l.Refits || !strings.Contains(l.Status, "off") {
		t.Errorf("calibration: off: %+v", l)
	}
}

// A start of the learning loop that cannot write its empty fits file (a
// full disk; here a file size limit of 0 bytes) stops, and leaves no fits
// file behind: the next start, with room again, starts the file and
// serves.
func TestAStartThatCannotWriteTheFitsLeavesNone(t *testing.T) {
	f := fakeEngine(t, fakeengine.Behavior{})
	cfg := filepath.Join(t.TempDir(), "system1.yaml")
	writeFile(t, cfg, withoutCanary("nodes:\n"+engineNode("engine", f.URL, "fake", "")))
	home := t.TempDir() // XDG_STATE_HOME: the state folder is its system1
	cmd := exec.Command("sh", "-c", `ulimit -f 0 && exec "$0" "$@"`, testbin.Binary(t), "serve", "--config", cfg, "--listen", testbin.LoopbackAddr(t))
	cmd.Env = append(env("SYSTEM1_", "XDG_", "CLAUDE_"), "XDG_STATE_HOME="+home)
	code, _, stderr, err := testbin.Run(cmd)
	if err != nil {
		t.Fatal(err)
	}
	if code == 0 || !strings.Contains(stderr, "starting an empty fits file") {
		t.Fatalf("serve with no room for its fits file: exit %d\n%s", code, stderr)
	}
	fits := filepath.Join(home, "system1", "fits.json")
	if data, err := os.ReadFile(fits); err == nil {
		t.Errorf("the failed start left %s holding %q", fits, data)
	}
	s := startServe(t, "nodes:\n"+engineNode("engine", f.URL, "fake", ""), serveOpts{Env: []string{"XDG_STATE_HOME=" + home}})
	if r := do(t, client(), http.MethodPost, s.URL+"/v1/systemone", "", choice("fake", "after the failed start")); r.Status != http.StatusOK {
		t.Fatalf("after the failed start: %d %s", r.Status, r.Body)
	}
}
