package sparse

import (
	"fmt"
	"io"
	"math"
	"runtime"
	"sort"
	"sync"

	"github.com/ruvllm/ruvllm/kernels"
	"github.com/ruvllm/ruvllm/models"
	"github.com/ruvllm/ruvllm/models/gguf"
)

// Rotating the residual stream (SliceGPT's computational invariance) makes
// the inputs of q/k/v and gate/up easier to threshold without changing the
// model: with every RMSNorm's gain folded into the matrices that read it,
// an orthogonal Q applied to the residual stream (the token embeddings, and
// the rows of the matrices that write into it) and undone in the matrices
// that read it (W·Qᵀ) leaves every output the same, since rms(Qx) = rms(x).
// Chosen by PCA of the normalised residual stream on calibration text, Q
// puts the stream in a basis where the low-variance directions are small
// on every token, so that a magnitude threshold drops them at less cost
// than it drops the original channels.

// KeyRotation (string) is the rotation a sparsified file's residual stream
// was given before calibration: "pca". Absent: none.
const KeyRotation = "ruvllm.sparsity.rotation"

// normReaders are, for each RMSNorm of a rotatable block or head, the
// matrices that read its output: its gain is folded into them.
var normReaders = map[models.Role][]models.Role{
	models.AttnNorm:   {models.AttnQ, models.AttnK, models.AttnV},
	models.FFNNorm:    {models.FFNGate, models.FFNUp},
	models.OutputNorm: {models.Output},
}

// residualWriters are the matrices whose outputs are added to the residual
// stream: their rows are rotated.
var residualWriters = []models.Role{models.AttnOut, models.FFNDown}

// rotationKeeps are the tensors a rotation leaves as they are.
var rotationKeeps = []models.Role{models.RopeFreqs, models.AttnQBias, models.AttnKBias, models.AttnVBias}

// normOf is the norm whose output the matrix of role r reads, if any.
func normOf(r models.Role) (models.Role, bool) {
	for n, readers := range normReaders {
		for _, rr := range readers {
			if rr == r {
				return n, true
			}
		}
	}
	return 0, false
}

// Rotatable reports, as an error saying why not, whether the residual
// stream of a model of architecture a can be rotated: every tensor of its
// description is one whose part in a pre-norm block of RMSNorm, attention
// and gated MLP the rotation knows (a family with norms elsewhere, such as
// Gemma 2's after the attention, or fused matrices, is not).
func Rotatable(a *models.Architecture) error {
	if a == nil {
		return fmt.Errorf("sparse: no architecture to rotate")
	}
	for _, t := range a.Tensors {
		_, reads := normOf(t.Role)
		_, norm := normReaders[t.Role]
		known := reads || norm || t.Role == models.TokenEmbd || hasRole(residualWriters, t.Role) || hasRole(rotationKeeps, t.Role)
		if !known {
			return fmt.Errorf("%s models cannot be rotated: their %s tensors have no place in a rotation of the residual stream", a.Name, t.Role)
		}
	}
	return nil
}

func hasRole(rs []models.Role, r models.Role) bool {
	for _, x := range rs {
		if x == r {
			return true
		}
	}
	return false
}

// Covariance gathers the second moments of a model's normalised residual
// stream, h/rms(h) at the input of every block's norms, over calibration
// text: what PCA chooses a rotation from.
type Covariance struct {
	dim   int
	gains map[string][]float32 // the first reader of each norm, by GGUF name: the norm's gain
	sum   []float64            // (dim, dim)
	n     uint64
	row   []float64
}

// NewCovariance returns an empty covariance for the model of f (described
// by cfg), reading its norms' gains: the inputs of a norm's readers are
// gain ⊙ h/rms(h).
func NewCovariance(f *gguf.File, cfg *models.Config) (*Covariance, error) {
	if err := Rotatable(cfg.Architecture()); err != nil {
		return nil, err
	}
	c := &Covariance{dim: cfg.Dim, gains: map[string][]float32{}, sum: make([]float64, cfg.Dim*cfg.Dim), row: make([]float64, cfg.Dim)}
	for l := range cfg.Layers {
		for _, norm := range []models.Role{models.AttnNorm, models.FFNNorm} {
			g, err := readVector(f, models.TensorName(norm, l), cfg.Dim)
			if err != nil {
				return nil, err
			}
			c.gains[models.TensorName(normReaders[norm][0], l)] = g
		}
	}
	return c, nil
}

