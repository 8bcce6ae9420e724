package sparse

import (
	"math"
	"sort"
)

// Levels is the number of sparsity levels a calibration gives each matrix
// a threshold for: 0, 1%, … 99%.
const Levels = 100

// Calibration gathers the magnitudes of the inputs of a model's matrices
// over calibration text, to turn them into thresholds. Each matrix (by
// name) has a histogram of |x| with 128 bins per power of two (the top 16
// bits of the float), so a threshold is placed within 0.8% of the
// magnitude that zeroes the wanted fraction, whatever the scale of the
// activations; it holds counts, not values, so any amount of text fits.
type Calibration struct {
	hists map[string]*histogram
}

// histogram counts magnitudes by the top 16 bits of their float32 bits.
type histogram struct {
	bins [1 << 15]uint64
	n    uint64
}

// NewCalibration returns an empty calibration.
func NewCalibration() *Calibration { return &Calibration{hists: map[string]*histogram{}} }

// Observe records the entries of x, any number of input vectors of matrix
// name (NaNs and infinities are counted as the largest magnitudes).
func (c *Calibration) Observe(name string, x []float32) {
	h := c.hists[name]
	if h == nil {
		h = &histogram{}
		c.hists[name] = h
	}
	for _, v := range x {
		b := math.Float32bits(v) &^ (1 << 31) >> 16
		h.bins[min(b, 1<<15-1)]++
	}
	h.n += uint64(len(x))
}

// Names lists the matrices observed, sorted.
func (c *Calibration) Names() []string {
	names := make([]string, 0, len(c.hists))
	for n := range c.hists {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// Count is the number of input entries observed for matrix name.
func (c *Calibration) Count(name string) uint64 {
	if h := c.hists[name]; h != nil {
		return h.n
	}
	return 0
}

// Quantiles returns, for each fraction fs[i] (ascending, in [0, 1)), the
// magnitude at or below which that fraction of matrix name's observed
// inputs lie: the thresholds that zero them.
func (c *Calibration) Quantiles(name string, fs []float64) []float32 {
	h := c.hists[name]
	out := make([]float32, len(fs))
	if h == nil || h.n == 0 {
		return out
	}
	var below uint64 // entries in the bins before b
	b := 0
	for i, f := range fs {
		want := f * float64(h.n)
		for b < len(h.bins)-1 && float64(below+h.bins[b]) < want {
			below += h.bins[b]
			b++
		}
		// Interpolate within bin b, between its lowest and highest value.
		lo := math.Float32frombits(uint32(b) << 16)
		hi := math.Float32frombits(uint32(b+1)<<16 - 1)
		frac := 0.0
		if h.bins[b] > 0 {
			frac = (want - float64(below)) / float64(h.bins[b])
		}
		out[i] = lo + float32(frac)*(hi-lo)
		if i > 0 && out[i] < out[i-1] {
			out[i] = out[i-1]
		}
	}
	return out
}

// Uniform is the table of matrix name that gives it sparsity s at level
// s: the quantiles of its inputs at k/Levels. Every matrix then zeroes the
// same fraction of its inputs on the calibration text.
func (c *Calibration) Uniform(name string) Table {
	fs := make([]float64, Levels)
	for k := range fs {
		fs[k] = float64(k) / Levels
	}
	t := c.Quantiles(name, fs)
	t[0] = 0 // level 0 drops only exact zeros
	return t
}
