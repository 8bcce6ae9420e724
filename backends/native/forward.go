package native

import (
	"fmt"

	"github.com/ruvllm/ruvllm/backends"
	"github.com/ruvllm/ruvllm/kernels"
	"github.com/ruvllm/ruvllm/models"
	"github.com/ruvllm/ruvllm/sparse"
)

// segment is a run of consecutive tokens of one sequence within a pass.
type segment struct {
	seq  *sequence
	step int // index of the step the tokens come from
	tok0 int // index of the first token in the step's Tokens
	n    int // number of tokens
	row0 int // row of the first token in the pass's buffers
	pos0 int // position of the first token in the sequence
	// prompt is set when the step has two or more tokens; their attention
	// then sums as llama.cpp's does for a micro-batch of several tokens.
	prompt bool
}

// outRow is a token of a pass whose outputs a step wants.
type outRow struct {
	row  int // in the pass's buffers
	step int
	dst  int // row of the step's Logits and Hidden
}

// Forward implements backends.Backend. Steps are packed in order into
// passes of up to MaxBatch tokens; a step longer than the room left is split
// over passes, which is exact because a pass commits its keys and values
// before the next one starts.
func (b *Backend) Forward(steps []backends.Step) error {
	if err := b.check(steps); err != nil {
		return err
	}
	bf := &b.buf
	bf.segs, bf.outs = bf.segs[:0], bf.outs[:0]
	rows := 0
	for i := range steps {
		st := &steps[i]
		s := st.Seq.(*sequence)
		wants := st.Logits != nil || st.Hidden != nil
		for tok := 0; tok < len(st.Tokens); {
			if rows == b.maxBatch {
				b.pass(steps, rows)
				bf.segs, bf.outs = bf.segs[:0], bf.outs[:0]
				rows = 0
			}
			n := min(len(st.Tokens)-tok, b.maxBatch-rows)
			// Drafted tokens are computed as decode steps of one token
			// would be, so that verifying them gives the logits of
			// decoding one token at a time to the bit.
			bf.segs = append(bf.segs, segment{seq: s, step: i, tok0: tok, n: n, row0: rows, pos0: s.Len(),
				prompt: len(st.Tokens) > 1 && st.Draft == 0})
			switch {
			case !wants:
			case st.Outputs == backends.AllTokens:
				for j := range n {
					bf.outs = append(bf.outs, outRow{row: rows + j, step: i, dst: tok + j})
				}
			case tok+n == len(st.Tokens):
				bf.outs = append(bf.outs, outRow{row: rows + n - 1, step: i, dst: 0})
			}
			tok += n
			rows += n
		}
	}
	if rows > 0 {
		b.pass(steps, rows)
	}
	return nil
}

// check validates every step before Forward changes anything.
func (b *Backend) check(steps []backends.Step) error {
	if b.closed {
		return backends.ErrClosed
	}
	b.call++
	vocab, dim := b.cfg.VocabSize, b.cfg.Dim
	var need [kvPrecisions]int   // blocks the steps take from each pool
	var nsteps [kvPrecisions]int // steps of each pool
	var tokens [kvPrecisions]int // tokens of each pool
	for i := range steps {
		st := &steps[i]
		s, ok := st.Seq.(*sequence)
		switch {
		case !ok || s == nil || s.owner != b:
			return fmt.Errorf("native: step %d: the sequence was not made by this backend", i)
		case s.Table == nil:
			return fmt.Errorf("native: step %d: %w", i, backends.ErrClosed)
		case s.call == b.call:
			return fmt.Errorf("native: step %d: the sequence appears twice in one call", i)
		case len(st.Tokens) == 0:
			return fmt.Errorf("native: step %d has no tokens", i)
		case s.Len()+len(st.Tokens) > s.MaxLen():
			return fmt.Errorf("native: step %d: %d tokens after %d do not fit in %d: %w",
				i, len(st.Tokens), s.Len(), s.MaxLen(), backends.ErrContextFull)
		case st.Outputs != backends.LastToken && st.Outputs != backends.AllTokens:
			return fmt.Errorf("native: step %d: unknown outputs %d", i, st.Outputs)
		case st.Draft < 0 || st.Draft >= len(st.Tokens):
			return fmt.Errorf("native: step %d: %d drafted tokens of %d", i, st.Draft, len(st.Tokens))
		}
		s.call = b.call
		pt := s.Table.Pool().Type()
		need[pt] += s.Table.Need(len(st.Tokens))
		nsteps[pt]++
		tokens[pt] += len(st.Tokens)
		for _, t := range st.Tokens {
			if t < 0 || int(t) >= vocab {
				return fmt.Errorf("native: step %d: token %d is outside the vocabulary of %d", i, t, vocab)
			}
		}
		n := st.OutputRows()
		if st.Logits != nil && len(st.Logits) != n*vocab {
			return fmt.Errorf("native: step %d: logits buffer of %d floats, want %d×%d", i, len(st.Logits), n, vocab)
		}
		if st.Hidden != nil && len(st.Hidden) != n*dim {
			return fmt.Errorf("native: step %d: hidden buffer of %d floats, want %d×%d", i, len(st.Hidden), n, dim)
		}
	}
	for i, p := range b.kv {
		if p != nil && need[i] > p.Available() {
			return fmt.Errorf("native: the steps need %d KV blocks, %d are free or evictable of %d: %w",
				need[i], p.Available(), p.Blocks(), backends.ErrNoRoom)
		}
		// A tiered pool writes each block exactly, in slots of their own;
		// a pass fills (and so frees) the slots of the blocks before its
		// last, so what one pass takes at most is what must be free.
		if p != nil && p.Tiered() {
			bt := p.BlockTokens()
			pass := min(need[i], (min(tokens[i], b.maxBatch)+bt-1)/bt+2*nsteps[i])
			if pass > p.HalfAvailable() {
				return fmt.Errorf("native: the steps write %d KV blocks at once, %d exact slots are free: %w",
					pass, p.HalfAvailable(), backends.ErrNoRoom)
			}
		}
	}
	return nil
}

