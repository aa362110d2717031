// Package deploy tests the container image's build and the compose file,
// as far as they can be tested without a container engine.
package deploy

import (
	"debug/elf"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"

	"system1/internal/config"
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
	DependsOn []string          `yaml:"depends_on"`
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