// Observe records the input x of matrix name (rows of the model's width)
// when name is the first reader of a block's norm (q, gate); other
// matrices' inputs are ignored. An entry whose gain is 0 counts as 0.
func (c *Covariance) Observe(name string, x []float32) {
	g := c.gains[name]
	if g == nil {
		return
	}
	d := c.dim
	for r := 0; r+d <= len(x); r += d {
		for i, v := range x[r : r+d] {
			c.row[i] = 0
			if g[i] != 0 {
				c.row[i] = float64(v) / float64(g[i])
			}
		}
		for i, vi := range c.row {
			if vi == 0 {
				continue
			}
			s := c.sum[i*d : (i+1)*d]
			for j, vj := range c.row {
				s[j] += vi * vj
			}
		}
		c.n++
	}
}

// Rows is the number of vectors observed.
func (c *Covariance) Rows() uint64 { return c.n }

// PCA returns the rotation whose rows are the covariance's eigenvectors,
// by decreasing variance, and the variances.
func (c *Covariance) PCA() (Rotation, []float64, error) {
	if c.n == 0 {
		return Rotation{}, nil, fmt.Errorf("sparse: no residual vectors observed to choose a rotation from")
	}
	a := make([]float64, len(c.sum))
	for i, v := range c.sum {
		a[i] = v / float64(c.n)
	}
	vals, vecs := symmetricEigen(a, c.dim)
	return Rotation{Dim: c.dim, Q: vecs}, vals, nil
}

// Rotation is an orthogonal matrix Q (Dim×Dim, row-major): the residual
// stream x becomes Q·x.
type Rotation struct {
	Dim int
	Q   []float64
}

// apply sets dst = Q·(g ⊙ src) (g nil: ones).
func (q Rotation) apply(dst, src, g []float32) {
	d := q.Dim
	for j := range d {
		row := q.Q[j*d : (j+1)*d]
		var s float64
		for i, v := range src[:d] {
			if g != nil {
				v *= g[i]
			}
			s += row[i] * float64(v)
		}
		dst[j] = float32(s)
	}
}

// symmetricEigen diagonalises the symmetric n×n matrix a (row-major; it
// is overwritten) by cyclic Jacobi rotations: the eigenvalues in
// decreasing order and the eigenvectors as the rows of vecs. O(n³) per
// sweep, a few sweeps: seconds at n = 1024.
func symmetricEigen(a []float64, n int) (vals, vecs []float64) {
	v := make([]float64, n*n) // columns are eigenvectors
	for i := range n {
		v[i*n+i] = 1
	}
	for sweep := 0; sweep < 64; sweep++ {
		var off, diag float64
		for i := range n {
			diag += a[i*n+i] * a[i*n+i]
			for j := i + 1; j < n; j++ {
				off += a[i*n+j] * a[i*n+j]
			}
		}
		if off <= 1e-30*diag || off == 0 {
			break
		}
		for p := 0; p < n; p++ {
			for q := p + 1; q < n; q++ {
				apq := a[p*n+q]
				if apq == 0 {
					continue
				}
				theta := (a[q*n+q] - a[p*n+p]) / (2 * apq)
				t := math.Copysign(1, theta) / (math.Abs(theta) + math.Sqrt(theta*theta+1))
				c := 1 / math.Sqrt(t*t+1)
				s := t * c
				rotateLines(a, n, p, q, c, s, 1, n) // columns p, q
				rotateLines(a, n, p, q, c, s, n, 1) // rows p, q
				rotateLines(v, n, p, q, c, s, 1, n)
			}
		}
	}
	idx := make([]int, n)
	for i := range idx {
		idx[i] = i
	}
	sort.SliceStable(idx, func(x, y int) bool { return a[idx[x]*n+idx[x]] > a[idx[y]*n+idx[y]] })
	vals = make([]float64, n)
	vecs = make([]float64, n*n)
	for r, i := range idx {
		vals[r] = a[i*n+i]
		for k := range n {
			vecs[r*n+k] = v[k*n+i]
		}
	}
	return vals, vecs
}

