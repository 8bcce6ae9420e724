package native

import (
	"cmp"
	"fmt"

	"github.com/ruvllm/ruvllm/backends"
	"github.com/ruvllm/ruvllm/kernels"
	"github.com/ruvllm/ruvllm/kvcache"
	"github.com/ruvllm/ruvllm/models"
	"github.com/ruvllm/ruvllm/models/gguf"
	"github.com/ruvllm/ruvllm/neuralfield"
	"github.com/ruvllm/ruvllm/sparse"
)

// logitsChunk is how many output rows the output projection computes at
// once: enough to read the large output matrix once for many decode tokens,
// few enough that the buffer stays small with a 150k vocabulary.
const logitsChunk = 16

// Backend runs one model from its file mapping. It implements
// backends.Backend; like any Backend it is driven by one goroutine at a time.
type Backend struct {
	cfg      *models.Config
	w        *weights
	fam      family // the architecture's block and hooks
	pool     *kernels.Pool
	maxBatch int
	buf      buffers
	attnJob  attnJob
	gluJob   gluJob
	// moeLayers are the experts of each block of a mixture of experts
	// (nil for a dense model), moe their pass's buffers (moe.go).
	moeLayers []moeLayer
	moe       moeBuffers
	// rotary are the model's RoPEs with the angles of each row of a pass:
	// one, another for the sliding-window layers when their base or scale
	// differs (Gemma 3), or one with LongRoPE's long factors for sequences
	// longer than the original context (Phi-3.5, Phi-4-mini: longRotary,
	// 0 when the model has none); layerRotary is each layer's.
	rotary      []rotary
	layerRotary []int
	longRotary  int
	// kv are the KV pools by precision, made by the first sequence of
	// each; kvBytes and kvTokens size them, kvHot, kvWarm and kvSeqs shape
	// the tiered ones.
	kv                    [kvPrecisions]*kvcache.Pool
	kvBytes               int64
	kvTokens              int
	kvHot, kvWarm, kvSeqs int
	call                  uint64 // number of the current Forward, to find repeated sequences
	// kvStore is set when the backend keeps blocks in a store; storeKeys
	// are its pools' keys there.
	kvStore   *kvStore
	storeKeys map[kvcache.Precision]neuralfield.Key
	file      *gguf.File
	// tieredPass is set while the pass holds a row of a tiered pool.
	tieredPass bool
	closed     bool
	// byName finds the matrices an adapter may update; made by the first
	// SetAdapter.
	byName map[string]*matrix
	// tap, when set (by tests), sees the activations at named points of
	// every pass; see observe.
	tap func(point string, layer int, x []float32)
	// moeFFN, when set (by tests), computes the mixture-of-experts
	// sublayer in place of experts: a second way to the same numbers.
	moeFFN func(l, n int, t *tensors, xn, proj []float32, act func(dst, gate, up []float32))
	// inputs, when set, sees the input of every block matrix
	// (ObserveInputs).
	inputs func(layer int, name string, x []float32)
	// sparsity is the level the sparsified matrices run at.
	sparsity float64
}

var (
	_ backends.Backend       = (*Backend)(nil)
	_ backends.DraftVerifier = (*Backend)(nil)
)

// VerifiesDrafts implements backends.DraftVerifier: a step's drafted
// tokens run through the arithmetic of single-token decode steps (forward.go)
// and stay out of the prefix index until they are kept.
func (b *Backend) VerifiesDrafts() bool { return true }

// SparseBackend is the name the native backend registers its sparse run of
// sparsified files under (backends.Open).
const SparseBackend = "native-sparse"

func init() {
	backends.Register("native", func(m *models.Model, o backends.Options) (backends.Backend, error) {
		return New(m.File, m.Config, o)
	})
	backends.Register(SparseBackend, func(m *models.Model, o backends.Options) (backends.Backend, error) {
		return NewSparse(m.File, m.Config, o)
	})
}

// New prepares a backend for the model in f, described by cfg (from
// models.ReadConfig). The weights are used in place: f must stay open until
// the backend is closed. A sparsified file runs with every input kept
// (sparsity 0): the dense model's outputs, its single tokens still skipping
// the columns of exact zeros.
func New(f *gguf.File, cfg *models.Config, opt backends.Options) (*Backend, error) {
	return newBackend(f, cfg, opt, false)
}

