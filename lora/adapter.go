package lora

import (
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"sort"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/ruvllm/ruvllm/kernels"
	"github.com/ruvllm/ruvllm/models"
	"github.com/ruvllm/ruvllm/models/gguf"
)

// ErrInvalid is wrapped by every error about an adapter's content or its
// fit to the base model: a caller maps it to a client error (HTTP 400).
var ErrInvalid = errors.New("invalid adapter")

// invalidf returns an error wrapping ErrInvalid.
func invalidf(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrInvalid, fmt.Sprintf(format, args...))
}

// Format names the file format an adapter came from.
type Format string

const (
	// FormatPEFT is a Hugging Face PEFT directory: adapter_config.json and
	// adapter_model.safetensors.
	FormatPEFT Format = "peft"
	// FormatGGUF is a llama.cpp GGUF LoRA file.
	FormatGGUF Format = "gguf"
)

// Target is the low-rank update of one weight matrix W (out, in) of the base
// model: W' = W + Scale·B·A.
type Target struct {
	// Name is the GGUF name of W, as "blk.3.attn_q.weight".
	Name    string
	Rank    int
	In, Out int
	// Scale is alpha/Rank (alpha/√Rank with rsLoRA); a GGUF file whose
	// alpha is 0 means 1, as llama.cpp reads it.
	Scale float32
	// A (Rank, In) is the down-projection, row-major as PEFT's lora_A.
	A []float32
	// bt (Rank, Out) is B (Out, Rank) transposed, so that B·t is Rank
	// contiguous axpys over the output row.
	bt []float32
}

// NewTarget makes the update of weight name from A (rank, in) and B
// (out, rank), both row-major as PEFT stores them. The slices are copied.
func NewTarget(name string, in, out, rank int, a, b []float32, scale float32) (*Target, error) {
	if in <= 0 || out <= 0 || rank <= 0 {
		return nil, invalidf("%s: in %d, out %d and rank %d must be positive", name, in, out, rank)
	}
	if len(a) != rank*in || len(b) != out*rank {
		return nil, invalidf("%s: A has %d values and B %d, want %d×%d and %d×%d", name, len(a), len(b), rank, in, out, rank)
	}
	if math.IsNaN(float64(scale)) || math.IsInf(float64(scale), 0) {
		return nil, invalidf("%s: scale %v is not finite", name, scale)
	}
	t := &Target{Name: name, Rank: rank, In: in, Out: out, Scale: scale, A: append([]float32(nil), a...), bt: make([]float32, rank*out)}
	for o := range out {
		for k := range rank {
			t.bt[k*out+o] = b[o*rank+k]
		}
	}
	return t, nil
}

// B returns B (Out, Rank) in a new slice.
func (t *Target) B() []float32 {
	b := make([]float32, t.Out*t.Rank)
	for k := range t.Rank {
		for o := range t.Out {
			b[o*t.Rank+k] = t.bt[k*t.Out+o]
		}
	}
	return b
}

// Adapter is a loaded LoRA adapter: the updates of some of a base model's
// weight matrices. It is read-only once made, so any number of forward
// passes may use it at once.
type Adapter struct {
	// Name is the adapter's name in a registry; may be empty.
	Name string
	// Arch is the architecture the adapter was made for ("llama", "qwen2"),
	// or "" when its file does not say.
	Arch string
	// Alpha is lora_alpha (adapter.lora.alpha of a GGUF file).
	Alpha float32
	// RSLoRA marks rank-stabilised scaling, alpha/√rank.
	RSLoRA bool
	// Format is the file format the adapter was read from.
	Format Format
	// Training, when set, says the adapter is a MicroLoRA trained online
	// from feedback, and how far; a GGUF file carries it in its metadata.
	Training *Training

	targets map[string]*Target
	order   []string // target names, sorted
	maxRank int
	id      uint64

	digestOnce sync.Once
	digest     [32]byte
}

// Training is the state of an adapter trained online from feedback.
type Training struct {
	// Version counts the adapter's published versions; each update of its
	// factors makes a new one.
	Version int64 `json:"version"`
	// Feedback counts the feedback events received, Updates those trained
	// into the adapter.
	Feedback int64 `json:"feedback"`
	Updates  int64 `json:"updates"`
	// Loss is the objective's loss at the last update.
	Loss float64 `json:"loss"`
	// State is the trainer's state beside the factors (its optimiser's
	// moments, its penalty's anchor and Fisher estimate), saved with the
	// adapter so that a restarted server continues training where it
	// stopped rather than with a new optimiser; nil when not kept.
	State *TrainState `json:"-"`
}

