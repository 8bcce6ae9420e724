package sparse

import (
	"fmt"
	"math"
	"runtime"
	"slices"
	"sort"

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
		known := reads || norm || t.Role == models.TokenEmbd || slices.Contains(residualWriters, t.Role) || slices.Contains(rotationKeeps, t.Role)
		if !known {
			return fmt.Errorf("%s models cannot be rotated: their %s tensors have no place in a rotation of the residual stream", a.Name, t.Role)
		}
	}
	return nil
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
// is overwritten): the eigenvalues in decreasing order and the
// eigenvectors as the rows of vecs. Householder reduction to tridiagonal
// form, then the implicit QL algorithm (EISPACK's tred2 and tql2, as the
// public-domain JAMA writes them): O(n³), tens of seconds at n = 2048.
func symmetricEigen(a []float64, n int) (vals, vecs []float64) {
	v := a // v[i*n+j] is V[i][j]; its columns end as the eigenvectors
	d, e := make([]float64, n), make([]float64, n)
	tridiagonalize(v, d, e, n)
	// tql2 rotates pairs of V's columns: work on Vᵀ, whose rows they are.
	vt := make([]float64, n*n)
	for i := range n {
		for j := range n {
			vt[j*n+i] = v[i*n+j]
		}
	}
	tridiagonalQL(vt, d, e, n)
	idx := make([]int, n)
	for i := range idx {
		idx[i] = i
	}
	sort.SliceStable(idx, func(x, y int) bool { return d[idx[x]] > d[idx[y]] })
	vals = make([]float64, n)
	vecs = make([]float64, n*n)
	for r, i := range idx {
		vals[r] = d[i]
		copy(vecs[r*n:(r+1)*n], vt[i*n:(i+1)*n])
	}
	return vals, vecs
}

// tridiagonalize is tred2: it reduces the symmetric matrix v to tridiagonal
// form by Householder reflections, leaving the diagonal in d, the
// subdiagonal in e[1:], and the accumulated orthogonal transformation in v.
func tridiagonalize(v, d, e []float64, n int) {
	at := func(i, j int) *float64 { return &v[i*n+j] }
	for j := range n {
		d[j] = *at(n-1, j)
	}
	for i := n - 1; i > 0; i-- {
		var scale, h float64
		for k := range i {
			scale += math.Abs(d[k])
		}
		if scale == 0 {
			e[i] = d[i-1]
			for j := range i {
				d[j] = *at(i-1, j)
				*at(i, j) = 0
				*at(j, i) = 0
			}
		} else {
			for k := range i {
				d[k] /= scale
				h += d[k] * d[k]
			}
			f := d[i-1]
			g := math.Sqrt(h)
			if f > 0 {
				g = -g
			}
			e[i] = scale * g
			h -= f * g
			d[i-1] = f - g
			for j := range i {
				e[j] = 0
			}
			for j := range i {
				f = d[j]
				*at(j, i) = f
				g = e[j] + *at(j, j)*f
				for k := j + 1; k <= i-1; k++ {
					g += *at(k, j) * d[k]
					e[k] += *at(k, j) * f
				}
				e[j] = g
			}
			f = 0
			for j := range i {
				e[j] /= h
				f += e[j] * d[j]
			}
			hh := f / (h + h)
			for j := range i {
				e[j] -= hh * d[j]
			}
			for j := range i {
				f, g = d[j], e[j]
				for k := j; k <= i-1; k++ {
					*at(k, j) -= f*e[k] + g*d[k]
				}
				d[j] = *at(i-1, j)
				*at(i, j) = 0
			}
		}
		d[i] = h
	}
	for i := 0; i < n-1; i++ {
		*at(n-1, i) = *at(i, i)
		*at(i, i) = 1
		h := d[i+1]
		if h != 0 {
			for k := 0; k <= i; k++ {
				d[k] = *at(k, i+1) / h
			}
			for j := 0; j <= i; j++ {
				var g float64
				for k := 0; k <= i; k++ {
					g += *at(k, i+1) * *at(k, j)
				}
				for k := 0; k <= i; k++ {
					*at(k, j) -= g * d[k]
				}
			}
		}
		for k := 0; k <= i; k++ {
			*at(k, i+1) = 0
		}
	}
	for j := range n {
		d[j] = *at(n-1, j)
		*at(n-1, j) = 0
	}
	*at(n-1, n-1) = 1
	e[0] = 0
}

