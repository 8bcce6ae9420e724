package native

import (
	"fmt"

	"github.com/ruvllm/ruvllm/kernels"
	"github.com/ruvllm/ruvllm/models"
	"github.com/ruvllm/ruvllm/models/gguf"
	"github.com/ruvllm/ruvllm/sparse"
)

// matrix is a weight matrix viewed in place in the file mapping: rows of cols
// elements of typ, row-major, each row typ.RowBytes(cols) bytes; or, in a
// sparsified file, stored input-channel-major (sparse set, data nil).
type matrix struct {
	name       string // the row-major GGUF name, which adapters address
	typ        kernels.DType
	rows, cols int
	data       []byte
	// sparse is the channel-major matrix of a sparsified file, whose
	// inputs are thresholded at threshold (set by the backend).
	sparse    *sparse.Matrix
	threshold float32
	layer     int // the block, -1 for a whole-model matrix
	// packed, if set, is data repacked with 8 rows side by side
	// (kernels.Interleave): every product reads it, and data is left for
	// the kernel to drop from memory (repack).
	packed []byte
}

// row is the encoded row r.
func (m *matrix) row(r int) []byte {
	rb := m.typ.RowBytes(m.cols)
	return m.data[r*rb : (r+1)*rb]
}

// tensors are the tensors of one block, or the whole-model ones, by role:
// what the architecture's description names and the file holds. A role the
// file lacks (an optional one) has a nil matrix or vector.
type tensors struct {
	mats []*matrix   // (roles)
	vecs [][]float32 // (roles)
	// stacks[r], when set, holds the block's channel-major matrices of the
	// sparse group (models.Architecture.Sparse: the matrices of one input)
	// whose first role is r, stacked: their products run over it. nil
	// without stacks.
	stacks []*stack // (roles)
}

// stack is the stack of the sparse group whose first role is r, nil
// when the block has none.
func (t *tensors) stack(r models.Role) *stack {
	if t.stacks == nil {
		return nil
	}
	return t.stacks[r]
}

// stack is the channel-major matrices of a block that multiply one input,
// stacked into one (sparse.Stack): a decode step reads each input
// channel's weights of all of them in one run and plans the input once.
// The parts keep their names, thresholds and adapters; their outputs are
// the stack's rows, in the group's order.
type stack struct {
	m     *matrix   // the stack (sparse set; rows the parts' sum)
	parts []*matrix // in the group's order, at most maxStackParts
}

// maxStackParts is the most matrices a stack holds: q, k and v.
const maxStackParts = 3

// mat is the matrix of role r, nil when the file has none.
func (t *tensors) mat(r models.Role) *matrix { return t.mats[r] }

// vec is the vector of role r (a norm's weights, a bias), nil when the file
// has none.
func (t *tensors) vec(r models.Role) []float32 { return t.vecs[r] }

// weights are all tensors of a model.
type weights struct {
	global tensors   // token_embd, output_norm, output, rope_freqs, ...
	blocks []tensors // (layers)
	// output projects to logits: the output matrix, or token_embd when the
	// model ties them.
	output *matrix
	// frees release the copies of weights made at load (repack, the
	// stacks), which live outside the Go heap (offHeapBytes).
	frees []func()
}

// release frees the copies of weights made at load; nothing may read them
// afterwards.
func (w *weights) release() {
	for _, f := range w.frees {
		f()
	}
	w.frees = nil
}

// loader reads tensors of f and keeps the first error.
type loader struct {
	f   *gguf.File
	err error
}

func (ld *loader) fail(format string, args ...any) {
	if ld.err == nil {
		ld.err = fmt.Errorf("native: "+format, args...)
	}
}

// matrix views the (rows, cols) matrix name in place.
func (ld *loader) matrix(ti *gguf.TensorInfo, rows, cols int) *matrix {
	name := ti.Name
	if len(ti.Dims) != 2 || ti.Dims[0] != uint64(cols) || ti.Dims[1] != uint64(rows) {
		ld.fail("tensor %s has dims %v, want [%d %d]", name, ti.Dims, cols, rows)
		return nil
	}
	if _, ok := kernels.TraitsOf(ti.Type); !ok {
		ld.fail("tensor %s is %v, which this backend cannot compute with", name, ti.Type)
		return nil
	}
	rb := ti.Type.RowBytes(cols)
	data := ld.f.TensorData(ti)
	if rb < 0 || len(data) != rows*rb {
		ld.fail("tensor %s: %d bytes do not hold %d rows of %d %v elements", name, len(data), rows, cols, ti.Type)
		return nil
	}
	return &matrix{name: name, typ: ti.Type, rows: rows, cols: cols, data: data, layer: -1}
}

