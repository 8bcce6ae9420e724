package session

import (
	"strings"
	"testing"

	"github.com/ruvllm/ruvllm/backends"
	"github.com/ruvllm/ruvllm/internal/testmodel"
	"github.com/ruvllm/ruvllm/models/tokenizer"
)

func TestHoldBack(t *testing.T) {
	tests := []struct {
		s     string
		stops []string
		want  int
	}{
		{"Hello", nil, 0},
		{"Hello", []string{"STOP"}, 0},
		{"Hello S", []string{"STOP"}, 1},
		{"Hello ST", []string{"STOP"}, 2},
		{"Hello STO", []string{"STOP"}, 3},
		{"Hello STOP", []string{"STOP"}, 0}, // a whole stop string is firstStop's business
		{"aaa", []string{"aaab"}, 3},
		{"xab", []string{"abc", "bcd"}, 2},
		{"xb", []string{"abc", "bcd"}, 1},
		{"é", []string{"éa"}, 2},
	}
	for _, tc := range tests {
		if got := holdBack(tc.s, tc.stops); got != tc.want {
			t.Errorf("holdBack(%q, %q) = %d, want %d", tc.s, tc.stops, got, tc.want)
		}
	}
}

func TestFirstStop(t *testing.T) {
	tests := []struct {
		s     string
		stops []string
		want  int
	}{
		{"Hello", []string{"x"}, -1},
		{"Hello world", []string{"world", "lo"}, 3},
		{"abcabc", []string{"c"}, 2},
	}
	for _, tc := range tests {
		if got, _ := firstStop(tc.s, tc.stops); got != tc.want {
			t.Errorf("firstStop(%q, %q) = %d, want %d", tc.s, tc.stops, got, tc.want)
		}
	}
}

// TestChoiceStops feeds token scripts through a choice and checks that the
// emitted text never contains (any part of) a stop string that matched,
// that held-back text comes out once it cannot be a stop string, and which
// logprob entries are released.
func TestChoiceStops(t *testing.T) {
	tk := testmodel.WordTokenizer(t)
	tests := []struct {
		name      string
		pieces    []string
		stops     []string
		wantText  string
		wantStop  bool
		wantLPs   int  // entries released in all
		finalFlag bool // whether the engine's finish arrives
	}{
		{"no stop", []string{"▁Hello", "▁world"}, nil, " Hello world", false, 2, true},
		{"stop split across tokens", []string{"▁Hello", "▁S", "TOP", "▁here"}, []string{"STOP"}, " Hello ", true, 2, false},
		{"stop inside one token", []string{"▁Hello", "ST", "OP", "!"}, []string{"OP"}, " HelloST", true, 2, false},
		{"held text released by a mismatch", []string{"▁Hello", "ST", "!"}, []string{"STOP"}, " HelloST!", false, 3, true},
		{"held text released at the end", []string{"▁Hello", "ST"}, []string{"STOP"}, " HelloST", false, 2, true},
		{"UTF-8 character over two byte tokens", []string{"▁Hello", "<0xC3>", "<0xA9>", "!"}, nil, " Helloé!", false, 4, true},
		{"stop at the very start", []string{"ST", "OP", "▁here"}, []string{"STOP"}, "", true, 0, false},
		{"earliest of two stops", []string{"▁Hello", "▁world", "!"}, []string{"!", "world"}, " Hello ", true, 2, false},
		{"stop in a UTF-8 character split over byte tokens", []string{"▁Hello", "<0xC3>", "<0xA9>", "!"}, []string{"é"}, " Hello", true, 1, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := &choice{dec: tk.NewDecoderWith(tokenizer.DecodeOptions{Continuation: true}), stops: tc.stops, logprobs: true, tok: tk}
			var out strings.Builder
			released := 0
			stopped := false
			for _, id := range testmodel.IDs(t, tk, tc.pieces...) {
				text, entries, s := c.addToken(&backends.Token{ID: id, Logprob: -1})
				out.WriteString(text)
				released += len(entries)
				for _, stop := range tc.stops {
					if strings.Contains(out.String(), stop) {
						t.Fatalf("stop string %q leaked: %q", stop, out.String())
					}
				}
				if s {
					stopped = true
					break
				}
			}
			if !stopped && tc.finalFlag {
				text, entries, s := c.flush()
				out.WriteString(text)
				released += len(entries)
				stopped = s
			}
			if out.String() != tc.wantText || c.text.String() != tc.wantText {
				t.Errorf("text = %q (kept %q), want %q", out.String(), c.text.String(), tc.wantText)
			}
			if stopped != tc.wantStop {
				t.Errorf("stopped = %v, want %v", stopped, tc.wantStop)
			}
			if released != tc.wantLPs {
				t.Errorf("released %d entries, want %d", released, tc.wantLPs)
			}
		})
	}
}
