package main

import (
	"cmp"
	"fmt"
	"io"
	"regexp"
	"slices"
	"strings"
)

// run is everything the events said, in the order things first appeared.
type run struct {
	pkgs   map[string]*pkg
	order  []string            // package names
	builds map[string][]string // build output by import path
	failed []string            // import paths whose build failed
}

// pkg is one package's test binary: its tests and its own output.
type pkg struct {
	name    string
	result  string // pass, fail, skip ("no test files"); "" while it runs
	elapsed float64
	build   string   // the failed build, when its test binary was not built
	output  []string // lines that belong to no test
	tests   map[string]*test
	order   []string // test names, in the order they started
}

// test is one test or subtest.
type test struct {
	name    string
	result  string // pass, fail, skip; "" when it never ended
	elapsed float64
	output  []string
}

func newRun() *run {
	return &run{pkgs: map[string]*pkg{}, builds: map[string][]string{}}
}

func (r *run) add(ev event) {
	switch ev.Action {
	case "build-output":
		r.builds[ev.ImportPath] = append(r.builds[ev.ImportPath], ev.Output)
		return
	case "build-fail":
		r.failed = append(r.failed, ev.ImportPath)
		return
	}
	if ev.Package == "" {
		return
	}
	p := r.pkgs[ev.Package]
	if p == nil {
		p = &pkg{name: ev.Package, tests: map[string]*test{}}
		r.pkgs[ev.Package] = p
		r.order = append(r.order, ev.Package)
	}
	if ev.Test == "" {
		switch ev.Action {
		case "output":
			p.output = append(p.output, ev.Output)
		case "pass", "fail", "skip":
			p.result, p.elapsed, p.build = ev.Action, ev.Elapsed, ev.FailedBuild
		}
		return
	}
	t := p.tests[ev.Test]
	if t == nil {
		t = &test{name: ev.Test}
		p.tests[ev.Test] = t
		p.order = append(p.order, ev.Test)
	}
	switch ev.Action {
	case "output":
		t.output = append(t.output, ev.Output)
	case "pass", "fail", "skip":
		t.result, t.elapsed = ev.Action, ev.Elapsed
	}
}

// counts are the tests of each result.
type counts struct{ passed, skipped, failed int }

func (c *counts) add(o counts) {
	c.passed += o.passed
	c.skipped += o.skipped
	c.failed += o.failed
}

func (c counts) String() string {
	return fmt.Sprintf("%d passed, %d skipped, %d failed", c.passed, c.skipped, c.failed)
}

// failed reports whether t failed, or never ended in a package that has:
// the test the binary was in when it crashed.
func (p *pkg) failedTest(t *test) bool {
	return t.result == "fail" || t.result == "" && p.result != ""
}

// count counts the top-level tests and the subtests of p.
func (p *pkg) count() (top, sub counts) {
	for _, name := range p.order {
		t := p.tests[name]
		c := &top
		if strings.Contains(name, "/") {
			c = &sub
		}
		switch {
		case p.failedTest(t):
			c.failed++
		case t.result == "pass":
			c.passed++
		case t.result == "skip":
			c.skipped++
		}
	}
	return top, sub
}

// ok reports whether p passed: it ended, did so without failing, and none
// of its tests failed.
func (p *pkg) ok() bool {
	if p.result == "" || p.result == "fail" {
		return false
	}
	for _, t := range p.tests {
		if p.failedTest(t) {
			return false
		}
	}
	return true
}

// write writes the report and says whether the run passed.
func (r *run) write(w io.Writer) bool {
	ok := len(r.failed) == 0 && len(r.order) > 0
	for _, path := range r.failed {
		fmt.Fprintf(w, "=== build failed: %s\n", path)
		for _, line := range r.builds[path] {
			io.WriteString(w, line)
		}
	}
	for _, name := range r.order {
		ok = r.pkgs[name].writeFailures(w) && ok
	}

	prefix := commonPrefix(r.order)
	short := func(name string) string {
		if name == prefix {
			return "."
		}
		return strings.TrimPrefix(name, prefix+"/")
	}
	if prefix != "" {
		fmt.Fprintf(w, "\npackages of %s:\n", prefix)
	} else {
		fmt.Fprintln(w)
	}
	width := 0
	for _, name := range r.order {
		width = max(width, len(short(name)))
	}
	var top, sub counts
	for _, name := range r.order {
		p := r.pkgs[name]
		t, s := p.count()
		top.add(t)
		sub.add(s)
		status, what := "ok  ", t.String()
		switch {
		case p.build != "":
			status, what = "FAIL", "build failed"
		case p.result == "":
			status, what = "FAIL", "no result: the test binary did not finish; "+what
		case !p.ok():
			status = "FAIL"
		case p.result == "skip" && len(p.order) == 0:
			status, what = "?   ", "no test files"
		}
		fmt.Fprintf(w, "%s  %-*s  %s", status, width, short(name), what)
		if p.result != "" && p.build == "" && status != "?   " {
			fmt.Fprintf(w, "  (%.2fs)", p.elapsed)
		}
		fmt.Fprintln(w)
	}
	fmt.Fprintf(w, "\ntotal: %v", top)
	if sub != (counts{}) {
		fmt.Fprintf(w, "; subtests: %v", sub)
	}
	fmt.Fprintln(w)
	r.writeSkips(w, short)
	if !ok {
		fmt.Fprintln(w, "FAIL")
	} else {
		fmt.Fprintln(w, "PASS")
	}
	if len(r.order) == 0 {
		fmt.Fprintln(w, "testreport: no test events on stdin (was go test run with -json?)")
	}
	return ok
}

