package main

import (
	"strings"
	"testing"
)

// Events as go test -json writes them (trimmed of Time), for the cases below.
const (
	passing = `{"Action":"start","Package":"m/a"}
{"Action":"run","Package":"m/a","Test":"TestOne"}
{"Action":"output","Package":"m/a","Test":"TestOne","Output":"=== RUN   TestOne\n"}
{"Action":"output","Package":"m/a","Test":"TestOne","Output":"--- PASS: TestOne (0.00s)\n"}
{"Action":"pass","Package":"m/a","Test":"TestOne","Elapsed":0}
{"Action":"run","Package":"m/a","Test":"TestData"}
{"Action":"output","Package":"m/a","Test":"TestData","Output":"    a_test.go:9: ../shared is absent; skipping\n"}
{"Action":"skip","Package":"m/a","Test":"TestData","Elapsed":0}
{"Action":"run","Package":"m/a","Test":"TestTable"}
{"Action":"run","Package":"m/a","Test":"TestTable/x"}
{"Action":"output","Package":"m/a","Test":"TestTable/x","Output":"    a_test.go:20: ../shared is absent; skipping\n"}
{"Action":"skip","Package":"m/a","Test":"TestTable/x","Elapsed":0}
{"Action":"pass","Package":"m/a","Test":"TestTable","Elapsed":0}
{"Action":"output","Package":"m/a","Output":"ok  \tm/a\t0.012s\n"}
{"Action":"pass","Package":"m/a","Elapsed":0.012}
{"Action":"start","Package":"m/b"}
{"Action":"output","Package":"m/b","Output":"?   \tm/b\t[no test files]\n"}
{"Action":"skip","Package":"m/b","Elapsed":0}
`
	failing = `{"Action":"start","Package":"m/c"}
{"Action":"run","Package":"m/c","Test":"TestBad"}
{"Action":"run","Package":"m/c","Test":"TestBad/case"}
{"Action":"output","Package":"m/c","Test":"TestBad/case","Output":"    c_test.go:5: got 1, want 2\n"}
{"Action":"output","Package":"m/c","Test":"TestBad/case","Output":"--- FAIL: TestBad/case (0.00s)\n"}
{"Action":"fail","Package":"m/c","Test":"TestBad/case","Elapsed":0}
{"Action":"output","Package":"m/c","Test":"TestBad","Output":"--- FAIL: TestBad (0.00s)\n"}
{"Action":"fail","Package":"m/c","Test":"TestBad","Elapsed":0}
{"Action":"output","Package":"m/c","Output":"FAIL\n"}
{"Action":"fail","Package":"m/c","Elapsed":0.01}
`
	buildFailure = `{"ImportPath":"m/d [m/d.test]","Action":"build-output","Output":"d_test.go:3:1: syntax error\n"}
{"ImportPath":"m/d [m/d.test]","Action":"build-fail"}
{"Action":"start","Package":"m/d"}
{"Action":"output","Package":"m/d","Output":"FAIL\tm/d [build failed]\n"}
{"Action":"fail","Package":"m/d","Elapsed":0,"FailedBuild":"m/d [m/d.test]"}
`
	crashed = `{"Action":"start","Package":"m/e"}
{"Action":"run","Package":"m/e","Test":"TestCrash"}
{"Action":"output","Package":"m/e","Test":"TestCrash","Output":"panic: boom\n"}
{"Action":"output","Package":"m/e","Output":"exit status 2\n"}
{"Action":"fail","Package":"m/e","Elapsed":0.1}
`
	unfinished = `{"Action":"start","Package":"m/f"}
{"Action":"run","Package":"m/f","Test":"TestSlow"}
`
)

func TestReport(t *testing.T) {
	for _, c := range []struct {
		name string
		in   string
		ok   bool
		want []string // in the report, in this order
		not  []string // nowhere in the report
	}{
		{"passing", passing, true, []string{
			"packages of m:",
			"ok    a  2 passed, 1 skipped, 0 failed  (0.01s)",
			"?     b  no test files",
			"total: 2 passed, 1 skipped, 0 failed; subtests: 0 passed, 1 skipped, 0 failed",
			"skipped, by reason:\n  2 × ../shared is absent; skipping\n      a: TestData, TestTable/x\n",
			"PASS",
		}, []string{"FAIL", "TestOne"}},
		{"a failed subtest", passing + failing, false, []string{
			"--- FAIL: m/c TestBad/case (0.00s)\n    c_test.go:5: got 1, want 2\n",
			"FAIL  c  0 passed, 0 skipped, 1 failed",
			"total: 2 passed, 1 skipped, 1 failed; subtests: 0 passed, 1 skipped, 1 failed",
			"FAIL\n",
		}, []string{"--- FAIL: m/c TestBad (", "PASS"}},
		{"a build failure", passing + buildFailure, false, []string{
			"=== build failed: m/d [m/d.test]\nd_test.go:3:1: syntax error\n",
			"FAIL  d  build failed",
		}, []string{"PASS"}},
		{"a test binary that crashed", crashed, false, []string{
			"--- FAIL: m/e TestCrash (did not finish)\npanic: boom\n",
			"--- FAIL: m/e\nexit status 2\n",
		}, []string{"PASS"}},
		{"a test binary that never ended", unfinished, false, []string{
			"FAIL  m/f  no result: the test binary did not finish",
		}, []string{"PASS"}},
		{"go's own messages pass through", "go: downloading example.com/x v1.0.0\n" + passing, true, []string{
			"go: downloading example.com/x v1.0.0\n",
			"PASS",
		}, nil},
		{"no events", "", false, []string{"no test events on stdin"}, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			var out strings.Builder
			ok, err := report(strings.NewReader(c.in), &out)
			if err != nil {
				t.Fatal(err)
			}
			got := out.String()
			if ok != c.ok {
				t.Errorf("ok = %v, want %v; report:\n%s", ok, c.ok, got)
			}
			rest := got
			for _, w := range c.want {
				i := strings.Index(rest, w)
				if i < 0 {
					t.Fatalf("the report lacks %q (or has it out of order):\n%s", w, got)
				}
				rest = rest[i+len(w):]
			}
			for _, n := range c.not {
				if strings.Contains(got, n) {
					t.Errorf("the report has %q:\n%s", n, got)
				}
			}
		})
	}
}

func TestCompact(t *testing.T) {
	for _, c := range []struct {
		in, want []string
	}{
		{[]string{"TestA", "TestB/x", "TestB/y"}, []string{"TestA", "TestB/x", "TestB/y"}},
		{[]string{"TestB/1", "TestA", "TestB/2", "TestB/3", "TestB/4"}, []string{"TestB/… (4 subtests)", "TestA"}},
	} {
		if got := compact(c.in); strings.Join(got, ",") != strings.Join(c.want, ",") {
			t.Errorf("compact(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}

func TestCommonPrefix(t *testing.T) {
	for _, c := range []struct {
		in   []string
		want string
	}{
		{[]string{"m/a"}, ""},
		{[]string{"ex.com/m/a", "ex.com/m/b/c"}, "ex.com/m"},
		{[]string{"ex.com/m", "ex.com/m/b"}, "ex.com/m"},
		{[]string{"a/x", "b/x"}, ""},
	} {
		if got := commonPrefix(c.in); got != c.want {
			t.Errorf("commonPrefix(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}
