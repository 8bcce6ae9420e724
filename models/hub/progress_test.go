package hub

import (
	"bytes"
	"strings"
	"testing"
	"time"
)

// fakeClock advances only when told to.
type fakeClock struct{ t time.Time }

func (c *fakeClock) now() time.Time { return c.t }

func TestProgressLogLines(t *testing.T) {
	var out bytes.Buffer
	clk := &fakeClock{t: time.Unix(1000, 0)}
	p := newProgressWriter(&out, "model.gguf", 100<<20, 0, false, clk.now)

	chunk := make([]byte, 10<<20)
	_, _ = p.Write(chunk) // no time passed: no line
	clk.t = clk.t.Add(logInterval)
	_, _ = p.Write(chunk) // 20 MiB in 5 s: a line with speed and ETA
	clk.t = clk.t.Add(time.Second)
	_, _ = p.Write(chunk) // too soon for another line
	p.Finish()
	p.Finish()

	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	want := []string{
		"model.gguf: downloading 100.0 MiB",
		"model.gguf:  20.0% 20.0 MiB / 100.0 MiB  4.0 MiB/s  ETA 20s",
		"model.gguf:  30.0% 30.0 MiB / 100.0 MiB  5.0 MiB/s  in 6s",
	}
	if len(lines) != len(want) {
		t.Fatalf("got %d lines:\n%s", len(lines), out.String())
	}
	for i := range want {
		if lines[i] != want[i] {
			t.Errorf("line %d:\n got %q\nwant %q", i, lines[i], want[i])
		}
	}
}

func TestProgressResumedAndUnknownSize(t *testing.T) {
	var out bytes.Buffer
	clk := &fakeClock{t: time.Unix(0, 0)}
	p := newProgressWriter(&out, "f", 4096, 1024, false, clk.now)
	clk.t = clk.t.Add(2 * time.Second)
	_, _ = p.Write(make([]byte, 3072))
	p.Finish()
	got := out.String()
	// Speed counts only this session's bytes: 3 KiB in 2 s.
	for _, s := range []string{"resuming at 1.0 KiB of 4.0 KiB", "100.0% 4.0 KiB / 4.0 KiB", "1.5 KiB/s"} {
		if !strings.Contains(got, s) {
			t.Errorf("output lacks %q:\n%s", s, got)
		}
	}

	out.Reset()
	p = newProgressWriter(&out, "f", 0, 0, false, clk.now)
	_, _ = p.Write(make([]byte, 2048))
	p.Finish()
	if got := out.String(); !strings.Contains(got, "size unknown") || !strings.Contains(got, "f: 2.0 KiB") || strings.Contains(got, "%") {
		t.Errorf("unknown size output:\n%s", got)
	}
}

func TestProgressTerminalBar(t *testing.T) {
	var out bytes.Buffer
	clk := &fakeClock{t: time.Unix(0, 0)}
	p := newProgressWriter(&out, "m", 1000, 0, true, clk.now)
	clk.t = clk.t.Add(time.Second)
	_, _ = p.Write(make([]byte, 500))
	clk.t = clk.t.Add(time.Second)
	_, _ = p.Write(make([]byte, 500))
	p.Finish()
	got := out.String()
	if strings.Count(got, "\r") != 3 || !strings.HasSuffix(got, "\n") || strings.Count(got, "\n") != 1 {
		t.Errorf("want three redraws of one line ending in a newline, got %q", got)
	}
	for _, s := range []string{"[============            ]  50.0%", "ETA 1s", "[========================] 100.0%"} {
		if !strings.Contains(got, s) {
			t.Errorf("output lacks %q: %q", s, got)
		}
	}
}

func TestFormatBytes(t *testing.T) {
	tests := []struct {
		n    int64
		want string
	}{
		{0, "0 B"}, {1023, "1023 B"}, {1024, "1.0 KiB"}, {1536, "1.5 KiB"},
		{491400032, "468.6 MiB"}, {5 << 30, "5.0 GiB"}, {1 << 62, "4.0 EiB"},
	}
	for _, tt := range tests {
		if got := formatBytes(tt.n); got != tt.want {
			t.Errorf("formatBytes(%d) = %q, want %q", tt.n, got, tt.want)
		}
	}
}

func TestFormatDuration(t *testing.T) {
	tests := []struct {
		d    time.Duration
		want string
	}{
		{300 * time.Millisecond, "0.3s"}, {59 * time.Second, "59s"},
		{61 * time.Second, "1m01s"}, {3723 * time.Second, "1h02m03s"},
	}
	for _, tt := range tests {
		if got := formatDuration(tt.d); got != tt.want {
			t.Errorf("formatDuration(%s) = %q, want %q", tt.d, got, tt.want)
		}
	}
}