// tridiagonalQL is tql2: the eigenvalues of the tridiagonal matrix (d, e)
// into d, rotating the rows of vt (the transformation so far, transposed)
// into the eigenvectors.
func tridiagonalQL(vt, d, e []float64, n int) {
	for i := 1; i < n; i++ {
		e[i-1] = e[i]
	}
	e[n-1] = 0
	var f, tst1 float64
	const eps = 0x1p-52
	for l := range n {
		tst1 = max(tst1, math.Abs(d[l])+math.Abs(e[l]))
		m := l
		for m < n-1 && math.Abs(e[m]) > eps*tst1 {
			m++
		}
		for iter := 0; m > l && iter < 100; iter++ {
			g := d[l]
			p := (d[l+1] - g) / (2 * e[l])
			r := math.Hypot(p, 1)
			if p < 0 {
				r = -r
			}
			d[l] = e[l] / (p + r)
			d[l+1] = e[l] * (p + r)
			dl1 := d[l+1]
			h := g - d[l]
			for i := l + 2; i < n; i++ {
				d[i] -= h
			}
			f += h
			p = d[m]
			c, c2, c3 := 1.0, 1.0, 1.0
			el1 := e[l+1]
			var s, s2 float64
			for i := m - 1; i >= l; i-- {
				c3, c2, s2 = c2, c, s
				g = c * e[i]
				h = c * p
				r = math.Hypot(p, e[i])
				e[i+1] = s * r
				s, c = e[i]/r, p/r
				p = c*d[i] - s*g
				d[i+1] = h + s*(c*g+s*d[i])
				lo, hi := vt[i*n:(i+1)*n], vt[(i+1)*n:(i+2)*n]
				for k := range n {
					h = hi[k]
					hi[k] = s*lo[k] + c*h
					lo[k] = c*lo[k] - s*h
				}
			}
			p = -s * s2 * c3 * el1 * e[l] / dl1
			e[l] = s * p
			d[l] = c * p
			if math.Abs(e[l]) <= eps*tst1 {
				break
			}
		}
		d[l] += f
		e[l] = 0
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
		case slices.Contains(residualWriters, r):
			err = addRotatedColumns(w, ti, f.TensorData(ti), q, threads)
		case slices.Contains(rotationKeeps, r):
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
	return models.AddRows(w, ti.Name, ti.Type, ti.Dims, rows, cols, rb, threads, func(_, r int, row []float32, dst []byte) {
		qr := q.Q[r*q.Dim : (r+1)*q.Dim]
		clear(row)
		for i, qv := range qr {
			x := in[i*cols : (i+1)*cols]
			for c, v := range x {
				row[c] += float32(qv * float64(v))
			}
		}
		tr.QuantizeRow(row, dst)
	})
}

// addMapped adds tensor ti (its data src) under name, each row
// (dequantized) passed through fill and quantized again in ti's format.
func addMapped(w *gguf.Writer, name string, ti *gguf.TensorInfo, src []byte, threads int, fill func(worker int, row []float32)) error {
	tr, ok := kernels.TraitsOf(ti.Type)
	if !ok {
		return fmt.Errorf("sparse: %s: cannot read format %v", ti.Name, ti.Type)
	}
	cols := int(ti.Dims[0])
	rb := ti.Type.RowBytes(cols)
	return models.AddRows(w, name, ti.Type, ti.Dims, int(ti.Elements())/cols, cols, rb, threads, func(worker, r int, row []float32, dst []byte) {
		tr.DequantizeRow(src[r*rb:(r+1)*rb], row)
		fill(worker, row)
		tr.QuantizeRow(row, dst)
	})
}
