package main

import (
	"context"
	"fmt"
	"io"
	"math"
	"os"
	"os/signal"
	"time"

	"github.com/rs/zerolog"

	"github.com/ruvllm/ruvllm/backends"
	"github.com/ruvllm/ruvllm/models"
	"github.com/ruvllm/ruvllm/models/tokenizer"
	"github.com/ruvllm/ruvllm/sparse"
)

func init() {
	register("sparsify", "calibrate activation-sparsity thresholds on a text and write the model with its matrices input-channel-major", runSparsify)
}

// calibrator is a backend that shows the inputs of its block matrices and
// thresholds them on request (the native backend).
type calibrator interface {
	backends.Backend
	ObserveInputs(f func(layer int, name string, x []float32))
	ThresholdInputs(threshold func(name string) float32)
}

func runSparsify(e *env, args []string) error {
	fs := newFlags("sparsify", "--model M.gguf --calib TEXT.txt --sparsity S --out M.sparse.gguf [--rotate] [--ctx N] [--max-tokens N] [--threads T]")
	in := fs.String("model", "", "the dense model to sparsify")
	calib := fs.String("calib", "", "calibration text: the thresholds zero the wanted fraction of each matrix's inputs on it")
	level := fs.Float64("sparsity", 0.4, "the sparsity the file runs at unless told otherwise (--sparsity of the other commands)")
	out := fs.String("out", "", "file to write")
	nCtx := fs.Int("ctx", 512, "calibration window in tokens (each starts with BOS)")
	maxTokens := fs.Int("max-tokens", 0, "calibrate on at most this many tokens of the text; 0 is all")
	allocation := fs.String("allocation", "uniform", "uniform: every matrix zeroes the level's fraction of its inputs; "+
		"greedy: measure the error of each block input's thresholds alone and thin the cheap inputs more for the same average "+
		"(a forward pass over --greedy-tokens for each of layers × 4 inputs × 9 probes)")
	rotate := fs.Bool("rotate", false, "first rotate the residual stream by the PCA of its normalised vectors on the text (the same model, "+
		"norm gains folded into the matrices; quantized matrices are quantized again): its inputs then threshold at less cost")
	greedyTokens := fs.Int("greedy-tokens", 1024, "with --allocation greedy: the tokens of the text (from its start) the errors are measured on; "+
		"with --rotate, those the rotated model's KL from the model is measured on")
	threads := addThreadsFlag(fs)
	if _, err := fs.parse(args, e.stdout); err != nil {
		return err
	}
	switch {
	case *in == "" || *calib == "" || *out == "":
		return fmt.Errorf("%w: --model, --calib and --out are required", errUsage)
	case !(*level > 0 && *level <= sparse.MaxSparsity(sparse.Levels)):
		return fmt.Errorf("%w: --sparsity %g must be in (0, %.2f]", errUsage, *level, sparse.MaxSparsity(sparse.Levels))
	case *nCtx < 2 || *maxTokens < 0 || *greedyTokens < *nCtx:
		return fmt.Errorf("%w: --ctx must be at least 2, --max-tokens not negative and --greedy-tokens at least --ctx", errUsage)
	case *allocation != "uniform" && *allocation != "greedy":
		return fmt.Errorf("%w: --allocation is uniform or greedy, not %q", errUsage, *allocation)
	}
	text, err := os.ReadFile(*calib)
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	start := time.Now()
	m, err := models.Load(*in, models.LoadOptions{Logger: e.log})
	if err != nil {
		return err
	}
	defer m.Close()
	if err := models.NotSparsified(m.File); err != nil {
		return err
	}
	if len(m.Config.Architecture().Sparse) == 0 {
		return fmt.Errorf("%s models cannot be sparsified: their description lists no sparse roles", m.Config.Arch)
	}
	tokens := m.Tokenizer.Encode(string(text), tokenizer.EncodeOptions{AddSpecial: true})
	if *maxTokens > 0 && len(tokens) > *maxTokens {
		tokens = tokens[:*maxTokens]
	}
	w := calibrationWindows{tokens: tokens, nCtx: *nCtx, vocab: m.Tokenizer.Vocab()}
	if *rotate {
		rotated, err := rotateResidual(ctx, e.log, m, w, *greedyTokens, *out, *threads, e.stderr)
		if err != nil {
			return err
		}
		defer os.Remove(rotated.Path)
		defer rotated.Close()
		m = rotated
	}
	cb, err := openCalibrator(m, *nCtx, *threads)
	if err != nil {
		return err
	}
	defer cb.Close()
	cal := sparse.NewCalibration()
	cb.ObserveInputs(func(_ int, name string, x []float32) { cal.Observe(name, x) })
	if err := w.run(ctx, cb, nil); err != nil {
		return err
	}
	cb.ObserveInputs(nil)
	var tables map[string]sparse.Table
	if *allocation == "greedy" {
		w.tokens = tokens[:min(len(tokens), *greedyTokens)]
		if tables, err = greedyTables(ctx, cb, m.Config, cal, w, e.stderr); err != nil {
			return err
		}
	} else {
		tables = map[string]sparse.Table{}
		for _, name := range cal.Names() {
			tables[name] = cal.Uniform(name)
		}
	}
	info := sparse.Info{Sparsity: *level, Allocation: *allocation, Tokens: len(tokens)}
	kept, err := sparse.Write(m.File, m.Config, tables, info, *out, *threads)
	if err != nil {
		return err
	}
	for _, name := range kept {
		e.log.Warn().Str("tensor", name).Msg("left row-major (its format or shape has no channel-major layout): it runs dense")
	}
	fmt.Fprintf(e.stderr, "wrote %s: %d matrices channel-major, calibrated (%s) on %d tokens for sparsity %.2f, in %.1f s\n",
		*out, len(tables)-len(kept), *allocation, len(tokens), *level, time.Since(start).Seconds())
	return nil
}