// vector reads the n-element vector name: a view of the mapping when it is
// F32, else a dequantized copy (norms and biases are tiny).
func (ld *loader) vector(ti *gguf.TensorInfo, n int) []float32 {
	name := ti.Name
	if ti.Elements() != uint64(n) || len(ti.Dims) == 0 || ti.Dims[0] != uint64(n) {
		ld.fail("tensor %s has dims %v, want [%d]", name, ti.Dims, n)
		return nil
	}
	if ti.Type == kernels.F32 {
		v, err := ld.f.TensorF32(ti)
		if err != nil {
			ld.fail("tensor %s: %v", name, err)
		}
		if len(v) != n {
			ld.fail("tensor %s holds %d floats, want %d", name, len(v), n)
			return nil
		}
		return v
	}
	tr, ok := kernels.TraitsOf(ti.Type)
	data := ld.f.TensorData(ti)
	if !ok || ti.Type.RowBytes(n) != len(data) {
		ld.fail("tensor %s: %v vector of %d elements in %d bytes cannot be read", name, ti.Type, n, len(data))
		return nil
	}
	v := make([]float32, n)
	tr.DequantizeRow(data, v)
	return v
}

// load reads the tensor of spec in block layer into t, checking its shape
// against the description. A matrix a sparsified file stores
// channel-major is read in that form.
func (ld *loader) load(cfg *models.Config, spec models.TensorSpec, layer int, t *tensors) {
	name := models.TensorName(spec.Role, layer)
	shape := spec.Shape(cfg)
	ti, ok := ld.f.Tensor(name)
	if !ok && len(shape) == 2 && cfg.Architecture().Sparsifiable(spec.Role) {
		if m, found := ld.sparseMatrix(spec.Role, layer, shape[0], shape[1]); found {
			t.mats[spec.Role] = m
			return
		}
	}
	if !ok {
		if !spec.Optional {
			ld.fail("tensor %s is missing (%s needs it)", name, cfg.Arch)
		}
		return
	}
	switch len(shape) {
	case 1:
		t.vecs[spec.Role] = ld.vector(ti, shape[0])
	case 2:
		m := ld.matrix(ti, shape[0], shape[1])
		if m != nil && spec.Role.Spec().Block {
			m.layer = layer
		}
		t.mats[spec.Role] = m
	default:
		ld.fail("tensor %s: the %s description gives it shape %v", name, cfg.Arch, shape)
	}
}

// sparseMatrix reads the channel-major (rows, cols) matrix of role r in
// block layer and its thresholds, if the file has them.
func (ld *loader) sparseMatrix(r models.Role, layer, rows, cols int) (*matrix, bool) {
	cmName, thName := models.SparseName(r, layer, models.ChannelMajorSuffix), models.SparseName(r, layer, models.ThresholdsSuffix)
	ti, ok := ld.f.Tensor(cmName)
	if !ok {
		return nil, false
	}
	m := ld.matrix(ti, rows, cols)
	th, ok := ld.f.Tensor(thName)
	if !ok || len(th.Dims) != 1 {
		ld.fail("tensor %s has no thresholds vector %s", cmName, thName)
		return nil, true
	}
	tab := ld.vector(th, int(th.Dims[0]))
	if m == nil || tab == nil {
		return nil, true
	}
	sm, err := sparse.NewMatrix(m.typ, rows, cols, m.data, tab)
	if err != nil {
		ld.fail("tensor %s: %v", cmName, err)
		return nil, true
	}
	m.name, m.data, m.sparse, m.layer = models.TensorName(r, layer), nil, sm, layer
	return m, true
}

// loadWeights views every tensor cfg's architecture names in f, checking its
// shape.
func loadWeights(f *gguf.File, cfg *models.Config) (*weights, error) {
	ld := &loader{f: f}
	roles := models.Roles()
	newTensors := func() tensors { return tensors{mats: make([]*matrix, roles), vecs: make([][]float32, roles)} }
	w := &weights{global: newTensors(), blocks: make([]tensors, cfg.Layers)}
	for l := range w.blocks {
		w.blocks[l] = newTensors()
	}
	for _, spec := range cfg.Architecture().Tensors {
		if !spec.Role.Spec().Block {
			ld.load(cfg, spec, 0, &w.global)
			continue
		}
		for l := range w.blocks {
			ld.load(cfg, spec, l, &w.blocks[l])
		}
	}
	if ld.err != nil {
		return nil, ld.err
	}
	w.output = w.global.mat(cfg.OutputRole())
	if w.global.mat(models.TokenEmbd) == nil || w.output == nil {
		return nil, fmt.Errorf("native: %s describes no token embeddings or output projection", cfg.Arch)
	}
	return w, nil
}

// sparseMatrices lists the matrices stored channel-major.
func (w *weights) sparseMatrices() []*matrix {
	var ms []*matrix
	for _, m := range w.matrices() {
		if m.sparse != nil {
			ms = append(ms, m)
		}
	}
	return ms
}