// TrainState is a trainer's state, which this package stores and reads
// without interpreting it: named arrays and scalars. A GGUF file carries
// them in its metadata (ruvllm.micro_lora.state.NAME, arrays of float32,
// and ruvllm.micro_lora.scalar.NAME, float64), which other readers, such
// as llama.cpp's --lora, ignore.
type TrainState struct {
	Arrays  map[string][]float32
	Scalars map[string]float64
}

// lastID numbers the adapters New makes.
var lastID atomic.Uint64

// ID is a number no other adapter of this process has: caches key what an
// adapter computed by it, where a name may be reused by a new upload and a
// pointer by a new allocation.
func (a *Adapter) ID() uint64 { return a.id }

// Digest is the SHA-256 of what the adapter computes (each update's weight
// name, shape, scale and matrices, in name order): the same for an
// adapter loaded again, or in another process, from the same files. Caches
// that outlive the process (spilled KV blocks) key on it where ID would not
// survive a restart.
func (a *Adapter) Digest() [32]byte {
	a.digestOnce.Do(func() {
		h := sha256.New()
		var b [8]byte
		put := func(x uint32) {
			binary.LittleEndian.PutUint32(b[:4], x)
			h.Write(b[:4])
		}
		for _, n := range a.order {
			t := a.targets[n]
			put(uint32(len(n)))
			h.Write([]byte(n))
			put(uint32(t.Rank))
			put(uint32(t.In))
			put(uint32(t.Out))
			put(math.Float32bits(t.Scale))
			for _, m := range [][]float32{t.A, t.bt} {
				for _, x := range m {
					put(math.Float32bits(x))
				}
			}
		}
		h.Sum(a.digest[:0])
	})
	return a.digest
}

// New makes an adapter of the given targets, which must name distinct
// weights.
func New(name, arch string, alpha float32, rsLoRA bool, format Format, targets []*Target) (*Adapter, error) {
	a := &Adapter{Name: name, Arch: arch, Alpha: alpha, RSLoRA: rsLoRA, Format: format, targets: map[string]*Target{}, id: lastID.Add(1)}
	for _, t := range targets {
		if _, dup := a.targets[t.Name]; dup {
			return nil, invalidf("two updates of %s", t.Name)
		}
		a.targets[t.Name] = t
		a.order = append(a.order, t.Name)
		a.maxRank = max(a.maxRank, t.Rank)
	}
	if len(a.order) == 0 {
		return nil, invalidf("the adapter updates no weights")
	}
	sort.Strings(a.order)
	return a, nil
}

// Targets lists the updates, sorted by weight name.
func (a *Adapter) Targets() []*Target {
	ts := make([]*Target, len(a.order))
	for i, n := range a.order {
		ts[i] = a.targets[n]
	}
	return ts
}

// Target returns the update of the weight named name.
func (a *Adapter) Target(name string) (*Target, bool) {
	t, ok := a.targets[name]
	return t, ok
}

// Rank is the largest rank of the adapter's updates.
func (a *Adapter) Rank() int { return a.maxRank }

// Bytes is the memory the adapter's matrices take.
func (a *Adapter) Bytes() int64 {
	var n int64
	for _, t := range a.targets {
		n += int64(len(t.A)+len(t.bt)) * 4
	}
	return n
}

// ScratchFloats is the scratch Apply needs for n rows.
func (a *Adapter) ScratchFloats(n int) int { return n * a.maxRank }

// Apply adds scale·s·B·(A·x) to y for the update of weight target, where s
// is the target's own Scale (alpha/rank) and scale the caller's multiplier
// (a request's lora_scale; 1 applies the adapter as trained). x is (n, In),
// y (n, Out), scratch at least ScratchFloats(n) floats. It is a no-op when
// the adapter does not update target, and it does not allocate. Wrong sizes
// panic: they are a bug in the caller.
func (a *Adapter) Apply(target string, x []float32, n int, y []float32, scale float32, scratch []float32) {
	t, ok := a.targets[target]
	if !ok || n == 0 {
		return
	}
	r, in, out := t.Rank, t.In, t.Out
	if len(x) < n*in || len(y) < n*out || len(scratch) < n*r {
		panic(fmt.Sprintf("lora: Apply %s to %d rows: %d inputs (need %d), %d outputs (%d), %d scratch (%d)",
			target, n, len(x), n*in, len(y), n*out, len(scratch), n*r))
	}
	s := t.Scale * scale
	ax := scratch[:n*r] // (n, rank): A·x of every row
	for j := range n {
		xj := x[j*in : (j+1)*in]
		for k := range r {
			ax[j*r+k] = kernels.DotF32(t.A[k*in:(k+1)*in], xj)
		}
	}
	for j := range n {
		yj := y[j*out : (j+1)*out]
		for k := range r {
			kernels.Axpy(s*ax[j*r+k], t.bt[k*out:(k+1)*out], yj)
		}
	}
}

