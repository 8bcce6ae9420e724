package session

import (
	"runtime"
	"strings"
	"testing"

	"github.com/ruvllm/ruvllm/internal/testmodel"
)

// TestEncodeWithinStopsEarly: a prompt far over the limit is refused after
// a few pieces are tokenized (issue 30: 7.8 MB prompts took 11 s and 50 to
// 100 times their size in memory to be refused), a prompt within the limit
// gets exactly EncodePrompt's tokens, and one just over it is refused.
func TestEncodeWithinStopsEarly(t *testing.T) {
	tk := testmodel.WordTokenizer(t)
	line := "Hello world, here is the end of a line. "
	huge := strings.Repeat(line+"\n", 7_800_000/len(line))
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	if _, ok := EncodePromptWithin(tk, huge, 4096); ok {
		t.Fatal("a 7.8 MB prompt fits 4096 tokens")
	}
	runtime.ReadMemStats(&after)
	if alloc := after.TotalAlloc - before.TotalAlloc; alloc > uint64(len(huge)) {
		t.Errorf("refusing a %d-byte prompt allocated %d bytes", len(huge), alloc)
	}
	for _, n := range []int{1, 100, 20000} {
		text := strings.Repeat(line, n)
		want := EncodePrompt(tk, text)
		got, ok := EncodePromptWithin(tk, text, len(want))
		if !ok || len(got) != len(want) {
			t.Errorf("%d bytes: %d tokens, ok %v; want %d", len(text), len(got), ok, len(want))
		}
		if _, ok := EncodePromptWithin(tk, text, len(want)-1); ok {
			t.Errorf("%d bytes: %d tokens fit a limit of %d", len(text), len(want), len(want)-1)
		}
	}
}