// writeFailures writes the failed tests of p with their output, and p's own
// output when it failed otherwise; it reports whether p passed.
func (p *pkg) writeFailures(w io.Writer) bool {
	if p.ok() {
		return true
	}
	if p.build != "" {
		return false // its build output is written already
	}
	wrote := false
	for _, name := range p.order {
		t := p.tests[name]
		if !p.failedTest(t) {
			continue
		}
		lines := ownLines(t.output)
		// A parent that failed only through its subtests says no more than
		// they do.
		if len(lines) == 0 && p.hasFailedSubtest(name) {
			continue
		}
		if t.result == "" {
			fmt.Fprintf(w, "--- FAIL: %s %s (did not finish)\n", p.name, name)
		} else {
			fmt.Fprintf(w, "--- FAIL: %s %s (%.2fs)\n", p.name, name, t.elapsed)
		}
		for _, line := range lines {
			io.WriteString(w, line)
		}
		wrote = true
	}
	// Output outside any test: a panic in TestMain or init, a timeout, a
	// binary that exited early.
	var rest []string
	for _, line := range p.output {
		if s := strings.TrimSpace(line); s != "PASS" && s != "FAIL" && !strings.HasPrefix(s, "ok  \t") && !strings.HasPrefix(s, "FAIL\t") {
			rest = append(rest, line)
		}
	}
	if len(rest) > 0 || !wrote {
		fmt.Fprintf(w, "--- FAIL: %s\n", p.name)
		for _, line := range rest {
			io.WriteString(w, line)
		}
	}
	return false
}

func (p *pkg) hasFailedSubtest(name string) bool {
	for _, n := range p.order {
		if strings.HasPrefix(n, name+"/") && p.failedTest(p.tests[n]) {
			return true
		}
	}
	return false
}

// ownLines are a test's output lines without the framing go test adds
// (=== RUN, --- PASS and the like).
func ownLines(output []string) []string {
	var lines []string
	for _, line := range output {
		if strings.HasPrefix(line, "=== ") || strings.HasPrefix(line, "--- ") {
			continue
		}
		lines = append(lines, line)
	}
	return lines
}

// logPrefix is the file:line: that t.Log and t.Skip put before a message.
var logPrefix = regexp.MustCompile(`^\s*[\w.-]+\.go:\d+: `)

// skipReason is what a skipped test said, on one line.
func skipReason(t *test) string {
	var parts []string
	for _, line := range ownLines(t.output) {
		if s := strings.TrimSpace(logPrefix.ReplaceAllString(line, "")); s != "" {
			parts = append(parts, s)
		}
	}
	if len(parts) == 0 {
		return "(no reason given)"
	}
	return strings.Join(parts, " / ")
}

// writeSkips lists the skipped tests grouped by reason, most common first.
// Within a group, the skipped subtests of a test are counted rather than
// named when there are more than a few.
func (r *run) writeSkips(w io.Writer, short func(string) string) {
	type group struct {
		reason string
		n      int
		byPkg  map[string][]string
	}
	groups := map[string]*group{}
	for _, pname := range r.order {
		p := r.pkgs[pname]
		for _, name := range p.order {
			t := p.tests[name]
			if t.result != "skip" {
				continue
			}
			reason := skipReason(t)
			g := groups[reason]
			if g == nil {
				g = &group{reason: reason, byPkg: map[string][]string{}}
				groups[reason] = g
			}
			g.n++
			g.byPkg[pname] = append(g.byPkg[pname], name)
		}
	}
	if len(groups) == 0 {
		return
	}
	list := make([]*group, 0, len(groups))
	for _, g := range groups {
		list = append(list, g)
	}
	slices.SortFunc(list, func(a, b *group) int {
		return cmp.Or(b.n-a.n, strings.Compare(a.reason, b.reason))
	})
	fmt.Fprintln(w, "\nskipped, by reason:")
	for _, g := range list {
		fmt.Fprintf(w, "  %d × %s\n", g.n, g.reason)
		for _, pname := range r.order {
			if names := g.byPkg[pname]; len(names) > 0 {
				fmt.Fprintf(w, "      %s: %s\n", short(pname), strings.Join(compact(names), ", "))
			}
		}
	}
}

// compact names the subtests of one test as "Test/… (n subtests)" when
// there are more than three of them.
func compact(names []string) []string {
	n := map[string]int{}
	for _, name := range names {
		if top, _, ok := strings.Cut(name, "/"); ok {
			n[top]++
		}
	}
	var out []string
	named := map[string]bool{}
	for _, name := range names {
		top, _, ok := strings.Cut(name, "/")
		switch {
		case !ok || n[top] <= 3:
			out = append(out, name)
		case !named[top]:
			out = append(out, fmt.Sprintf("%s/… (%d subtests)", top, n[top]))
			named[top] = true
		}
	}
	return out
}

// commonPrefix is the longest path of whole elements that every name
// starts with, or "" for fewer than two names.
func commonPrefix(names []string) string {
	if len(names) < 2 {
		return ""
	}
	prefix := strings.Split(names[0], "/")
	for _, name := range names[1:] {
		elems := strings.Split(name, "/")
		k := 0
		for k < len(prefix) && k < len(elems) && prefix[k] == elems[k] {
			k++
		}
		prefix = prefix[:k]
	}
	return strings.Join(prefix, "/")
}
