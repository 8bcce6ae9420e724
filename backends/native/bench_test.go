package native

import (
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/ruvllm/ruvllm/backends"
	"github.com/ruvllm/ruvllm/internal/testmodel"
	"github.com/ruvllm/ruvllm/models/tokenizer"
)

var benchModels = [][]string{
	{"models", "stories260K.gguf"},
	{"models", "mini", "mini-llama-Q4_K_M.gguf"},
	{"models", "mini", "mini-llama-Q8_0.gguf"},
}

// BenchmarkForward measures prefill (a 128-token prompt in one call) and
// decode (one token per call, with up to 256 tokens of context) throughput
// in tokens per second.
func BenchmarkForward(b *testing.B) {
	for _, m := range benchModels {
		for _, threads := range []int{1, 2} {
			be := open(b, backends.Options{Threads: threads}, m...)
			benchPromptAndDecode(b, be, fmt.Sprintf("%s/threads=%d", m[len(m)-1], threads))
		}
	}
}

// BenchmarkFamilies measures each family's block against a llama of the
// same size (synth's real shapes, Q4_K_M, written once into the test
// models' cache: a few minutes each the first time): a 128-token prompt and
// decode steps, on one thread, in tokens/s and in CPU time per token
// (user + system time of the process over the timed loop), which other
// work on a shared machine disturbs far less than the wall clock. The
// llama has the same matrices (Phi-3's fused ones split), so the ratio of
// the two is the families' cost per parameter relative to llama's.
func BenchmarkFamilies(b *testing.B) {
	for _, shape := range []string{"qwen3-0.6b", "gemma-3-1b", "phi-3-mini", "gemma-2-2b"} {
		// The files are made inside the shape's run, so that -bench
		// selects which are written.
		b.Run(shape, func(b *testing.B) {
			for _, arch := range []string{"", "llama"} {
				be, _, cfg := openFile(b, testmodel.SynthAs(b, shape, arch, "Q4_K_M"), backends.Options{Threads: 1, KVTokens: 256})
				benchPromptAndDecode(b, be, cfg.Arch)
			}
		})
	}
}

// benchPromptAndDecode runs be under name: a 128-token prompt, then decode
// steps in a context of 256, in tokens/s and CPU time per token.
func benchPromptAndDecode(b *testing.B, be *Backend, name string) {
	const prompt, ctx = 128, 256
	vocab := be.Model().VocabSize
	logits := make([]float32, vocab)
	toks := make([]tokenizer.ID, prompt)
	for i := range toks {
		toks[i] = tokenizer.ID((i*7 + 1) % vocab)
	}
	seq := newSeq(b, be, backends.SequenceOptions{MaxLen: ctx})
	b.Run(name+"/prefill", func(b *testing.B) {
		cpu := cpuTime()
		for b.Loop() {
			seq.Reset()
			forward(b, be, backends.Step{Seq: seq, Tokens: toks, Logits: logits})
		}
		b.ReportMetric(float64(prompt*b.N)/b.Elapsed().Seconds(), "tokens/s")
		b.ReportMetric((cpuTime()-cpu).Seconds()*1e3/float64(prompt*b.N), "cpu-ms/token")
	})
	b.Run(name+"/decode", func(b *testing.B) {
		seq.Reset()
		step := []backends.Step{{Seq: seq, Tokens: []tokenizer.ID{1}, Logits: logits}}
		cpu := cpuTime()
		for b.Loop() {
			if seq.Len() == ctx {
				seq.Reset()
			}
			if err := be.Forward(step); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "tokens/s")
		b.ReportMetric((cpuTime()-cpu).Seconds()*1e3/float64(b.N), "cpu-ms/token")
	})
}

// BenchmarkSparseAgainstDense times the tinyllama-1.1b shape (synthesized,
// random weights; sparsified as the tests sparsify) against its dense file
// in one run: each iteration runs one step on the dense file and one on
// the sparsified file at a level, one after the other, so that the
// machine's drift (2 shared vCPUs) hits both alike. It reports both speeds
// and their ratio (x-dense): decode one token per step with up to 256
// tokens of context, decode4 four sequences a step (a token each), prefill
// a 128-token prompt.
func BenchmarkSparseAgainstDense(b *testing.B) {
	const prompt, ctx = 128, 256
	for _, ft := range []string{"Q8_0", "Q4_0"} {
		path := testmodel.Synth(b, "tinyllama-1.1b", ft)
		sparsePath := sparsify(b, path)
		for _, threads := range []int{1, 2} {
			opt := backends.Options{Threads: threads, MaxBatch: prompt, KVTokens: 2 * ctx}
			dense, _, _ := openFile(b, path, opt)
			toks := make([]tokenizer.ID, prompt)
			for i := range toks {
				toks[i] = tokenizer.ID((i*7 + 1) % dense.Model().VocabSize)
			}
			for _, level := range []float64{0.25, 0.4, 0.5, 0.6} {
				o := opt
				o.Sparsity = level
				sp := openSparse(b, sparsePath, o)
				bes := [2]*Backend{dense, sp}
				var seqs [2]backends.Sequence
				for i, be := range bes {
					seqs[i] = newSeq(b, be, backends.SequenceOptions{MaxLen: ctx})
				}
				logits := make([]float32, dense.Model().VocabSize)
				name := fmt.Sprintf("%s/threads=%d/sparsity=%.2f", ft, threads, level)
				b.Run(name+"/decode", func(b *testing.B) {
					var took [2]time.Duration
					for i := range seqs {
						seqs[i].Reset()
					}
					for b.Loop() {
						for i, be := range bes {
							if seqs[i].Len() == ctx {
								seqs[i].Reset()
							}
							start := time.Now()
							forward(b, be, backends.Step{Seq: seqs[i], Tokens: toks[:1], Logits: logits})
							took[i] += time.Since(start)
						}
					}
					reportAgainstDense(b, took, b.N)
				})
				if level == 0.5 {
					b.Run(name+"/decode4", func(b *testing.B) {
						// 4 sequences a step, a token each, as a server
						// decoding 4 requests at once.
						var took [2]time.Duration
						batch := [2][]backends.Step{}
						for i, be := range bes {
							for range 4 {
								s := newSeq(b, be, backends.SequenceOptions{MaxLen: ctx})
								defer s.Close()
								batch[i] = append(batch[i], backends.Step{Seq: s, Tokens: toks[:1], Logits: make([]float32, len(logits))})
							}
						}
						for b.Loop() {
							for i, be := range bes {
								for _, st := range batch[i] {
									if st.Seq.Len() == ctx {
										st.Seq.Reset()
									}
								}
								start := time.Now()
								forward(b, be, batch[i]...)
								took[i] += time.Since(start)
							}
						}
						reportAgainstDense(b, took, 4*b.N)
					})
					b.Run(name+"/prefill", func(b *testing.B) {
						var took [2]time.Duration
						for b.Loop() {
							for i, be := range bes {
								seqs[i].Reset()
								start := time.Now()
								forward(b, be, backends.Step{Seq: seqs[i], Tokens: toks, Logits: logits})
								took[i] += time.Since(start)
							}
						}
						reportAgainstDense(b, took, prompt*b.N)
					})
				}
				for _, s := range seqs {
					s.Close()
				}
				sp.Close()
			}
		}
	}
}

