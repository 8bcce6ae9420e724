package native

import (
	"fmt"
	"slices"
	"testing"

	"github.com/ruvllm/ruvllm/backends"
	"github.com/ruvllm/ruvllm/kvcache"
	"github.com/ruvllm/ruvllm/models/tokenizer"
)

// TestDraftStepIsDecode: the logits of a step with drafted tokens equal,
// bit for bit, those of feeding the same tokens one decode step at a time,
// in every KV precision, from positions that make the drafts cross a block
// boundary; the blocks holding drafts stay out of the prefix index until
// a later step keeps them; after truncating the drafts away the sequence
// decodes on as if they had never been.
func TestDraftStepIsDecode(t *testing.T) {
	for _, kv := range []kvcache.Precision{kvcache.F16, kvcache.F32, kvcache.Q8, kvcache.Tiered} {
		t.Run(kv.String(), func(t *testing.T) {
			o := tieredOptions
			o.Threads = 1
			b := openSynth(t, o, "tiny", "Q4_K_M")
			vocab := b.Model().VocabSize
			prompt := make([]tokenizer.ID, 29) // the drafts run past position 32
			for i := range prompt {
				prompt[i] = tokenizer.ID((i*37 + 11) % vocab)
			}
			drafts := []tokenizer.ID{5, 900, 77, 5, 12, 400}
			step := append([]tokenizer.ID{3}, drafts...)

			// One token at a time.
			one := newSeq(t, b, backends.SequenceOptions{MaxLen: 128, KV: kv})
			forward(t, b, backends.Step{Seq: one, Tokens: prompt})
			want := make([]float32, len(step)*vocab)
			for i, tok := range step {
				forward(t, b, backends.Step{Seq: one, Tokens: []tokenizer.ID{tok}, Logits: want[i*vocab : (i+1)*vocab]})
			}

			// The same tokens as one step with drafts.
			seq := newSeq(t, b, backends.SequenceOptions{MaxLen: 128, KV: kv})
			forward(t, b, backends.Step{Seq: seq, Tokens: prompt})
			got := make([]float32, len(step)*vocab)
			forward(t, b, backends.Step{Seq: seq, Tokens: step, Outputs: backends.AllTokens, Logits: got, Draft: len(drafts)})
			for r := range step {
				if !slices.Equal(got[r*vocab:(r+1)*vocab], want[r*vocab:(r+1)*vocab]) {
					t.Fatalf("row %d: the logits of a step with drafts differ from a decode step's", r)
				}
			}
			table := seq.(*sequence).Table
			if c := table.Committed(); c != 0 {
				t.Errorf("%d tokens committed: the block holding the drafts (positions %d … %d) is in the index", c, len(prompt)+1, len(prompt)+len(drafts))
			}
			// Keep two drafts: the sequence then holds prompt, 3, 5, 900.
			keep := len(prompt) + 3
			if err := seq.Truncate(keep); err != nil {
				t.Fatal(err)
			}
			ref := newSeq(t, b, backends.SequenceOptions{MaxLen: 128, KV: kv})
			forward(t, b, backends.Step{Seq: ref, Tokens: append(slices.Clone(prompt), step[:3]...)})
			l1, l2 := make([]float32, vocab), make([]float32, vocab)
			for _, tok := range []tokenizer.ID{8, 9, 10} {
				forward(t, b, backends.Step{Seq: seq, Tokens: []tokenizer.ID{tok}, Logits: l1})
				forward(t, b, backends.Step{Seq: ref, Tokens: []tokenizer.ID{tok}, Logits: l2})
				if kv != kvcache.Tiered && !slices.Equal(l1, l2) {
					// A tiered pool's first block was quantized from
					// exact forms in both, but ref wrote it in one pass.
					t.Fatalf("after the rollback, token %d: logits differ from a sequence that never held the drafts", tok)
				}
			}
			if c := table.Committed(); c != 32 {
				t.Errorf("%d tokens committed after the block filled with kept tokens, want 32", c)
			}
			// The index knows the kept tokens' block, not the drafts'.
			probe := newSeq(t, b, backends.SequenceOptions{MaxLen: 128, KV: kv})
			if n := probe.Reuse(append(slices.Clone(prompt), step...), len(prompt)+len(step)); n > keep {
				t.Errorf("a prompt of the rejected drafts reuses %d cached tokens, more than the %d kept", n, keep)
			}
		})
	}
}

// TestDraftStepAllocatesNothing: verifying drafts is a decode step, which
// allocates nothing, beside a plain decode step of another sequence.
func TestDraftStepAllocatesNothing(t *testing.T) {
	for _, threads := range []int{1, 2} {
		t.Run(fmt.Sprint(threads), func(t *testing.T) {
			b := openSynth(t, backends.Options{Threads: threads}, "tiny", "Q4_K_M")
			vocab := b.Model().VocabSize
			s1 := newSeq(t, b, backends.SequenceOptions{MaxLen: 512})
			s2 := newSeq(t, b, backends.SequenceOptions{MaxLen: 512})
			forward(t, b, backends.Step{Seq: s1, Tokens: promptA}, backends.Step{Seq: s2, Tokens: promptB})
			l1, l2 := make([]float32, 5*vocab), make([]float32, vocab)
			steps := []backends.Step{
				{Seq: s1, Tokens: []tokenizer.ID{1, 2, 3, 4, 5}, Outputs: backends.AllTokens, Logits: l1, Draft: 4},
				{Seq: s2, Tokens: []tokenizer.ID{2}, Logits: l2},
			}
			allocs := testing.AllocsPerRun(20, func() {
				n1, n2 := s1.Len(), s2.Len()
				if err := b.Forward(steps); err != nil {
					t.Fatal(err)
				}
				if err := s1.Truncate(n1 + 2); err != nil {
					t.Fatal(err)
				}
				if err := s2.Truncate(n2); err != nil {
					t.Fatal(err)
				}
			})
			if allocs != 0 {
				t.Errorf("a step with drafts allocates %.1f times", allocs)
			}
		})
	}
}

// TestDraftStepChecked: a step whose drafts are not fewer than its tokens
// is refused before anything changes.
func TestDraftStepChecked(t *testing.T) {
	b := openSynth(t, backends.Options{Threads: 1}, "tiny", "Q4_K_M")
	s := newSeq(t, b, backends.SequenceOptions{MaxLen: 64})
	for _, d := range []int{-1, 2, 3} {
		err := b.Forward([]backends.Step{{Seq: s, Tokens: []tokenizer.ID{1, 2}, Draft: d}})
		if err == nil || s.Len() != 0 {
			t.Errorf("draft %d of 2 tokens: error %v, %d tokens held", d, err, s.Len())
		}
	}
}
