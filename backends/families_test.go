package backends_test

import (
	"errors"
	"math"
	"strings"
	"testing"

	"github.com/ruvllm/ruvllm/backends"
	_ "github.com/ruvllm/ruvllm/backends/gorgonia" // every backend of the repository, opened by name
	"github.com/ruvllm/ruvllm/internal/testmodel"
	"github.com/ruvllm/ruvllm/models"
	"github.com/ruvllm/ruvllm/models/tokenizer"
)

// TestFamiliesEveryBackend walks every architecture package models
// describes against every backend: each backend either runs the
// architecture's tiny shape (a prompt gives finite logits) or refuses it
// with an error that wraps backends.ErrUnsupportedArchitecture and names
// the architecture. A family described in models but registered in no
// backend, or in one and forgotten in another, fails here.
func TestFamiliesEveryBackend(t *testing.T) {
	for _, arch := range models.Architectures() {
		t.Run(arch, func(t *testing.T) {
			s, ok := models.TinyShape(arch)
			if !ok {
				t.Fatalf("models.Shapes has no tiny shape of %s to run it by", arch)
			}
			m := testmodel.Load(t, testmodel.Synth(t, s.Name, "F32"))
			served := 0
			for _, name := range backends.Names() {
				t.Run(name, func(t *testing.T) {
					b, err := backends.Open(name, m, backends.Options{Threads: 1, MaxBatch: 16})
					if errors.Is(err, backends.ErrFileForm) {
						t.Skipf("runs files of another form: %v", err)
					}
					if err != nil {
						if !errors.Is(err, backends.ErrUnsupportedArchitecture) || !strings.Contains(err.Error(), arch) {
							t.Fatalf("neither served nor refused as unsupported by name: %v", err)
						}
						t.Logf("refused: %v", err)
						return
					}
					defer b.Close()
					served++
					seq, err := b.NewSequence(backends.SequenceOptions{MaxLen: 32})
					if err != nil {
						t.Fatal(err)
					}
					defer seq.Close()
					logits := make([]float32, b.Model().VocabSize)
					prompt := []tokenizer.ID{1, 300, 301, 302, 303}
					if err := b.Forward([]backends.Step{{Seq: seq, Tokens: prompt, Logits: logits}}); err != nil {
						t.Fatal(err)
					}
					for i, l := range logits {
						if math.IsNaN(float64(l)) || math.IsInf(float64(l), 0) {
							t.Fatalf("logit %d is %g", i, l)
						}
					}
				})
			}
			if served == 0 {
				t.Errorf("no backend runs %s", arch)
			}
		})
	}
}
