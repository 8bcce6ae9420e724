package native

import (
	"fmt"
	"math"

	"github.com/ruvllm/ruvllm/backends"
	"github.com/ruvllm/ruvllm/kernels"
	"github.com/ruvllm/ruvllm/kvcache"
	"github.com/ruvllm/ruvllm/models"
	"github.com/ruvllm/ruvllm/models/gguf"
)

// logitsChunk is how many output rows the output projection computes at
// once: enough to read the large output matrix once for many decode tokens,
// few enough that the buffer stays small with a 150k vocabulary.
const logitsChunk = 16

// Backend runs one model from its file mapping. It implements
// backends.Backend; like any Backend it is driven by one goroutine at a time.
type Backend struct {
	cfg       *models.Config
	w         *weights
	block     blockFunc // the architecture's transformer block
	pool      *kernels.Pool
	rope      kernels.Rope
	maxBatch  int
	buf       buffers
	attnJob   attnJob
	swigluJob swigluJob
	// kv are the KV pools by precision, made by the first sequence of
	// each; kvBytes and kvTokens size them.
	kv       [2]*kvcache.Pool
	kvBytes  int64
	kvTokens int
	// attnScale is llama.cpp's 1.0f/sqrtf(head_dim), the root rounded first.
	attnScale float32
	call      uint64 // number of the current Forward, to find repeated sequences
	closed    bool
	// byName finds the matrices an adapter may update; made by the first
	// SetAdapter.
	byName map[string]*matrix
	// tap, when set (by tests), sees the activations at named points of
	// every pass; see observe.
	tap func(point string, layer int, x []float32)
}

var _ backends.Backend = (*Backend)(nil)

func init() {
	backends.Register("native", func(m *models.Model, o backends.Options) (backends.Backend, error) {
		return New(m.File, m.Config, o)
	})
}

// New prepares a backend for the model in f, described by cfg (from
// models.ReadConfig). The weights are used in place: f must stay open until
// the backend is closed.
func New(f *gguf.File, cfg *models.Config, opt backends.Options) (*Backend, error) {
	if cfg.HeadDimV != cfg.HeadDim {
		return nil, fmt.Errorf("native: value head size %d differs from key head size %d, which is not supported", cfg.HeadDimV, cfg.HeadDim)
	}
	if cfg.ContextLength <= 0 {
		return nil, fmt.Errorf("native: context length %d must be positive", cfg.ContextLength)
	}
	if opt.Threads < 0 || opt.MaxBatch < 0 || opt.KVBytes < 0 || opt.KVTokens < 0 {
		return nil, fmt.Errorf("native: threads %d, max batch %d, KV bytes %d and KV tokens %d must not be negative",
			opt.Threads, opt.MaxBatch, opt.KVBytes, opt.KVTokens)
	}
	block, ok := blocks[cfg.Arch]
	if !ok || cfg.Architecture() == nil {
		return nil, fmt.Errorf("native: architecture %q has no block in this backend", cfg.Arch)
	}
	w, err := loadWeights(f, cfg)
	if err != nil {
		return nil, err
	}
	b := &Backend{
		cfg:      cfg,
		w:        w,
		block:    block,
		maxBatch: opt.MaxBatch,
		kvBytes:  opt.KVBytes,
		kvTokens: opt.KVTokens,
		rope: kernels.Rope{
			Dims:        cfg.RopeDim,
			Base:        cfg.RopeBase,
			FreqScale:   cfg.RopeScale,
			NeoX:        cfg.Rope == models.RopeNeoX,
			FreqFactors: w.global.vec(models.RopeFreqs),
		},
	}
	b.attnJob.b = b
	b.swigluJob.b = b
	b.attnScale = 1 / float32(math.Sqrt(float64(cfg.HeadDim)))
	if b.maxBatch == 0 {
		b.maxBatch = backends.DefaultBatch
	}
	if err := b.buf.size(cfg, w, b.maxBatch); err != nil {
		return nil, err
	}
	b.pool = kernels.NewPool(opt.Threads)
	return b, nil
}