// openCalibrator opens the default backend on m for calibration windows of
// nCtx tokens.
func openCalibrator(m *models.Model, nCtx, threads int) (calibrator, error) {
	b, err := backends.Open(backends.DefaultBackend, m, backends.Options{Threads: threads, MaxBatch: nCtx, KVTokens: nCtx})
	if err != nil {
		return nil, err
	}
	cb, ok := b.(calibrator)
	if !ok {
		b.Close()
		return nil, fmt.Errorf("the %s backend does not show its inputs", backends.DefaultBackend)
	}
	return cb, nil
}

// rotationKLWarning is the mean KL of a rotated model from the model above
// which sparsify warns: what uniform thresholds at 0.25 cost stories260K
// on the reference prompts (docs/performance.md), so that a rotation costing more is
// not worth its gain.
const rotationKLWarning = 0.01

// rotateResidual runs m over the windows to gather its normalised residual
// stream, writes m rotated by that stream's PCA (sparse.Rotate) beside out,
// and loads it: the caller closes it and removes its file. It reports the
// mean KL divergence of the rotated model from m on the first klTokens of
// the windows: float rounding for F32 weights, more for quantized ones.
func rotateResidual(ctx context.Context, log zerolog.Logger, m *models.Model, w calibrationWindows, klTokens int, out string, threads int, progress io.Writer) (*models.Model, error) {
	cov, err := sparse.NewCovariance(m.File, m.Config)
	if err != nil {
		return nil, err
	}
	cb, err := openCalibrator(m, w.nCtx, threads)
	if err != nil {
		return nil, err
	}
	defer cb.Close()
	cb.ObserveInputs(func(_ int, name string, x []float32) { cov.Observe(name, x) })
	// The log-probabilities of the first klTokens, to measure what the
	// rotation changed (quantized matrices are quantized again).
	vocab := m.Config.VocabSize
	check := w
	check.tokens = w.tokens[:min(len(w.tokens), klTokens)]
	dense := make([]float32, len(check.tokens)*vocab)
	err = w.run(ctx, cb, func(start int, l []float32) {
		if start < len(check.tokens) {
			logSoftmaxRows(dense[start*vocab:], l, vocab)
		}
	})
	if err != nil {
		return nil, err
	}
	cb.ObserveInputs(nil)
	q, variances, err := cov.PCA()
	if err != nil {
		return nil, err
	}
	path := out + ".rotated.tmp"
	if err := sparse.Rotate(m.File, m.Config, q, path, threads); err != nil {
		os.Remove(path)
		return nil, err
	}
	rotated, err := models.Load(path, models.LoadOptions{Logger: log})
	if err != nil {
		os.Remove(path)
		return nil, err
	}
	kl, err := rotationKL(ctx, rotated, check, dense, threads)
	if err != nil {
		rotated.Close()
		os.Remove(path)
		return nil, err
	}
	var total, quarter float64
	for i, v := range variances {
		total += v
		if i >= len(variances)*3/4 {
			quarter += v
		}
	}
	fmt.Fprintf(progress, "rotated the residual stream by the PCA of %d vectors: the first direction holds %.1f%% of the variance, the last quarter %.1f%%; "+
		"mean KL of the rotated model from the model on %d tokens: %.2g\n",
		cov.Rows(), 100*variances[0]/total, 100*quarter/total, len(check.tokens), kl)
	if kl > rotationKLWarning {
		log.Warn().Float64("kl", kl).Msg("quantizing the rotated matrices again changed the model more than sparsity 0.25 changes stories260K: " +
			"sparsify the F16 or F32 file, or leave out --rotate")
	}
	return rotated, nil
}