// rotateLines applies a Givens rotation to lines p and q of the n×n matrix
// m: columns when (along, across) = (1, n) — entry k of line p is m[k*n+p]
// — rows when (n, 1).
func rotateLines(m []float64, n, p, q int, c, s float64, along, across int) {
	for k := range n {
		ip, iq := k*across+p*along, k*across+q*along
		x, y := m[ip], m[iq]
		m[ip] = c*x - s*y
		m[iq] = s*x + c*y
	}
}

// Rotate writes the model of f (described by cfg) to path with its
// residual stream rotated by q: the same function, every norm's gain 1.
// The matrices that read a norm become W·diag(g)·Qᵀ, those that write into
// the stream (attn_output, ffn_down) Q·W, the token embeddings Q·e; an
// output projection tied to the embeddings is written as its own tensor.
// Each matrix keeps its format: a quantized one is dequantized, rotated and
// quantized again, which is exact only for F32 (and within F16's rounding).
// The metadata records the rotation (KeyRotation). threads ≤ 0 means all
// cores.
func Rotate(f *gguf.File, cfg *models.Config, q Rotation, path string, threads int) error {
	if err := models.NotSparsified(f); err != nil {
		return err
	}
	if err := Rotatable(cfg.Architecture()); err != nil {
		return err
	}
	if q.Dim != cfg.Dim || len(q.Q) != q.Dim*q.Dim {
		return fmt.Errorf("sparse: a rotation of %d dimensions for a model %d wide", q.Dim, cfg.Dim)
	}
	if threads <= 0 {
		threads = runtime.NumCPU()
	}
	w := gguf.NewWriter()
	w.CopyKV(f)
	if err := w.Set(KeyRotation, "pca"); err != nil {
		return err
	}
	for i := range f.Tensors {
		ti := &f.Tensors[i]
		r, layer, named := models.ParseTensorName(ti.Name)
		norm, reads := normOf(r)
		_, isNorm := normReaders[r]
		var err error
		switch {
		case !named:
			err = fmt.Errorf("sparse: tensor %s has no place in a rotation of the residual stream", ti.Name)
		case isNorm:
			err = addMapped(w, ti.Name, ti, f.TensorData(ti), threads, func(_ int, row []float32) {
				for k := range row {
					row[k] = 1
				}
			})
		case reads, r == models.TokenEmbd:
			var g []float32
			if reads {
				if g, err = readVector(f, models.TensorName(norm, layer), cfg.Dim); err != nil {
					break
				}
			}
			err = addRotatedRows(w, ti.Name, ti, f.TensorData(ti), q, g, threads)
			if err == nil && r == models.TokenEmbd && cfg.TiedOutput {
				var gOut []float32
				if gOut, err = readVector(f, models.TensorName(models.OutputNorm, 0), cfg.Dim); err == nil {
					err = addRotatedRows(w, models.TensorName(models.Output, 0), ti, f.TensorData(ti), q, gOut, threads)
				}
			}
		case hasRole(residualWriters, r):
			err = addRotatedColumns(w, ti, f.TensorData(ti), q, threads)
		case hasRole(rotationKeeps, r):
			err = w.AddTensor(ti.Name, ti.Type, ti.Dims, f.TensorData(ti))
		default:
			err = fmt.Errorf("sparse: tensor %s has no place in a rotation of the residual stream", ti.Name)
		}
		if err != nil {
			return err
		}
	}
	return w.WriteFile(path)
}

// readVector reads the vector tensor name of n entries as float32.
func readVector(f *gguf.File, name string, n int) ([]float32, error) {
	ti, ok := f.Tensor(name)
	if !ok || ti.Elements() != uint64(n) {
		return nil, fmt.Errorf("sparse: %s missing or not of %d entries", name, n)
	}
	tr, ok := kernels.TraitsOf(ti.Type)
	if !ok {
		return nil, fmt.Errorf("sparse: %s: cannot read format %v", name, ti.Type)
	}
	v := make([]float32, n)
	tr.DequantizeRow(f.TensorData(ti), v)
	return v, nil
}