// stackSparse stacks, in every block, the channel-major matrices of each
// sparse group of arch with more than one role (llama's q, k, v and gate,
// up) into one allocation (sparse.Stack, which refuses parts that do not
// share a thresholds table; those run apart), and drops the file's pages
// of the parts from the resident memory: the stacks replace them.
func (w *weights) stackSparse(arch *models.Architecture, f *gguf.File) {
	type slot struct {
		t     *tensors
		first models.Role
	}
	var groups [][]*matrix
	var slots []slot
	for i := range w.blocks {
		t := &w.blocks[i]
		for _, roles := range arch.Sparse {
			if len(roles) < 2 || len(roles) > maxStackParts {
				continue
			}
			var parts []*matrix
			for _, r := range roles {
				if m := t.mat(r); m != nil && m.sparse != nil {
					parts = append(parts, m)
				}
			}
			if len(parts) == len(roles) {
				groups, slots = append(groups, parts), append(slots, slot{t, roles[0]})
			}
		}
	}
	total := 0
	for _, parts := range groups {
		total += sparse.StackBytes(sparseOf(parts))
	}
	arena, free := offHeapBytes(total)
	w.frees = append(w.frees, free)
	for i, parts := range groups {
		sm := sparseOf(parts)
		n := sparse.StackBytes(sm)
		st, err := sparse.Stack(sm, arena[:n:n])
		if err != nil {
			continue
		}
		arena = arena[n:]
		name := parts[0].name
		for _, p := range parts[1:] {
			name += "+" + p.name
		}
		t := slots[i].t
		if t.stacks == nil {
			t.stacks = make([]*stack, len(t.mats))
		}
		t.stacks[slots[i].first] = &stack{
			m:     &matrix{name: name, typ: st.Type, rows: st.Rows, cols: st.Cols, sparse: st, threshold: parts[0].threshold, layer: parts[0].layer},
			parts: parts,
		}
		for _, p := range parts {
			f.ReleaseRange(p.sparse.Data)
		}
	}
}

// sparseOf lists the channel-major matrices of ms.
func sparseOf(ms []*matrix) []*sparse.Matrix {
	out := make([]*sparse.Matrix, len(ms))
	for i, m := range ms {
		out[i] = m.sparse
	}
	return out
}

// stacks lists every block's stacks.
func (w *weights) stacks() []*stack {
	var out []*stack
	for i := range w.blocks {
		for _, st := range w.blocks[i].stacks {
			if st != nil {
				out = append(out, st)
			}
		}
	}
	return out
}

// hugePage is the size of a transparent huge page on x86-64 and arm64 with
// 4 KiB base pages: the packed copies start on one (offHeapBytes).
const hugePage = 2 << 20

// repack gives every matrix of a format with a packed layout (Q4_0, Q4_K,
// Q5_K) a packed copy, spread over p: decode reads it with the packed
// mat-vec (kernels.MatVecInterleaved, about twice as fast on one thread as
// MatVec)
// and batches and prompts with the packed product
// (kernels.MatMulInterleaved), both equal to the bit to the file's kernels.
// The copies lie in one allocation on huge pages (offHeapBytes), each on a
// cache line of its own. As no product reads the file's bytes of a packed
// matrix again, its pages are released from memory once it is copied
// (gguf.File.ReleaseRange), so that the weights are resident once; the
// rows of a token embedding that is also the output projection are still
// looked up, and keep theirs.
func (w *weights) repack(p *kernels.Pool, f *gguf.File, embd *matrix) {
	var ms []*matrix
	total := 0
	for _, m := range w.matrices() {
		size := kernels.InterleavedBytes(m.typ, m.rows, m.cols)
		if size < 0 || m.sparse != nil { // a channel-major matrix has its own mat-vec
			continue
		}
		ms = append(ms, m)
		total += (size + 63) &^ 63
	}
	arena, free := offHeapBytes(total)
	w.frees = append(w.frees, free)
	for _, m := range ms {
		size := kernels.InterleavedBytes(m.typ, m.rows, m.cols)
		m.packed, arena = arena[:size:size], arena[(size+63)&^63:]
		const rowsPerTask = 256 // a multiple of the 8 rows of a group
		rb := m.typ.RowBytes(m.cols)
		p.Run((m.rows+rowsPerTask-1)/rowsPerTask, kernels.JobFunc(func(task, _ int) {
			r0, r1 := task*rowsPerTask, min((task+1)*rowsPerTask, m.rows)
			at := kernels.InterleavedBytes(m.typ, r0, m.cols) // r0 is a multiple of 8
			kernels.Interleave(m.typ, m.packed[at:at+kernels.InterleavedBytes(m.typ, r1-r0, m.cols)], m.data[r0*rb:r1*rb], r1-r0, m.cols)
		}))
		if m != embd {
			f.ReleaseRange(m.data)
		}
	}
}

// matrices lists every matrix a forward pass multiplies by, for sizing
// scratch and finding adapters' targets: the output projection and every
// block's matrices (not token_embd, whose rows are only looked up, unless it
// is the output).
func (w *weights) matrices() []*matrix {
	ms := []*matrix{w.output}
	for _, ts := range append([]tensors{w.global}, w.blocks...) {
		for r, m := range ts.mats {
			if m != nil && m != w.output && models.Role(r) != models.TokenEmbd {
				ms = append(ms, m)
			}
		}
	}
	return ms
}