// rotationKL is the mean KL divergence of the rotated model's next-token
// distributions from dense (the model's log-probabilities over w's tokens).
func rotationKL(ctx context.Context, rotated *models.Model, w calibrationWindows, dense []float32, threads int) (float64, error) {
	rb, err := openCalibrator(rotated, w.nCtx, threads)
	if err != nil {
		return 0, err
	}
	defer rb.Close()
	vocab := rotated.Config.VocabSize
	var kl float64
	if err := w.run(ctx, rb, func(start int, l []float32) { kl += klRows(dense[start*vocab:], l, vocab) }); err != nil {
		return 0, err
	}
	return kl / float64(max(1, len(w.tokens))), nil
}

// calibrationWindows are the windows of nCtx tokens a calibration runs
// the model over, each starting with BOS when the vocab adds one, as
// perplexity's do.
type calibrationWindows struct {
	tokens []tokenizer.ID
	nCtx   int
	vocab  *tokenizer.Vocab
}

// run runs the model over the windows, every token producing outputs (so
// that the last block runs for all of them); each window's logits go to
// logits, when set, with the window's start.
func (w calibrationWindows) run(ctx context.Context, b backends.Backend, logits func(start int, l []float32)) error {
	if len(w.tokens) < 2 {
		return fmt.Errorf("the calibration text has %d tokens: too few", len(w.tokens))
	}
	seq, err := b.NewSequence(backends.SequenceOptions{MaxLen: w.nCtx})
	if err != nil {
		return err
	}
	defer seq.Close()
	window := make([]tokenizer.ID, 0, w.nCtx)
	info := b.Model()
	out := make([]float32, w.nCtx*info.VocabSize)
	for i := 0; i < len(w.tokens); i += w.nCtx {
		if err := ctx.Err(); err != nil {
			return err
		}
		window = append(window[:0], w.tokens[i:min(i+w.nCtx, len(w.tokens))]...)
		if w.vocab.AddBOS && w.vocab.BOS >= 0 && i > 0 {
			window[0] = w.vocab.BOS
		}
		seq.Reset()
		st := backends.Step{Seq: seq, Tokens: window, Outputs: backends.AllTokens, Logits: out[:len(window)*info.VocabSize]}
		if err := b.Forward([]backends.Step{st}); err != nil {
			return err
		}
		if logits != nil {
			logits(i, st.Logits)
		}
	}
	return nil
}