// NewSparse is New for a sparsified file run sparsely: the inputs of its
// channel-major matrices are thresholded at level opt.Sparsity (0: the
// file's calibrated level), and a single token's products skip the columns
// of the zeroed inputs. A file that is not sparsified is refused.
func NewSparse(f *gguf.File, cfg *models.Config, opt backends.Options) (*Backend, error) {
	return newBackend(f, cfg, opt, true)
}

func newBackend(f *gguf.File, cfg *models.Config, opt backends.Options, sparsely bool) (*Backend, error) {
	if cfg.HeadDimV != cfg.HeadDim {
		return nil, fmt.Errorf("native: value head size %d differs from key head size %d, which is not supported", cfg.HeadDimV, cfg.HeadDim)
	}
	if cfg.ContextLength <= 0 {
		return nil, fmt.Errorf("native: context length %d must be positive", cfg.ContextLength)
	}
	if opt.Threads < 0 || opt.MaxBatch < 0 || opt.KVBytes < 0 || opt.KVTokens < 0 || opt.KVHotTokens < 0 || opt.KVWarmTokens < 0 || opt.KVSequences < 0 {
		return nil, fmt.Errorf("native: threads %d, max batch %d, KV bytes %d, KV tokens %d, hot %d, warm %d and sequences %d must not be negative",
			opt.Threads, opt.MaxBatch, opt.KVBytes, opt.KVTokens, opt.KVHotTokens, opt.KVWarmTokens, opt.KVSequences)
	}
	fam, err := familyOf(cfg.Arch)
	if err != nil {
		return nil, err
	}
	if cfg.Architecture() == nil {
		return nil, fmt.Errorf("native: architecture %q is not described in package models", cfg.Arch)
	}
	w, err := loadWeights(f, cfg)
	if err != nil {
		return nil, err
	}
	moeLayers, err := loadExperts(f, cfg, w)
	if err != nil {
		return nil, err
	}
	level := 0.0
	if sparsely {
		if level, err = sparseLevel(f, w, opt.Sparsity); err != nil {
			return nil, err
		}
	}
	for _, m := range w.sparseMatrices() {
		if m.threshold, err = m.sparse.Thresholds.At(level); err != nil {
			return nil, fmt.Errorf("native: %s: %w", m.name, err)
		}
	}
	b := &Backend{
		cfg:       cfg,
		w:         w,
		sparsity:  level,
		fam:       fam,
		moeLayers: moeLayers,
		maxBatch:  opt.MaxBatch,
		kvBytes:   opt.KVBytes,
		kvTokens:  opt.KVTokens,
		kvHot:     opt.KVHotTokens,
		kvWarm:    opt.KVWarmTokens,
		kvSeqs:    opt.KVSequences,
		file:      f,
	}
	if err := b.setRotary(); err != nil {
		return nil, err
	}
	if opt.KVStoreDir != "" {
		if opt.KVStoreMax <= 0 {
			return nil, fmt.Errorf("native: a KV store in %s needs a positive size", opt.KVStoreDir)
		}
		b.kvStore = &kvStore{dir: opt.KVStoreDir, max: opt.KVStoreMax}
		b.storeKeys = map[kvcache.Precision]neuralfield.Key{}
	}
	b.attnJob.b = b
	b.gluJob.b = b
	if b.maxBatch == 0 {
		b.maxBatch = backends.DefaultBatch
	}
	if !opt.NoRepack {
		w.stackSparse(cfg.Architecture(), f)
	}
	b.pool = kernels.NewPool(opt.Threads)
	err = b.buf.size(cfg, w, b.maxBatch, b.pool.Size())
	if err == nil {
		err = b.moe.size(cfg, moeLayers, b.maxBatch)
	}
	if err != nil {
		b.pool.Close()
		w.release()
		return nil, err
	}
	for i := range b.rotary {
		b.rotary[i].cos = make([]float32, b.maxBatch*cfg.RopeDim/2)
		b.rotary[i].sin = make([]float32, b.maxBatch*cfg.RopeDim/2)
	}
	if !opt.NoRepack {
		w.repack(b.pool, f, w.global.mat(models.TokenEmbd))
	}
	return b, nil
}

