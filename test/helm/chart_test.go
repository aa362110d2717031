package helm

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8syaml "k8s.io/apimachinery/pkg/util/yaml"
	sigsjson "sigs.k8s.io/json"
	"sigs.k8s.io/yaml"
)

// root is the repository, seen from this package's folder.
const root = "../.."

// chart is the chart's folder, from the repository.
const chart = "deploy/helm/system1"

// helm returns the Helm binary that scripts/helm.sh built ($SYSTEM1_HELM).
// Without it the test skips with the reason, unless
// SYSTEM1_REQUIRE_HELM=1, where it fails.
func helm(t *testing.T) string {
	t.Helper()
	bin := os.Getenv("SYSTEM1_HELM")
	missing := ""
	if bin == "" {
		missing = "SYSTEM1_HELM is not set"
	} else if _, err := os.Stat(bin); err != nil {
		missing = err.Error()
	}
	if missing != "" {
		msg := fmt.Sprintf("helm unavailable: %s (build it with scripts/helm.sh and set SYSTEM1_HELM to the path it prints)", missing)
		if os.Getenv("SYSTEM1_REQUIRE_HELM") == "1" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	return bin
}

// runHelm runs helm with args in the repository root, and returns its
// stdout, stderr and error.
func runHelm(t *testing.T, args ...string) (string, string, error) {
	t.Helper()
	cmd := exec.Command(helm(t), args...)
	cmd.Dir = root
	// Helm's own caches and configuration, away from the user's.
	dir := t.TempDir()
	cmd.Env = append(os.Environ(), "HELM_CACHE_HOME="+dir, "HELM_CONFIG_HOME="+dir, "HELM_DATA_HOME="+dir)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	return stdout.String(), stderr.String(), err
}

// valuesFiles are the chart's default values ("") and every example,
// from the repository root.
func valuesFiles(t *testing.T) []string {
	t.Helper()
	examples, err := filepath.Glob(filepath.Join(root, chart, "examples", "*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if len(examples) < 3 {
		t.Fatalf("%d examples in %s/examples, want one per documented topology (3)", len(examples), chart)
	}
	files := []string{""}
	for _, e := range examples {
		rel, err := filepath.Rel(root, e)
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, rel)
	}
	return files
}

// valuesArgs are helm's arguments for a values file ("" is the default).
func valuesArgs(file string, set ...string) []string {
	var args []string
	if file != "" {
		args = append(args, "-f", file)
	}
	for _, s := range set {
		args = append(args, "--set", s)
	}
	return args
}

// release is what helm template rendered, each object decoded into the
// Kubernetes API's own type.
type release struct {
	Deployment     *appsv1.Deployment
	Service        *corev1.Service
	ConfigMap      *corev1.ConfigMap
	ServiceAccount *corev1.ServiceAccount
	PDB            *policyv1.PodDisruptionBudget
	HPA            *autoscalingv2.HorizontalPodAutoscaler
	ServiceMonitor *monitoringv1.ServiceMonitor
	NetworkPolicy  *networkingv1.NetworkPolicy
}

// decoders maps each apiVersion and kind the chart may render to the
// decoding of one into its field of release. Any other is an error.
func (r *release) decoders() map[string]func([]byte) error {
	return map[string]func([]byte) error{
		"apps/v1 Deployment":                      into(&r.Deployment),
		"v1 Service":                              into(&r.Service),
		"v1 ConfigMap":                            into(&r.ConfigMap),
		"v1 ServiceAccount":                       into(&r.ServiceAccount),
		"policy/v1 PodDisruptionBudget":           into(&r.PDB),
		"autoscaling/v2 HorizontalPodAutoscaler":  into(&r.HPA),
		"monitoring.coreos.com/v1 ServiceMonitor": into(&r.ServiceMonitor),
		"networking.k8s.io/v1 NetworkPolicy":      into(&r.NetworkPolicy),
	}
}

// into decodes a JSON object strictly into a new T at *p, as the API
// server's strict field validation does (sigs.k8s.io/json: unknown
// fields, fields in the wrong case and duplicate keys are errors), and
// refuses a second object of one kind.
func into[T any](p **T) func([]byte) error {
	return func(js []byte) error {
		if *p != nil {
			return errors.New("rendered a second one")
		}
		*p = new(T)
		strict, err := sigsjson.UnmarshalStrict(js, *p)
		if err != nil {
			return err
		}
		return errors.Join(strict...)
	}
}

// render runs helm template over a values file and decodes every object
// strictly: a field the Kubernetes type does not have, a field in the
// wrong case, a key given twice or a kind the chart should not render is
// an error, as the API server's strict field validation would make it.
func render(t *testing.T, file string, set ...string) *release {
	t.Helper()
	out, stderr, err := runHelm(t, append([]string{"template", "rel", chart, "--namespace", "ns"}, valuesArgs(file, set...)...)...)
	if err != nil {
		t.Fatalf("helm template %s: %v\n%s", file, err, stderr)
	}
	r, err := decode(out)
	if err != nil {
		t.Fatalf("helm template %s: %v\n%s", file, err, out)
	}
	return r
}

// decode splits a manifest into its documents and decodes each.
func decode(manifest string) (*release, error) {
	r := &release{}
	decoders := r.decoders()
	rd := k8syaml.NewYAMLReader(bufio.NewReader(strings.NewReader(manifest)))
	for {
		doc, err := rd.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, err
		}
		if len(bytes.TrimSpace(stripComments(doc))) == 0 {
			continue
		}
		js, err := yaml.YAMLToJSONStrict(doc)
		if err != nil {
			return nil, fmt.Errorf("a document is not strict YAML: %v", err)
		}
		var tm metav1.TypeMeta
		if err := sigsjson.UnmarshalCaseSensitivePreserveInts(js, &tm); err != nil {
			return nil, err
		}
		at := tm.APIVersion + " " + tm.Kind
		dec, ok := decoders[at]
		if !ok {
			return nil, fmt.Errorf("rendered %s, which the chart should not", at)
		}
		if err := dec(js); err != nil {
			return nil, fmt.Errorf("%s: %v", at, err)
		}
	}
	return r, nil
}