// Model describes the loaded model.
func (b *Backend) Model() backends.ModelInfo {
	return backends.ModelInfo{
		Arch:          b.cfg.Arch,
		Name:          b.cfg.Name,
		VocabSize:     b.cfg.VocabSize,
		Dim:           b.cfg.Dim,
		Layers:        b.cfg.Layers,
		ContextLength: b.cfg.ContextLength,
	}
}

// Threads is the number of threads a forward pass uses.
func (b *Backend) Threads() int { return b.pool.Size() }

// Close stops the backend's threads. The file is the caller's to close.
func (b *Backend) Close() error {
	if b.closed {
		return nil
	}
	b.closed = true
	b.pool.Close()
	return nil
}

// buffers are the activations of one internal pass of up to maxBatch tokens,
// allocated once. Row t of each belongs to token t of the pass.
type buffers struct {
	x      []float32     // (batch, dim): the residual stream
	xn     []float32     // (batch, dim): normalised input of a projection
	q      []float32     // (batch, heads*head_dim)
	k, v   []float32     // (batch, kv_heads*head_dim)
	att    []float32     // (batch, heads*head_dim): attention output
	proj   []float32     // (batch, dim): output of attn_output and ffn_down
	gate   []float32     // (batch, ffn)
	up     []float32     // (batch, ffn)
	cos    []float32     // (batch, rope_dim/2): RoPE angles of each token's position
	sin    []float32     // (batch, rope_dim/2)
	logits []float32     // (logitsChunk, vocab)
	quant  []byte        // activations quantized for one matrix product
	segs   []segment     // (batch): the runs of consecutive tokens of one sequence
	rowSeg []int32       // (batch): the segment of each row
	outs   []outRow      // (batch): the tokens that produce outputs
	attn   []attnScratch // (threads); grows with the longest sequence
	// runs (≤ batch) are the runs of rows of a pass that share an adapter;
	// outRuns (≤ logitsChunk) those of a chunk of output rows.
	runs, outRuns []adapterRun
	loraScratch   []float32 // (batch, largest adapter rank): A·x; grown by SetAdapter
}

// size allocates the buffers for batches of n tokens.
func (bf *buffers) size(cfg *models.Config, w *weights, n int) error {
	qDim, kvDim := cfg.Heads*cfg.HeadDim, cfg.KVHeads*cfg.HeadDim
	floats := float64(n) * float64(3*cfg.Dim+2*qDim+2*kvDim+2*cfg.FFN+cfg.RopeDim)
	if floats*4 > 1<<36 {
		return fmt.Errorf("native: a batch of %d tokens needs %.0f bytes of activations", n, floats*4)
	}
	bf.x = make([]float32, n*cfg.Dim)
	bf.xn = make([]float32, n*cfg.Dim)
	bf.q = make([]float32, n*qDim)
	bf.k = make([]float32, n*kvDim)
	bf.v = make([]float32, n*kvDim)
	bf.att = make([]float32, n*qDim)
	bf.proj = make([]float32, n*cfg.Dim)
	bf.gate = make([]float32, n*cfg.FFN)
	bf.up = make([]float32, n*cfg.FFN)
	bf.cos = make([]float32, n*cfg.RopeDim/2)
	bf.sin = make([]float32, n*cfg.RopeDim/2)
	bf.logits = make([]float32, min(n, logitsChunk)*cfg.VocabSize)
	quant := 0
	for _, m := range w.matrices() {
		s := kernels.MatScratchBytes(m.typ, m.cols, n)
		if s < 0 {
			return fmt.Errorf("native: tensor %s (%v, %d columns) has no dot product", m.name, m.typ, m.cols)
		}
		quant = max(quant, s)
	}
	bf.quant = make([]byte, quant)
	bf.segs = make([]segment, 0, n)
	bf.rowSeg = make([]int32, n)
	bf.outs = make([]outRow, 0, n)
	bf.runs = make([]adapterRun, 0, n)
	bf.outRuns = make([]adapterRun, 0, min(n, logitsChunk))
	return nil
}