// reportAgainstDense reports the tokens/s of the dense (took[0]) and the
// sparse (took[1]) runs of tokens each, and their ratio.
func reportAgainstDense(b *testing.B, took [2]time.Duration, tokens int) {
	b.ReportMetric(float64(tokens)/took[0].Seconds(), "dense-tokens/s")
	b.ReportMetric(float64(tokens)/took[1].Seconds(), "sparse-tokens/s")
	b.ReportMetric(took[0].Seconds()/took[1].Seconds(), "x-dense")
}

// BenchmarkRepack measures decode (and prefill, which does not use the
// packed copies) on one thread with the packed copies of the 4-bit weights
// (the default) and with the file's layout only (NoRepack), one after the
// other in each run, in tokens/s and CPU time per token.
func BenchmarkRepack(b *testing.B) {
	for _, shape := range []string{"llama-134m", "tinyllama-1.1b"} {
		for _, ft := range []string{"Q4_0", "Q4_K_M"} {
			b.Run(shape+"-"+ft, func(b *testing.B) {
				path := testmodel.Synth(b, shape, ft)
				for _, noRepack := range []bool{false, true} {
					be, _, _ := openFile(b, path, backends.Options{Threads: 1, KVTokens: 256, NoRepack: noRepack})
					benchPromptAndDecode(b, be, fmt.Sprintf("norepack=%v", noRepack))
				}
			})
		}
	}
}

// BenchmarkBatch measures the cost of a decode step of n sequences (a token
// each, as a server decoding n requests at once) against a step of one, on
// one thread: each iteration runs a step of one sequence and a step of n,
// one after the other, so that the machine's drift hits both alike, timed
// by the wall clock and by the thread's CPU time (which other work on a
// shared machine disturbs far less). It reports ms per step of each and
// x-one, the n-step's time over the one-step's (n/x-one is what n streams
// gain over one), by both clocks.
func BenchmarkBatch(b *testing.B) {
	const ctx = 256
	for _, shape := range []string{"llama-134m", "tinyllama-1.1b"} {
		for _, ft := range []string{"Q4_0", "Q4_K_M", "Q5_K_M", "Q6_K", "Q8_0"} {
			b.Run(shape+"-"+ft, func(b *testing.B) {
				be, _, _ := openFile(b, testmodel.Synth(b, shape, ft), backends.Options{Threads: 1, KVTokens: 32 * ctx})
				vocab := be.Model().VocabSize
				var steps []backends.Step
				for range 17 {
					s := newSeq(b, be, backends.SequenceOptions{MaxLen: ctx})
					b.Cleanup(func() { s.Close() })
					steps = append(steps, backends.Step{Seq: s, Tokens: []tokenizer.ID{1}, Logits: make([]float32, vocab)})
				}
				for _, n := range []int{2, 4, 8, 16} {
					b.Run(fmt.Sprintf("n=%d", n), func(b *testing.B) {
						runtime.LockOSThread()
						defer runtime.UnlockOSThread()
						one, many := steps[:1], steps[1:1+n]
						var took, cpu [2]time.Duration
						for b.Loop() {
							for i, batch := range [][]backends.Step{one, many} {
								for _, st := range batch {
									if st.Seq.Len() == ctx {
										st.Seq.Reset()
									}
								}
								start, c := time.Now(), threadCPU()
								forward(b, be, batch...)
								took[i] += time.Since(start)
								cpu[i] += threadCPU() - c
							}
						}
						b.ReportMetric(cpu[0].Seconds()*1e3/float64(b.N), "cpu-ms/step-1")
						b.ReportMetric(cpu[1].Seconds()*1e3/float64(b.N), "cpu-ms/step-n")
						b.ReportMetric(cpu[1].Seconds()/cpu[0].Seconds(), "cpu-x-one")
						b.ReportMetric(took[1].Seconds()/took[0].Seconds(), "x-one")
					})
				}
			})
		}
	}
}