// pass runs the model over the n tokens of b.buf.segs, appends them to
// their sequences, and writes the outputs b.buf.outs asks for.
func (b *Backend) pass(steps []backends.Step, n int) {
	bf, dim, half := &b.buf, b.cfg.Dim, b.cfg.RopeDim/2
	tokEmbd := b.w.global.mat(models.TokenEmbd)
	embed, _ := kernels.TraitsOf(tokEmbd.typ)
	bf.runs = bf.runs[:0]
	b.tieredPass = false
	for i, sg := range bf.segs {
		b.tieredPass = b.tieredPass || sg.seq.Table.Pool().Tiered()
		if _, err := sg.seq.Table.Append(steps[sg.step].Tokens[sg.tok0 : sg.tok0+sg.n]); err != nil {
			panic(err) // check made room for every token
		}
		bf.runs = addRun(bf.runs, sg.seq, sg.row0, sg.n)
		for j, t := range steps[sg.step].Tokens[sg.tok0 : sg.tok0+sg.n] {
			r := sg.row0 + j
			bf.rowSeg[r] = int32(i)
			embed.DequantizeRow(tokEmbd.row(int(t)), bf.x[r*dim:(r+1)*dim])
			for i := range b.rotary {
				rot := &b.rotary[i]
				rot.Angles(sg.pos0+j, rot.cos[r*half:(r+1)*half], rot.sin[r*half:(r+1)*half])
			}
		}
	}
	b.observe("inp_embd", -1, bf.x[:n*dim])
	if f := b.fam.embed; f != nil {
		f(b, bf.x[:n*dim])
	}
	for l := range b.w.blocks {
		b.fam.block(b, l, n)
	}
	for _, sg := range bf.segs {
		// The blocks this pass filled are written in every layer now:
		// offer them to later prompts, except those holding drafted
		// tokens, which the caller may take back.
		st := &steps[sg.step]
		drafts := max(0, sg.tok0+sg.n-(len(st.Tokens)-st.Draft))
		sg.seq.Table.CommitBelow(sg.seq.Table.Len() - drafts)
	}
	b.outputs(steps)
}