// rotary is one RoPE of a model and the cosines and sines of its angles
// at each row's position in a pass, (batch, rope_dim/2) each.
type rotary struct {
	kernels.Rope
	cos, sin []float32
}

// setRotary sets up the RoPE of every layer as llama.cpp picks it: the
// model's, with frequency factors from rope_freqs.weight (Llama 3), else
// from the rope.scaling keys, else LongRoPE's short ones, whose long ones
// sequences longer than the original context take; and the
// sliding-window layers' own base and scale when they have them.
func (b *Backend) setRotary() error {
	cfg, g := b.cfg, &b.w.global
	long, short := g.vec(models.RopeFactorsLong), g.vec(models.RopeFactorsShort)
	factors := g.vec(models.RopeFreqs)
	if factors == nil {
		factors = cfg.RopeFactors
	}
	if (long == nil) != (short == nil) {
		return fmt.Errorf("native: the model has one of the long and short RoPE factors, not both")
	}
	longRoPE := factors == nil && long != nil
	if longRoPE {
		factors = short
	}
	rope := kernels.Rope{
		Dims:        cfg.RopeDim,
		Base:        cfg.RopeBase,
		FreqScale:   cfg.RopeScale,
		NeoX:        cfg.Rope == models.RopeNeoX,
		FreqFactors: factors,
		AttnFactor:  cfg.RopeAttnFactor,
	}
	yarn(&rope, cfg)
	b.rotary = []rotary{{Rope: rope}}
	b.layerRotary = make([]int, cfg.Layers)
	swa := rope
	swa.Base, swa.FreqScale = cfg.RopeBaseSWA, cfg.RopeScaleSWA
	yarn(&swa, cfg)
	for l := range b.layerRotary {
		if cfg.Windowed(l) && (swa.Base != rope.Base || swa.FreqScale != rope.FreqScale) {
			if len(b.rotary) == 1 {
				b.rotary = append(b.rotary, rotary{Rope: swa})
			}
			b.layerRotary[l] = 1
		}
	}
	if longRoPE {
		if len(b.rotary) > 1 {
			return fmt.Errorf("native: LongRoPE factors with another RoPE in the sliding-window layers are not supported")
		}
		longRope := rope
		longRope.FreqFactors = long
		b.longRotary = len(b.rotary)
		b.rotary = append(b.rotary, rotary{Rope: longRope})
	}
	return nil
}

// yarn sets the YaRN terms of r when the model's RoPE scaling is YaRN's
// (gpt-oss): its correction dims depend on r's base.
func yarn(r *kernels.Rope, cfg *models.Config) {
	if cfg.RopeExtFactor == 0 {
		return
	}
	r.ExtFactor = cfg.RopeExtFactor
	r.CorrDims = kernels.YarnCorrDims(r.Dims, cfg.RopeOrigCtx, cmp.Or(r.Base, 10000), cfg.RopeBetaFast, cfg.RopeBetaSlow)
}

// sparseLevel is the sparsity a sparse run of f uses: asked, or else the
// file's calibrated one.
func sparseLevel(f *gguf.File, w *weights, asked float64) (float64, error) {
	info, ok := sparse.ReadInfo(f)
	if !ok || len(w.sparseMatrices()) == 0 {
		return 0, fmt.Errorf("native: the file is not sparsified (ruvllm-serve sparsify writes one), so it cannot run on %s: %w", SparseBackend, backends.ErrFileForm)
	}
	if asked == 0 {
		return info.Sparsity, nil
	}
	return asked, nil
}

// Sparsity is the level the backend's sparsified matrices run at: 0 when
// every input is kept.
func (b *Backend) Sparsity() float64 { return b.sparsity }

// ObserveInputs makes every matrix of the blocks show f its input, n
// tokens of its columns, before the product (nil: none), so that a
// calibration sees what the projections multiply.
func (b *Backend) ObserveInputs(f func(layer int, name string, x []float32)) { b.inputs = f }

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