// Validate checks that every update fits the base model: the architecture
// matches, and the weight is a linear layer of the base model's description
// that its file holds with the update's (out, in) shape.
func (a *Adapter) Validate(cfg *models.Config, base *gguf.File) error {
	if a.Arch != "" && a.Arch != cfg.Arch {
		return invalidf("the adapter was made for a %s model, the base model is %s", a.Arch, cfg.Arch)
	}
	for _, name := range a.order {
		t := a.targets[name]
		if _, _, ok := cfg.LinearShape(name); !ok {
			return notLinear(cfg, name)
		}
		ti, ok := models.FindMatrix(base, name)
		if !ok {
			return invalidf("%s is not in the base model (wrong base model?)", name)
		}
		if len(ti.Dims) != 2 || ti.Dims[0] != uint64(t.In) || ti.Dims[1] != uint64(t.Out) {
			return invalidf("%s: the update is (out %d, in %d), the base weight has dims %v (ne: in, out; wrong base model?)", name, t.Out, t.In, ti.Dims)
		}
		if err := t.probe(); err != nil {
			return err
		}
	}
	return nil
}

// maxProbeUpdate bounds the update an adapter may make of an input of unit
// size (RMS 1): a model's activations are of order 1 to 1000, and an
// update far beyond them only breaks the model (every token <unk>).
const maxProbeUpdate = 1e5

// probe refuses an update that is not finite, or absurdly large, on a
// probe input of unit size: such weights load, then turn every activation
// they touch into infinity.
func (t *Target) probe() error {
	// A fixed input of RMS 1 whose signs vary, so that no weights cancel
	// out by the input's symmetry.
	x := make([]float64, t.In)
	for i := range x {
		x[i] = 1
		if (i*7+i/3)%5 < 2 {
			x[i] = -1
		}
	}
	h := make([]float64, t.Rank)
	for k := range t.Rank {
		for i, a := range t.A[k*t.In : (k+1)*t.In] {
			h[k] += float64(a) * x[i]
		}
	}
	worst := 0.0
	for o := range t.Out {
		var d float64
		for k := range t.Rank {
			d += float64(t.bt[k*t.Out+o]) * h[k]
		}
		d *= float64(t.Scale)
		if math.IsNaN(d) || math.Abs(d) > worst {
			worst = math.Abs(d)
			if math.IsNaN(d) {
				worst = math.Inf(1)
			}
		}
	}
	if !(worst <= maxProbeUpdate) {
		return invalidf("%s: the update of an input of unit size reaches %.3g (at most %.0g is sane): the adapter's weights are absurdly large or not finite", t.Name, worst, float64(maxProbeUpdate))
	}
	return nil
}

// notLinear says why name is not a weight an adapter of a model of cfg may
// update.
func notLinear(cfg *models.Config, name string) error {
	r, layer, known := models.ParseTensorName(name)
	switch {
	case known && r == models.Output && cfg.TiedOutput:
		return invalidf("the adapter updates %s (lm_head), but the base model ties it to the token embeddings", name)
	case known && layer >= cfg.Layers && cfg.Architecture().Has(r):
		return invalidf("%s: the base model has %d layers", name, cfg.Layers)
	}
	var kinds []string
	for _, t := range cfg.Architecture().Tensors {
		if t.Role.Spec().Linear {
			kinds = append(kinds, t.Role.Spec().Name)
		}
	}
	return invalidf("%s is not a linear layer an adapter can update in a %s model (%s)", name, cfg.Arch, strings.Join(kinds, ", "))
}

// scaleOf is the factor a LoRA update is applied with: alpha/rank, or
// alpha/√rank with rank-stabilised LoRA.
func scaleOf(alpha float64, rank int, rs bool) float32 {
	if rs {
		return float32(alpha / math.Sqrt(float64(rank)))
	}
	return float32(alpha / float64(rank))
}
