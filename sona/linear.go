package sona

import "math"

// Bounds of the linear models.
const (
	// priorPrecision is each weight's precision before any evidence: a
	// normal prior of variance 1/3 around 0, which keeps a feature seen a
	// few times from swinging a prediction on its own.
	priorPrecision = 3
	// maxLogit bounds the quality model's logit, so that a probability is
	// never exactly 0 or 1.
	maxLogit = 12
	// minNoise bounds the cost model's noise variance (of ln cost) from
	// below, so that exact repeats cannot make it infinitely sure.
	minNoise = 1e-3
	// maxNoise bounds it from above (ln cost within about a factor of 4
	// of the prediction), so that the expected cost, exp(mean + noise/2),
	// stays within a factor of e of the median: the residuals of a model
	// that has not learnt an arm's costs yet (a server's first requests
	// cost milliseconds where the untrained model predicts 1) would
	// otherwise inflate an arm's expected cost a billionfold, and an arm
	// that looks that dear is never chosen again to correct it.
	maxNoise = 2
)

// Heads of the linear model: each arm has one for quality and one for cost.
const (
	headQuality = iota
	headCost
	heads
)

// linear is two linear models per arm (heads: quality and ln cost) over the
// same features, each with a diagonal Gaussian posterior on its weights (a mean and a precision per
// weight), updated one observation at a time: Chapelle and Li's online
// Bayesian logistic regression ("An Empirical Evaluation of Thompson
// Sampling", 2011) for quality, and the same diagonal update of Bayesian
// linear regression for ln cost. The precision of a weight grows with the
// evidence on its feature, so each weight learns at its own, decreasing
// rate, and the variance of a prediction says how much evidence stands
// behind it. Capping the precision (maxPrecision) keeps a floor under the
// learning rate, so that the model follows arms whose answers change.
//
// The weights of one input sit side by side (input-major: every arm's two
// heads), so that predicting every arm for one request reads one run of
// memory per input.
type linear struct {
	arms int
	// stride is arms × heads, the weights of one input.
	stride int
	// mean and prec hold, for each input, stride weights: the hashed
	// buckets (users' buckets share them), then numDense dense inputs.
	mean, prec   []float32
	inputs       int
	maxPrecision float32
}

func newLinear(buckets int, maxPrecision float64) *linear {
	return &linear{inputs: buckets + numDense, maxPrecision: float32(maxPrecision)}
}

// addArm gives the model one more arm, with the prior's weights.
func (l *linear) addArm() {
	stride := l.stride + heads
	mean := make([]float32, l.inputs*stride)
	prec := make([]float32, l.inputs*stride)
	for i := range l.inputs {
		copy(mean[i*stride:], l.mean[i*l.stride:(i+1)*l.stride])
		copy(prec[i*stride:], l.prec[i*l.stride:(i+1)*l.stride])
		for h := range heads {
			prec[i*stride+l.stride+h] = priorPrecision
		}
	}
	l.mean, l.prec, l.arms, l.stride = mean, prec, l.arms+1, stride
}

// each calls fn with every non-zero input of f: the offset of its weights
// and its value.
func (l *linear) each(f *features, fn func(off int, v float32)) {
	for _, t := range f.text {
		fn(int(t.idx)*l.stride, t.val)
	}
	if f.hasUser {
		fn(int(f.user)*l.stride, 1)
	}
	base := l.inputs - numDense
	for i, v := range f.dense {
		if v != 0 {
			fn((base+i)*l.stride, v)
		}
	}
}

// means writes w·f of every arm into quality and cost (len arms each). It
// is the inner loop of a decision, written out rather than through each.
func (l *linear) means(f *features, quality, cost []float64) {
	clear(quality)
	clear(cost)
	n := l.stride
	add := func(off int, x float32) {
		w := l.mean[off : off+n]
		for a := range l.arms {
			quality[a] += float64(w[heads*a+headQuality] * x)
			cost[a] += float64(w[heads*a+headCost] * x)
		}
	}
	for _, t := range f.text {
		add(int(t.idx)*n, t.val)
	}
	if f.hasUser {
		add(int(f.user)*n, 1)
	}
	base := l.inputs - numDense
	for i, v := range f.dense {
		if v != 0 {
			add((base+i)*n, v)
		}
	}
}

// predict is the mean of w·f for head h of arm a and its variance under
// the posterior.
func (l *linear) predict(f *features, a, h int) (mean, variance float64) {
	k := heads*a + h
	var m, v float32
	l.each(f, func(off int, x float32) {
		m += l.mean[off+k] * x
		v += x * x / l.prec[off+k]
	})
	return float64(m), float64(v)
}

// updateLogistic teaches arm a quality y in [0, 1] seen with weight w (a
// rating counts fully, an outcome alone less): one Newton step of the
// logistic loss per weight, whose precision first gains the observation's
// curvature p(1−p)x².
func (l *linear) updateLogistic(f *features, a int, y, w float64) {
	m, _ := l.predict(f, a, headQuality)
	p := sigmoid(m)
	g := float32(w * p * (1 - p))
	r := float32(w * (y - p))
	l.update(f, heads*a+headQuality, g, r)
}

// updateGaussian teaches arm a ln cost y seen with weight w under noise
// variance noise: the diagonal form of Bayesian linear regression's update.
func (l *linear) updateGaussian(f *features, a int, y, w, noise float64) {
	m, _ := l.predict(f, a, headCost)
	l.update(f, heads*a+headCost, float32(w/noise), float32(w*(y-m)/noise))
}

// update adds curvature g·x² to the precision of weight k of each input x,
// then moves its mean by r·x/precision.
func (l *linear) update(f *features, k int, g, r float32) {
	l.each(f, func(off int, x float32) {
		i := off + k
		l.prec[i] = min(l.prec[i]+g*x*x, l.maxPrecision)
		l.mean[i] += r * x / l.prec[i]
	})
}

func sigmoid(x float64) float64 {
	x = max(-maxLogit, min(maxLogit, x))
	return 1 / (1 + math.Exp(-x))
}
