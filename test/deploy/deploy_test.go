// Package deploy tests the container image's build and the compose file,
// as far as they can be tested without a container engine.
package deploy

import (
	"debug/elf"
	"encoding/json"
	"net/url"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"

	"system1/internal/config"
	"system1/internal/pause"
)

// The Dockerfile builds with scripts/build-static.sh onto an empty image,
// and that script yields a statically linked binary: no program
// interpreter (PT_INTERP), no shared library needed (DT_NEEDED).
func TestStaticBinary(t *testing.T) {
	df, err := os.ReadFile("../../Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"RUN scripts/build-static.sh /out/system1", "FROM scratch", "COPY --from=build /out/system1 /system1"} {
		if !strings.Contains(string(df), want) {
			t.Errorf("the Dockerfile does not say %q", want)
		}
	}
	bin := filepath.Join(t.TempDir(), "system1")
	cmd := exec.Command("../../scripts/build-static.sh", bin)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("build-static.sh: %v\n%s", err, out)
	}
	f, err := elf.Open(bin)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			t.Error("the binary names a program interpreter (PT_INTERP): it is dynamically linked")
		}
	}
	libs, err := f.ImportedLibraries()
	if err != nil {
		t.Fatal(err)
	}
	if len(libs) > 0 {
		t.Errorf("the binary needs shared libraries (DT_NEEDED): %v", libs)
	}
	if out, err := exec.Command(bin, "--version").CombinedOutput(); err != nil {
		t.Errorf("the static binary does not run: %v\n%s", err, out)
	}
}

type service struct {
	Image     string            `yaml:"image"`
	Build     map[string]string `yaml:"build"`
	Command   []string          `yaml:"command"`
	Volumes   []string          `yaml:"volumes"`
	Env       []string          `yaml:"environment"`
	Ports     []string          `yaml:"ports"`
	DependsOn dependsOn         `yaml:"depends_on"`
	Health    map[string]any    `yaml:"healthcheck"`
}

// dependsOn is a service's depends_on, in either of compose's forms: a
// list of services, or a map of each to its condition.
type dependsOn map[string]string

func (d *dependsOn) UnmarshalYAML(n *yaml.Node) error {
	*d = dependsOn{}
	if n.Kind == yaml.SequenceNode {
		var names []string
		if err := n.Decode(&names); err != nil {
			return err
		}
		for _, name := range names {
			(*d)[name] = "service_started"
		}
		return nil
	}
	var m map[string]struct {
		Condition string `yaml:"condition"`
	}
	if err := n.Decode(&m); err != nil {
		return err
	}
	for name, c := range m {
		(*d)[name] = c.Condition
	}
	return nil
}

