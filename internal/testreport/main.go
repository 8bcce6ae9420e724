// Command testreport summarises what go test -json writes, read from stdin:
// every failed test with its output, a line per package, the totals of
// passed, skipped and failed tests, and why tests skipped, grouped by
// reason, so that a run that passes says what it did not test. It exits
// with status 1 when a test, a package or a build failed, or when stdin held
// no test events.
//
//	go test -count=1 -json ./... | go run ./internal/testreport
package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
)

func main() {
	ok, err := report(os.Stdin, os.Stdout)
	if err != nil {
		fmt.Fprintln(os.Stderr, "testreport:", err)
		os.Exit(2)
	}
	if !ok {
		os.Exit(1)
	}
}

// event is one line of go test -json (cmd/test2json's TestEvent, with the
// ImportPath of its build events).
type event struct {
	Action      string
	Package     string
	Test        string
	Elapsed     float64
	Output      string
	FailedBuild string
	ImportPath  string
}

// report reads the events of r, writes the report to w and says whether the
// run passed. Lines of r that are not events (go's own messages) are copied
// to w as they come.
func report(r io.Reader, w io.Writer) (ok bool, err error) {
	run := newRun()
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 64<<20) // a test may print long lines
	for sc.Scan() {
		line := sc.Bytes()
		var ev event
		if len(line) == 0 || line[0] != '{' || json.Unmarshal(line, &ev) != nil || ev.Action == "" {
			fmt.Fprintf(w, "%s\n", line)
			continue
		}
		run.add(ev)
	}
	if err := sc.Err(); err != nil {
		return false, err
	}
	return run.write(w), nil
}