// linear sets out (n, rows) = x (n, cols) · Wᵀ + bias, plus the update of
// W by the adapter of each run of rows (adapter.go): the one place a linear
// layer is computed. The activations are quantized to W's dot-product
// format first, as llama.cpp does. A single token is a matrix-vector
// product. A channel-major matrix of a sparsified file thresholds its input
// first (the adapters see it whole): a single token's product skips the
// zeroed inputs' columns, several tokens run the dense kernels over its
// rows packed back. A matrix with a packed copy (repack) is read only
// there: one token by the packed mat-vec, several by the packed product.
func (b *Backend) linear(w *matrix, x []float32, n int, out []float32, bias []float32, runs []adapterRun) {
	x, out = x[:n*w.cols], out[:n*w.rows]
	if b.inputs != nil && w.layer >= 0 {
		b.inputs(w.layer, w.name, x)
	}
	xw := x // what the weights multiply
	if w.sparse == nil && w.threshold > 0 {
		xw = b.buf.thresholded[:len(x)]
		sparse.Threshold(xw, x, w.threshold)
	}
	switch {
	case w.sparse != nil && n == 1:
		w.sparse.MulVec(b.pool, x, w.threshold, out, &b.buf.sparse)
	case w.sparse != nil:
		w.sparse.MatMul(b.pool, x, n, w.threshold, out, &b.buf.sparse)
	case w.recent:
		kernels.MatMulRecent(b.pool, w.typ, w.data, w.rows, w.cols, xw, n, out, b.buf.quant)
	case n == 1 && w.packed != nil:
		kernels.MatVecInterleaved(b.pool, w.typ, w.packed, w.rows, w.cols, xw, out, b.buf.quant)
	case w.packed != nil:
		kernels.MatMulInterleaved(b.pool, w.typ, w.packed, w.rows, w.cols, xw, n, out, b.buf.quant)
	case n == 1:
		kernels.MatVec(b.pool, w.typ, w.data, w.rows, w.cols, xw, out, b.buf.quant)
	default:
		kernels.MatMul(b.pool, w.typ, w.data, w.rows, w.cols, xw, n, out, b.buf.quant)
	}
	if bias != nil {
		for r := range n {
			o := out[r*w.rows : (r+1)*w.rows]
			kernels.Add(o, o, bias)
		}
	}
	b.applyAdapters(w, x, out, runs)
}

// linearStack computes the products of a stack's parts over the n rows of
// x (outs and biases in the parts' order, each part's out (n, its rows), as
// linear would) by one product of the stack (its rows cut into the parts'
// outputs), then adds each part's bias and adapters.
func (b *Backend) linearStack(st *stack, x []float32, n int, outs, biases [maxStackParts][]float32, runs []adapterRun) {
	w := st.m
	x = x[:n*w.cols]
	if b.inputs != nil {
		for _, p := range st.parts {
			b.inputs(p.layer, p.name, x)
		}
	}
	var parts [maxStackParts][]float32
	for i, p := range st.parts {
		parts[i] = outs[i][:n*p.rows]
	}
	w.sparse.MatMulSplit(b.pool, x, n, w.threshold, parts[:len(st.parts)], &b.buf.sparse)
	for i, p := range st.parts {
		if biases[i] != nil {
			for r := range n {
				o := parts[i][r*p.rows : (r+1)*p.rows]
				kernels.Add(o, o, biases[i])
			}
		}
		b.applyAdapters(p, x, parts[i], runs)
	}
}

// observe shows the activations x of a pass at a named point of layer l
// (-1: outside the blocks) to b.tap, which tests set to compare them with
// llama.cpp's tensors of the same names.
func (b *Backend) observe(point string, l int, x []float32) {
	if b.tap != nil {
		b.tap(point, l, x)
	}
}

// outputs applies the final norm to the tokens in b.buf.outs, copies their
// hidden states out, and projects those whose step wants logits, a chunk of
// rows at a time.
func (b *Backend) outputs(steps []backends.Step) {
	bf, dim, vocab := &b.buf, b.cfg.Dim, b.cfg.VocabSize
	nl := 0 // rows wanting logits, gathered at the front of xn
	for _, o := range bf.outs {
		h := bf.xn[nl*dim : (nl+1)*dim]
		kernels.RMSNorm(h, bf.x[o.row*dim:(o.row+1)*dim], b.w.global.vec(models.OutputNorm), b.cfg.NormEps)
		b.observe("result_norm", -1, h)
		st := &steps[o.step]
		if st.Hidden != nil {
			copy(st.Hidden[o.dst*dim:(o.dst+1)*dim], h)
		}
		if st.Logits != nil {
			bf.outs[nl] = o
			nl++
		}
	}
	for c0 := 0; c0 < nl; c0 += logitsChunk {
		c1 := min(c0+logitsChunk, nl)
		bf.outRuns = bf.outRuns[:0]
		for i, o := range bf.outs[c0:c1] {
			bf.outRuns = addRun(bf.outRuns, steps[o.step].Seq.(*sequence), i, 1)
		}
		b.linear(b.w.output, bf.xn[c0*dim:c1*dim], c1-c0, bf.logits, nil, bf.outRuns)
		if f := b.fam.logits; f != nil {
			f(b, bf.logits[:(c1-c0)*vocab])
		}
		b.observe("result_output", -1, bf.logits[:(c1-c0)*vocab])
		for i, o := range bf.outs[c0:c1] {
			copy(steps[o.step].Logits[o.dst*vocab:(o.dst+1)*vocab], bf.logits[i*vocab:(i+1)*vocab])
		}
	}
}