// The compose file runs a gateway pair, built from the Dockerfile and
// reading one configuration that parses, passes its checks, listens
// where the load balancer looks and names the compose file's engine
// services as its nodes; the load balancer spreads over both gateways.
func TestComposeGatewayPair(t *testing.T) {
	b, err := os.ReadFile("../../deploy/compose.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var file struct {
		Name     string             `yaml:"name"`
		Services map[string]service `yaml:"services"`
	}
	// Compose's interpolation, of the variables left unset.
	b = regexp.MustCompile(`\$\{\w+:-([^}]*)\}`).ReplaceAll(b, []byte("$1"))
	dec := yaml.NewDecoder(strings.NewReader(string(b)))
	dec.KnownFields(true)
	if err := dec.Decode(&file); err != nil {
		t.Fatal(err)
	}
	var gateways, engines []string
	for name, s := range file.Services {
		switch {
		case strings.HasPrefix(name, "gateway-"):
			gateways = append(gateways, name)
			if s.Build["context"] != ".." || s.Build["dockerfile"] != "Dockerfile" {
				t.Errorf("%s is not built from the Dockerfile: %v", name, s.Build)
			}
			if !slices.Contains(s.Volumes, "./system1.yaml:/etc/system1/system1.yaml:ro") ||
				!slices.Equal(s.Command, []string{"serve", "--config", "/etc/system1/system1.yaml"}) {
				t.Errorf("%s does not serve deploy/system1.yaml: %v %v", name, s.Volumes, s.Command)
			}
		case strings.HasPrefix(name, "engine-"):
			engines = append(engines, name)
		}
	}
	if len(gateways) != 2 || len(engines) < 2 {
		t.Fatalf("gateways %v, engines %v: want a pair over at least two", gateways, engines)
	}
	if lb := file.Services["lb"]; !slices.Contains(lb.Ports, "3000:3000") {
		t.Errorf("the load balancer publishes %v", lb.Ports)
	}

	cb, err := os.ReadFile("../../deploy/system1.yaml")
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Parse(cb)
	if err != nil {
		t.Fatal(err)
	}
	if errs := cfg.Check(); len(errs) > 0 {
		t.Fatal(errs)
	}
	if cfg.Listen != "0.0.0.0:3000" {
		t.Errorf("the gateways listen on %s, not where the load balancer looks", cfg.Listen)
	}
	var hosts []string
	for _, n := range cfg.Nodes {
		u, err := url.Parse(n.URL)
		if err != nil {
			t.Fatal(err)
		}
		hosts = append(hosts, u.Hostname())
	}
	slices.Sort(hosts)
	slices.Sort(engines)
	if !slices.Equal(hosts, engines) {
		t.Errorf("the configuration's nodes are %v; the engine services %v", hosts, engines)
	}

	// The balancer sends feedback, reports and budgeted keys to either
	// gateway, so both record in one PostgreSQL log: with an SQLite file
	// each, feedback on the other's answer is a 404, and each counts its
	// own half of a key's spend.
	if cfg.DecisionLog.URLEnv == "" {
		t.Errorf("the gateways' decision log is %+v: each would keep an SQLite file of its own", cfg.DecisionLog)
	}
	for _, g := range gateways {
		s := file.Services[g]
		var u *url.URL
		for _, kv := range s.Env {
			if v, ok := strings.CutPrefix(kv, cfg.DecisionLog.URLEnv+"="); ok && cfg.DecisionLog.URLEnv != "" {
				if u, err = url.Parse(v); err != nil {
					t.Fatal(err)
				}
			}
		}
		if u == nil || u.Scheme != "postgres" {
			t.Errorf("%s is not given a postgres:// URL in $%s: %v", g, cfg.DecisionLog.URLEnv, s.Env)
			continue
		}
		pg, ok := file.Services[u.Hostname()]
		if !ok || !strings.HasPrefix(pg.Image, "postgres:") {
			t.Errorf("%s's decision log is at %s, no PostgreSQL service of the file", g, u.Hostname())
			continue
		}
		// serve does not wait for the database: started before it
		// accepts, it would serve without a log.
		if s.DependsOn[u.Hostname()] != "service_healthy" || pg.Health == nil {
			t.Errorf("%s does not wait for %s to be healthy: depends_on %v, healthcheck %v", g, u.Hostname(), s.DependsOn, pg.Health)
		}
	}

	nb, err := os.ReadFile("../../deploy/nginx.conf")
	if err != nil {
		t.Fatal(err)
	}
	var upstream []string
	for _, m := range regexp.MustCompile(`(?m)^\s*server (\S+):3000\b`).FindAllStringSubmatch(string(nb), -1) {
		upstream = append(upstream, m[1])
	}
	slices.Sort(upstream)
	slices.Sort(gateways)
	if !slices.Equal(upstream, gateways) {
		t.Errorf("the load balancer spreads over %v; the gateways are %v", upstream, gateways)
	}
}

// The image runs serve where it can write: the state folder serve keeps
// its SQLite decision log, refitted fits and pause switch in, resolved
// as in the container (the image's USER, HOME=/ as Docker sets it for a
// user with no /etc/passwd entry, the image's ENV and CMD), is in the
// image and owned by that user. On an empty image nothing else is
// writable: serve would exit at start ("mkdir /.local: permission
// denied"), in `docker run` and in each gateway of deploy/compose.yaml.
func TestImageHasAWritableStateFolder(t *testing.T) {
	df, err := os.ReadFile("../../Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(string(df), "\n")
	final := 0
	for i, l := range lines {
		if strings.HasPrefix(l, "FROM ") {
			final = i
		}
	}
	env := map[string]string{"HOME": "/"}
	var user string
	var cmd []string
	owned := map[string]string{} // a COPY's destination: its --chown
	for _, l := range lines[final:] {
		f := strings.Fields(l)
		if len(f) < 2 {
			continue
		}
		switch f[0] {
		case "USER":
			user = f[1]
		case "ENV":
			for _, kv := range f[1:] {
				if k, v, ok := strings.Cut(kv, "="); ok {
					env[k] = v
				}
			}
		case "CMD":
			if err := json.Unmarshal([]byte(strings.TrimPrefix(l, "CMD ")), &cmd); err != nil {
				t.Fatalf("CMD is not in exec form: %v", err)
			}
		case "COPY":
			for _, flag := range f[1:] {
				if chown, ok := strings.CutPrefix(flag, "--chown="); ok {
					owned[path.Clean(f[len(f)-1])] = chown
				}
			}
		}
	}
	if user == "" || len(cmd) == 0 || cmd[0] != "serve" {
		t.Fatalf("the image's USER %q and CMD %q: want a user and serve", user, cmd)
	}
	stateDir := ""
	if i := slices.Index(cmd, "--state-dir"); i >= 0 && i+1 < len(cmd) {
		stateDir = cmd[i+1]
	}
	dir := pause.Dir(stateDir, func(k string) string { return env[k] })
	if got := owned[path.Clean(dir)]; got != user {
		t.Errorf("serve's state folder in the image is %s, which the image does not hold owned by %s (a COPY --chown=%s into it; owned: %v): "+
			"serve, which keeps its decision log, fits and pause switch there, cannot create it and exits at start", dir, user, user, owned)
	}
}
