package gorgonia

import (
	"errors"
	"fmt"
	"os"
	"slices"
	"testing"
	"time"

	"github.com/ruvllm/ruvllm/internal/testmodel"
	"github.com/ruvllm/ruvllm/lora"
	"github.com/ruvllm/ruvllm/models"
	"github.com/ruvllm/ruvllm/models/tokenizer"
)

// microFixture is a MicroLoRA trainer of the tiny model over a fresh
// adapter directory.
type microFixture struct {
	m   *MicroLoRA
	reg *lora.Registry
	dir string
	cfg *models.Config
}

func newMicroFixture(t *testing.T, maxResident int, o MicroOptions) *microFixture {
	t.Helper()
	tm := testmodel.Tiny(t)
	dir := t.TempDir()
	reg, err := lora.NewRegistry(lora.RegistryOptions{Dir: dir, Config: tm.Config, Base: tm.File, BaseModel: "tiny", MaxResident: maxResident})
	if err != nil {
		t.Fatal(err)
	}
	m := NewMicroLoRA(tm.File, tm.Config, reg, o)
	t.Cleanup(func() { m.Close() })
	return &microFixture{m: m, reg: reg, dir: dir, cfg: tm.Config}
}

// pair is a preference pair that fits the tiny model's context; long
// makes its prompt longer than the context.
func (f *microFixture) pair(name string, long bool) MicroEvent {
	n := 4
	if long {
		n = f.cfg.ContextLength + 1
	}
	prompt := make([]tokenizer.ID, n)
	for i := range prompt {
		prompt[i] = tokenizer.ID(1 + i%7)
	}
	return MicroEvent{Adapter: name, Objective: Margin, Example: Example{Prompt: prompt, Chosen: []tokenizer.ID{5, 6}, Rejected: []tokenizer.ID{7, 8}}}
}

// files lists the adapter directory.
func (f *microFixture) files(t *testing.T) []string {
	t.Helper()
	entries, err := os.ReadDir(f.dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	return names
}

// waitIdle waits until every accepted event is trained.
func (f *microFixture) waitIdle(t *testing.T) {
	t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for !f.m.Idle() {
		if time.Now().After(deadline) {
			t.Fatal("the trainer did not finish its events")
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestRefusedFeedbackLeavesNothing: feedback refused for its example, for
// a full queue or for the adapter limit creates no file, no adapter and no
// trainer (issue 30: 2,933 refused requests left 3,006 adapter files).
func TestRefusedFeedbackLeavesNothing(t *testing.T) {
	t.Run("example", func(t *testing.T) {
		f := newMicroFixture(t, 4, MicroOptions{})
		if err := f.m.Submit(f.pair("toolong", true)); !errors.Is(err, ErrBadExample) {
			t.Fatalf("error %v, want ErrBadExample", err)
		}
		if got := f.files(t); len(got) != 0 {
			t.Errorf("files %v after a refused example", got)
		}
		if got := f.reg.List(); len(got) != 0 {
			t.Errorf("adapters %v after a refused example", got)
		}
		if _, ok := f.m.Stats("toolong"); ok {
			t.Error("a trainer is held for a refused example")
		}
	})
	t.Run("queue full", func(t *testing.T) {
		// A tiny CPU share: after its first update the trainer rests for
		// long, so the one place in the queue stays taken.
		f := newMicroFixture(t, 4, MicroOptions{Queue: 1, CPUShare: 1e-6})
		if err := f.m.Submit(f.pair("first", false)); err != nil {
			t.Fatal(err)
		}
		f.waitIdle(t)
		if err := f.m.Submit(f.pair("first", false)); err != nil {
			t.Fatal(err)
		}
		before := f.files(t)
		for i := range 20 {
			if err := f.m.Submit(f.pair(fmt.Sprintf("flood%d", i), false)); !errors.Is(err, ErrBusy) {
				t.Fatalf("error %v, want ErrBusy", err)
			}
		}
		if got := f.files(t); !slices.Equal(got, before) {
			t.Errorf("files %v after refused feedback, were %v", got, before)
		}
		if got := len(f.reg.List()); got != 1 {
			t.Errorf("%d adapters after refused feedback, want 1", got)
		}
		f.m.mu.Lock()
		trainers := len(f.m.adapters)
		f.m.mu.Unlock()
		if trainers != 1 {
			t.Errorf("%d trainers held, want 1", trainers)
		}
	})
	t.Run("limit", func(t *testing.T) {
		f := newMicroFixture(t, 4, MicroOptions{MaxAdapters: 2})
		for _, name := range []string{"a", "b", "a"} {
			if err := f.m.Submit(f.pair(name, false)); err != nil {
				t.Fatalf("%s: %v", name, err)
			}
		}
		err := f.m.Submit(f.pair("c", false))
		if !errors.Is(err, ErrTooMany) {
			t.Fatalf("error %v, want ErrTooMany", err)
		}
		if got := f.files(t); !slices.Equal(got, []string{"a.gguf", "b.gguf"}) {
			t.Errorf("files %v, want a.gguf and b.gguf", got)
		}
		f.waitIdle(t)
		if err := f.reg.Delete("a"); err != nil {
			t.Fatal(err)
		}
		if err := f.m.Submit(f.pair("c", false)); err != nil {
			t.Errorf("after a delete, a new adapter: %v", err)
		}
	})
}

// TestMicroLoRAsStayWithinMaxResident: many adapters trained from feedback
// leave at most the registry's MaxResident in memory, trainers and
// adapters alike, once their updates are saved; one dropped trains on from
// its file.
func TestMicroLoRAsStayWithinMaxResident(t *testing.T) {
	const maxResident = 2
	f := newMicroFixture(t, maxResident, MicroOptions{MaxAdapters: 8, SaveEvery: 10 * time.Millisecond})
	names := []string{"n0", "n1", "n2", "n3", "n4", "n5"}
	for _, name := range names {
		if err := f.m.Submit(f.pair(name, false)); err != nil {
			t.Fatal(err)
		}
	}
	f.waitIdle(t)
	deadline := time.Now().Add(time.Minute)
	for {
		resident := 0
		for _, in := range f.reg.List() {
			if in.Resident {
				resident++
			}
		}
		f.m.mu.Lock()
		trainers := len(f.m.adapters)
		f.m.mu.Unlock()
		if resident <= maxResident && trainers <= maxResident {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d adapters and %d trainers in memory, want at most %d", resident, trainers, maxResident)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if got := len(f.reg.List()); got != len(names) {
		t.Errorf("%d adapters registered, want %d", got, len(names))
	}
	st0, _ := f.reg.Get("n0")
	if err := f.m.Submit(f.pair("n0", false)); err != nil {
		t.Fatal(err)
	}
	f.waitIdle(t)
	st, ok := f.m.Stats("n0")
	if !ok || st.Feedback != st0.Training.Feedback+1 {
		t.Errorf("n0 after it was dropped: %+v, want its feedback count %d continued", st, st0.Training.Feedback)
	}
}