// greedyTables measures, for every block input (a unit: the matrices of
// one block that multiply it), the model's mean KL divergence from the
// dense model on the windows with only that input thresholded at each of
// sparse.Probes, allocates the levels (sparse.Allocate), and returns each
// matrix's thresholds.
func greedyTables(ctx context.Context, b calibrator, cfg *models.Config, cal *sparse.Calibration, w calibrationWindows, progress io.Writer) (map[string]sparse.Table, error) {
	vocab := b.Model().VocabSize
	dense := make([]float32, len(w.tokens)*vocab) // log-probabilities
	if err := w.run(ctx, b, func(start int, l []float32) { logSoftmaxRows(dense[start*vocab:], l, vocab) }); err != nil {
		return nil, err
	}
	units := sparseUnits(cfg)
	start := time.Now()
	for u := range units {
		un := &units[u]
		for _, p := range sparse.Probes {
			thr := map[string]float32{}
			for _, name := range un.Matrices {
				thr[name] = cal.Quantiles(name, []float64{p})[0]
			}
			b.ThresholdInputs(func(name string) float32 { return thr[name] })
			var kl float64
			err := w.run(ctx, b, func(start int, l []float32) { kl += klRows(dense[start*vocab:], l, vocab) })
			if err != nil {
				return nil, err
			}
			un.Errors = append(un.Errors, kl/float64(len(w.tokens)))
		}
		fmt.Fprintf(progress, "\rgreedy allocation: %d of %d block inputs measured (%.0f s)", u+1, len(units), time.Since(start).Seconds())
	}
	fmt.Fprintln(progress)
	b.ThresholdInputs(nil)
	levels, err := sparse.Allocate(units, sparse.Probes)
	if err != nil {
		return nil, err
	}
	tables := map[string]sparse.Table{}
	for u, un := range units {
		fs := make([]float64, len(levels))
		for k := range levels {
			fs[k] = levels[k][u]
		}
		for _, name := range un.Matrices {
			tables[name] = cal.Quantiles(name, fs)
		}
	}
	return tables, nil
}

// sparseUnits are the block inputs of a model of cfg that an allocation
// gives sparsities: per block, each group of the architecture's Sparse.
func sparseUnits(cfg *models.Config) []sparse.Unit {
	var units []sparse.Unit
	for l := range cfg.Layers {
		for _, group := range cfg.Architecture().Sparse {
			var un sparse.Unit
			for _, r := range group {
				name := models.TensorName(r, l)
				if in, out, ok := cfg.LinearShape(name); ok {
					un.Matrices = append(un.Matrices, name)
					un.Weights += int64(in) * int64(out)
				}
			}
			if len(un.Matrices) > 0 {
				units = append(units, un)
			}
		}
	}
	return units
}

// logSoftmaxRows writes the log-softmax of each row of l into dst.
func logSoftmaxRows(dst, l []float32, vocab int) {
	for r := 0; r < len(l)/vocab; r++ {
		row := l[r*vocab : (r+1)*vocab]
		lse := logSumExp(row)
		for i, v := range row {
			dst[r*vocab+i] = float32(float64(v) - lse)
		}
	}
}

// klRows sums over the rows of l the KL divergence of their softmax from
// the distributions whose log-probabilities dense holds.
func klRows(dense, l []float32, vocab int) float64 {
	var kl float64
	for r := 0; r < len(l)/vocab; r++ {
		row, p := l[r*vocab:(r+1)*vocab], dense[r*vocab:(r+1)*vocab]
		lse := logSumExp(row)
		for i, lp := range p {
			if lp > -30 {
				kl += math.Exp(float64(lp)) * (float64(lp) - (float64(row[i]) - lse))
			}
		}
	}
	return kl
}