// stripComments drops comment lines, so that a document of comments
// alone (a template that rendered nothing) is seen as empty.
func stripComments(doc []byte) []byte {
	var out [][]byte
	for l := range bytes.SplitSeq(doc, []byte("\n")) {
		if t := bytes.TrimSpace(l); bytes.HasPrefix(t, []byte("#")) || string(t) == "---" {
			continue
		}
		out = append(out, l)
	}
	return bytes.Join(out, []byte("\n"))
}

// The chart passes helm lint --strict (its schema included) and renders
// for its default values and every example; every object decodes
// strictly into its Kubernetes type.
func TestLintAndTemplate(t *testing.T) {
	for _, file := range valuesFiles(t) {
		t.Run(name(file), func(t *testing.T) {
			out, stderr, err := runHelm(t, append([]string{"lint", "--strict", chart}, valuesArgs(file)...)...)
			if err != nil {
				t.Fatalf("helm lint --strict %s: %v\n%s%s", file, err, out, stderr)
			}
			// Lint renders the templates with fail turned into a log
			// line: one there is a refusal that lint let pass.
			if strings.Contains(out+stderr, "funcMap fail") {
				t.Errorf("helm lint --strict %s passed, logging a refusal:\n%s%s", file, out, stderr)
			}
			r := render(t, file)
			checkRelease(t, r)
		})
	}
}

// name is a values file's subtest name.
func name(file string) string {
	if file == "" {
		return "values.yaml"
	}
	return filepath.Base(file)
}

// decode refuses what the API server's strict field validation refuses,
// and what the chart should not render.
func TestDecodeIsStrict(t *testing.T) {
	for _, tc := range []struct{ name, doc, want string }{
		{"unknown field", "apiVersion: v1\nkind: Service\nspec:\n  selectr: {a: b}\n", `unknown field "spec.selectr"`},
		{"wrong case", "apiVersion: v1\nkind: Service\nspec:\n  Selector: {a: b}\n", "spec.Selector"},
		{"duplicate key", "apiVersion: v1\nkind: Service\nspec: {}\nspec: {}\n", "spec"},
		{"unexpected kind", "apiVersion: v1\nkind: Secret\n", "should not"},
		{"old apiVersion", "apiVersion: policy/v1beta1\nkind: PodDisruptionBudget\n", "should not"},
		{"two of a kind", "apiVersion: v1\nkind: Service\n---\napiVersion: v1\nkind: Service\n", "second"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := decode(tc.doc)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("decode: %v, want an error saying %q", err, tc.want)
			}
		})
	}
	if r, err := decode("# Source: x\n---\napiVersion: v1\nkind: Service\nspec:\n  selector: {a: b}\n"); err != nil || r.Service == nil || r.Service.Spec.Selector["a"] != "b" {
		t.Errorf("decode of a good Service: %v %+v", err, r)
	}
}