// Close stops the backend's threads and frees the copies of the weights it
// made at load (repacked, stacked): nothing may run on it afterwards. The
// file is the caller's to close.
func (b *Backend) Close() error {
	if b.closed {
		return nil
	}
	b.closed = true
	b.pool.Close()
	b.w.release()
	if b.kvStore != nil && b.kvStore.store != nil {
		// Writes the pages still queued.
		return b.kvStore.store.Close()
	}
	return nil
}

// buffers are the activations of one internal pass of up to maxBatch tokens,
// allocated once. Row t of each belongs to token t of the pass.
type buffers struct {
	x      []float32     // (batch, dim): the residual stream
	xn     []float32     // (batch, dim): normalised input of a projection
	q      []float32     // (batch, heads*head_dim)
	k, v   []float32     // (batch, kv_heads*head_dim)
	qkv    []float32     // (batch, rows of attn_qkv): nil without fused q, k, v
	att    []float32     // (batch, heads*head_dim): attention output
	proj   []float32     // (batch, dim): output of attn_output and ffn_down
	gate   []float32     // (batch, ffn)
	up     []float32     // (batch, rows of ffn_up): ffn, or 2·ffn with the gate fused in
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
	sparse        sparse.Scratch
	thresholded   []float32 // (batch, largest cols): a calibration's thresholded input
}

// size allocates the buffers for batches of n tokens on threads threads.
func (bf *buffers) size(cfg *models.Config, w *weights, n, threads int) error {
	qDim, kvDim := cfg.Heads*cfg.HeadDim, cfg.KVHeads*cfg.HeadDim
	qkvRows, upRows := 0, 0
	for i := range w.blocks {
		if m := w.blocks[i].mat(models.AttnQKV); m != nil {
			qkvRows = max(qkvRows, m.rows)
		}
		if m := w.blocks[i].mat(models.FFNUp); m != nil {
			upRows = max(upRows, m.rows)
		}
	}
	floats := float64(n) * float64(3*cfg.Dim+2*qDim+2*kvDim+qkvRows+cfg.FFN+upRows+2*cfg.RopeDim)
	if floats*4 > 1<<36 {
		return fmt.Errorf("native: a batch of %d tokens needs %.0f bytes of activations", n, floats*4)
	}
	bf.x = make([]float32, n*cfg.Dim)
	bf.xn = make([]float32, n*cfg.Dim)
	bf.q = make([]float32, n*qDim)
	bf.k = make([]float32, n*kvDim)
	bf.v = make([]float32, n*kvDim)
	if qkvRows > 0 {
		bf.qkv = make([]float32, n*qkvRows)
	}
	bf.att = make([]float32, n*qDim)
	bf.proj = make([]float32, n*cfg.Dim)
	bf.gate = make([]float32, n*cfg.FFN)
	bf.up = make([]float32, n*upRows)
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
	for _, m := range w.sparseMatrices() {
		bf.sparse.Fit(m.sparse, n, threads)
	}
	for _, st := range w.stacks() {
		bf.sparse.Fit(st.m.sparse, n, threads)
	}
	bf.segs = make([]segment, 0, n)
	bf.rowSeg = make([]int32, n)
	bf.outs = make([]outRow, 0, n)
	bf.runs = make([]adapterRun, 0, n)
	bf.outRuns = make([]adapterRun, 0, min(n, logitsChunk))
	return nil
}

// ThresholdInputs makes each block matrix stored row-major zero the
// entries of its input of magnitude at or below threshold(name) before its
// product (0: none), as a sparsified file's matrices do: the model a
// calibration measures the error of. nil restores the dense model. The
// channel-major matrices of a sparsified file keep their level.
func (b *Backend) ThresholdInputs(threshold func(name string) float32) {
	for _, m := range b.w.matrices() {
		if m.sparse == nil && m.layer >= 0 {
			m.threshold = 0
			if threshold != nil {
				m.threshold = threshold(m.name)
			}
		}
	}
	if threshold != nil && b.buf.thresholded == nil {
		cols := 0
		for _, m := range b.w.matrices() {
			cols = max(cols, m.cols)
		}
		b.buf.thresholded = make([]float32, b.maxBatch*cols)
	}
}
