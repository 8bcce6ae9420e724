// Package shared finds the project's test data directory, ../shared beside the
// repository, and skips a test with a clear message when it is absent, so that
// go test ./... passes on a fresh machine.
package shared

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
)

// Dir returns the absolute path of ../shared relative to the module root, or ""
// when it does not exist. RUVLLM_SHARED overrides the location; pointing it at
// a directory that does not exist (RUVLLM_SHARED=/nonexistent) runs the tests
// as on a fresh machine.
func Dir() string {
	if d := os.Getenv("RUVLLM_SHARED"); d != "" {
		return existingDir(d)
	}
	wd, err := os.Getwd()
	if err != nil {
		return ""
	}
	for d := wd; ; d = filepath.Dir(d) {
		if _, err := os.Stat(filepath.Join(d, "go.mod")); err == nil {
			return existingDir(filepath.Join(filepath.Dir(d), "shared"))
		}
		if filepath.Dir(d) == d {
			return ""
		}
	}
}

// existingDir is d made absolute when it is a directory, else "".
func existingDir(d string) string {
	if st, err := os.Stat(d); err != nil || !st.IsDir() {
		return ""
	}
	abs, err := filepath.Abs(d)
	if err != nil {
		return ""
	}
	return abs
}

// Path joins parts under the shared directory and skips tb when the file or
// directory is not there.
func Path(tb testing.TB, parts ...string) string {
	tb.Helper()
	d := Dir()
	if d == "" {
		tb.Skip("the test data directory ../shared (or $RUVLLM_SHARED) is absent; skipping")
	}
	p := filepath.Join(append([]string{d}, parts...)...)
	if _, err := os.Stat(p); err != nil {
		tb.Skipf("shared test data %s is absent; skipping", p)
	}
	return p
}

// ReadJSON decodes the JSON test file at path (a reference run) into v,
// failing tb when it cannot.
func ReadJSON(tb testing.TB, path string, v any) {
	tb.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		tb.Fatal(err)
	}
	if err := json.Unmarshal(raw, v); err != nil {
		tb.Fatalf("%s: %v", path, err)
	}
}
