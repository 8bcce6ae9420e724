// Package shared finds the project's test data directory, ../shared beside the
// repository, and skips a test with a clear message when it is absent, so that
// go test ./... passes on a fresh machine.
package shared

import (
	"os"
	"path/filepath"
	"testing"
)

// Dir returns the absolute path of ../shared relative to the module root, or ""
// when it does not exist. RUVLLM_SHARED overrides the location.
func Dir() string {
	if d := os.Getenv("RUVLLM_SHARED"); d != "" {
		return d
	}
	wd, err := os.Getwd()
	if err != nil {
		return ""
	}
	for d := wd; ; d = filepath.Dir(d) {
		if _, err := os.Stat(filepath.Join(d, "go.mod")); err == nil {
			s := filepath.Join(filepath.Dir(d), "shared")
			if st, err := os.Stat(s); err == nil && st.IsDir() {
				return s
			}
			return ""
		}
		if filepath.Dir(d) == d {
			return ""
		}
	}
}

// Path joins parts under the shared directory and skips tb when the file or
// directory is not there.
func Path(tb testing.TB, parts ...string) string {
	tb.Helper()
	d := Dir()
	if d == "" {
		tb.Skip("../shared test data is absent; skipping")
	}
	p := filepath.Join(append([]string{d}, parts...)...)
	if _, err := os.Stat(p); err != nil {
		tb.Skipf("shared test data %s is absent; skipping", p)
	}
	return p
}