// addRotatedRows adds, under name, the matrix ti with each row r (of the
// model's width) replaced by Q·(g ⊙ r).
func addRotatedRows(w *gguf.Writer, name string, ti *gguf.TensorInfo, src []byte, q Rotation, g []float32, threads int) error {
	if int(ti.Dims[0]) != q.Dim {
		return fmt.Errorf("sparse: %s has rows of %d, the rotation %d dimensions", ti.Name, ti.Dims[0], q.Dim)
	}
	tmp := make([][]float32, threads)
	return addMapped(w, name, ti, src, threads, func(worker int, row []float32) {
		if tmp[worker] == nil {
			tmp[worker] = make([]float32, len(row))
		}
		copy(tmp[worker], row)
		q.apply(row, tmp[worker], g)
	})
}

// addRotatedColumns adds the matrix ti (dim rows) as Q·ti.
func addRotatedColumns(w *gguf.Writer, ti *gguf.TensorInfo, src []byte, q Rotation, threads int) error {
	if len(ti.Dims) != 2 || int(ti.Dims[1]) != q.Dim {
		return fmt.Errorf("sparse: %s has dims %v, not %d rows", ti.Name, ti.Dims, q.Dim)
	}
	tr, ok := kernels.TraitsOf(ti.Type)
	if !ok {
		return fmt.Errorf("sparse: %s: cannot read format %v", ti.Name, ti.Type)
	}
	cols, rows := int(ti.Dims[0]), q.Dim
	rb := ti.Type.RowBytes(cols)
	in := make([]float32, rows*cols)
	for r := range rows {
		tr.DequantizeRow(src[r*rb:(r+1)*rb], in[r*cols:(r+1)*cols])
	}
	return addRowsFunc(w, ti.Name, ti, threads, func(_ int, r int, row []float32) {
		qr := q.Q[r*q.Dim : (r+1)*q.Dim]
		for c := range row {
			row[c] = 0
		}
		for i, qv := range qr {
			x := in[i*cols : (i+1)*cols]
			for c, v := range x {
				row[c] += float32(qv * float64(v))
			}
		}
	})
}

// addMapped adds tensor ti (its data src) under name, each row
// (dequantized) passed through fill and quantized again in ti's format.
func addMapped(w *gguf.Writer, name string, ti *gguf.TensorInfo, src []byte, threads int, fill func(worker int, row []float32)) error {
	tr, ok := kernels.TraitsOf(ti.Type)
	if !ok {
		return fmt.Errorf("sparse: %s: cannot read format %v", ti.Name, ti.Type)
	}
	rb := ti.Type.RowBytes(int(ti.Dims[0]))
	return addRowsFunc(w, name, ti, threads, func(worker, r int, row []float32) {
		tr.DequantizeRow(src[r*rb:(r+1)*rb], row)
		fill(worker, row)
	})
}

// addRowsFunc adds, under name, a tensor of ti's format and dims whose rows
// fill writes (as float32) when the file is written, over threads
// goroutines (worker is the goroutine's index).
func addRowsFunc(w *gguf.Writer, name string, ti *gguf.TensorInfo, threads int, fill func(worker, r int, row []float32)) error {
	tr, ok := kernels.TraitsOf(ti.Type)
	if !ok {
		return fmt.Errorf("sparse: %s: cannot write format %v", ti.Name, ti.Type)
	}
	cols := int(ti.Dims[0])
	rows := int(ti.Elements()) / cols
	rb := ti.Type.RowBytes(cols)
	write := func(out io.Writer) error {
		data := make([]byte, rows*rb)
		per := (rows + threads - 1) / threads
		var wg sync.WaitGroup
		for worker := range threads {
			r0, r1 := worker*per, min((worker+1)*per, rows)
			if r0 >= r1 {
				break
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				row := make([]float32, cols)
				for r := r0; r < r1; r++ {
					fill(worker, r, row)
					tr.QuantizeRow(row, data[r*rb:(r+1)*rb])
				}
			}()
		}
		wg.Wait()
		_, err := out.Write(data)
		return err
	}
	return w.AddTensorFunc(name, ti.Type, ti.Dims, write, uint64(rows*rb))
}
