package main

import (
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
)

// --report=false is no report, as a boolean flag's false: it is not
// --bench-report false, which wrote the bench report to a file named false.
func TestCalibrateReportFalseIsNoReport(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir)
	rec := recording{}
	cases := filepath.Join(dir, "cases.jsonl")
	synthCases(t, cases, "c", 60, 2, 0.5, rec)
	ts := httptest.NewServer(&replay{model: "m-1", rec: rec})
	defer ts.Close()
	srv := ts.URL
	for _, v := range []string{"false", "0"} {
		fitsPath := filepath.Join(dir, "fits.json")
		if _, stderr, err := cli(t, "calibrate", "--endpoint", srv, "--model", "alias", "--report="+v, "--out", fitsPath, cases); err != nil {
			t.Fatalf("--report=%s: %v\n%s", v, err, stderr)
		}
		if _, err := os.Stat(filepath.Join(dir, v)); err == nil {
			t.Errorf("--report=%s wrote a bench report to a file named %s", v, v)
		}
		if _, err := os.Stat(fitsPath); err != nil {
			t.Errorf("--report=%s: no fits file: %v", v, err)
		}
	}
}
