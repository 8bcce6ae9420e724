package hub

import (
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"time"
)

// How often progress is redrawn: a terminal line may change several times a
// second, a log (a file, a pipe, journald) gets a line every few seconds.
const (
	terminalRedraw = 200 * time.Millisecond
	logInterval    = 5 * time.Second
)

// ProgressWriter counts the bytes written to it and reports the progress of a
// transfer on out: a self-redrawing bar when out is a terminal, a line every
// few seconds otherwise. Tee a download through it with io.MultiWriter.
type ProgressWriter struct {
	mu       sync.Mutex
	out      io.Writer
	label    string
	terminal bool
	interval time.Duration
	now      func() time.Time

	total     int64 // bytes expected in all, 0 when unknown
	done      int64 // bytes so far, including those from an earlier session
	resumedAt int64 // bytes present before this session; excluded from speed
	start     time.Time
	lastDraw  time.Time
	lastWidth int
	finished  bool
}

// NewProgressWriter reports on out the transfer of label, total bytes in all
// (0 when unknown) of which already were present before this session (a
// resumed download). out that is a terminal gets a progress bar.
func NewProgressWriter(out io.Writer, label string, total, already int64) *ProgressWriter {
	return newProgressWriter(out, label, total, already, isTerminal(out), time.Now)
}

// newProgressWriter is NewProgressWriter with the terminal decision and the
// clock given, so tests can drive both.
func newProgressWriter(out io.Writer, label string, total, already int64, terminal bool, now func() time.Time) *ProgressWriter {
	p := &ProgressWriter{
		out:       out,
		label:     label,
		terminal:  terminal,
		interval:  logInterval,
		now:       now,
		total:     total,
		done:      already,
		resumedAt: already,
	}
	if terminal {
		p.interval = terminalRedraw
	}
	p.start = now()
	p.lastDraw = p.start
	if !terminal {
		if already > 0 {
			fmt.Fprintf(out, "%s: resuming at %s of %s\n", label, formatBytes(already), formatTotal(total))
		} else {
			fmt.Fprintf(out, "%s: downloading %s\n", label, formatTotal(total))
		}
	}
	return p
}

// Write counts len(b) bytes and redraws when enough time has passed. It never
// fails, so it can sit inside an io.MultiWriter.
func (p *ProgressWriter) Write(b []byte) (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.done += int64(len(b))
	if now := p.now(); now.Sub(p.lastDraw) >= p.interval {
		p.lastDraw = now
		p.draw(now, false)
	}
	return len(b), nil
}

// Finish draws the final state and ends the terminal line. Calling it again
// does nothing.
func (p *ProgressWriter) Finish() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.finished {
		return
	}
	p.finished = true
	p.draw(p.now(), true)
}

// draw writes one report; the caller holds p.mu.
func (p *ProgressWriter) draw(now time.Time, final bool) {
	line := p.status(now, final)
	if !p.terminal {
		fmt.Fprintf(p.out, "%s: %s\n", p.label, line)
		return
	}
	line = p.label + "  " + line
	// Pad over the tail of a longer previous line instead of relying on an
	// ANSI erase, which not every terminal honours.
	pad := p.lastWidth - len(line)
	p.lastWidth = len(line)
	if pad < 0 {
		pad = 0
	}
	end := ""
	if final {
		end = "\n"
	}
	fmt.Fprintf(p.out, "\r%s%s%s", line, strings.Repeat(" ", pad), end)
}

// status formats percent, bytes, speed and time left, each only when known.
func (p *ProgressWriter) status(now time.Time, final bool) string {
	var b strings.Builder
	if p.total > 0 {
		pct := 100 * float64(p.done) / float64(p.total)
		if p.terminal {
			b.WriteString(bar(p.done, p.total, 24))
			b.WriteByte(' ')
		}
		fmt.Fprintf(&b, "%5.1f%% %s / %s", pct, formatBytes(p.done), formatBytes(p.total))
	} else {
		b.WriteString(formatBytes(p.done))
	}
	elapsed := now.Sub(p.start)
	speed := 0.0
	if secs := elapsed.Seconds(); secs > 0 {
		speed = float64(p.done-p.resumedAt) / secs
	}
	if speed > 0 {
		fmt.Fprintf(&b, "  %s/s", formatBytes(int64(speed)))
	}
	switch {
	case final:
		fmt.Fprintf(&b, "  in %s", formatDuration(elapsed))
	case p.total > p.done && speed > 0:
		left := time.Duration(float64(p.total-p.done) / speed * float64(time.Second))
		fmt.Fprintf(&b, "  ETA %s", formatDuration(left))
	}
	return b.String()
}

// bar draws width cells filled in proportion to done/total.
func bar(done, total int64, width int) string {
	filled := int(float64(width) * float64(done) / float64(total))
	filled = max(0, min(width, filled))
	return "[" + strings.Repeat("=", filled) + strings.Repeat(" ", width-filled) + "]"
}

// isTerminal reports whether w is a character device (a terminal) and the
// terminal is not declared dumb.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	if err != nil {
		return false
	}
	return fi.Mode()&os.ModeCharDevice != 0 && os.Getenv("TERM") != "dumb"
}

func formatTotal(total int64) string {
	if total <= 0 {
		return "(size unknown)"
	}
	return formatBytes(total)
}

// formatBytes prints n with a binary unit: "512 B", "1.5 KiB", "468.6 MiB".
func formatBytes(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	v := float64(n)
	suffixes := []string{"KiB", "MiB", "GiB", "TiB", "PiB", "EiB"}
	i := -1
	for v >= unit && i < len(suffixes)-1 {
		v /= unit
		i++
	}
	return fmt.Sprintf("%.1f %s", v, suffixes[i])
}

// formatDuration prints d rounded to whole seconds, "1h02m03s" style.
func formatDuration(d time.Duration) string {
	if d < time.Second {
		return fmt.Sprintf("%.1fs", d.Seconds())
	}
	d = d.Round(time.Second)
	h, m, s := int(d/time.Hour), int(d/time.Minute)%60, int(d/time.Second)%60
	switch {
	case h > 0:
		return fmt.Sprintf("%dh%02dm%02ds", h, m, s)
	case m > 0:
		return fmt.Sprintf("%dm%02ds", m, s)
	}
	return fmt.Sprintf("%ds", s)
}
