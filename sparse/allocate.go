package sparse

import (
	"fmt"
	"sort"
)

// A greedy allocation (TEAL's idea, measured end to end) gives the parts of
// a model different sparsities for the same average: a part whose inputs
// carry little (the attention output's, SwiGLU's product) is thinned more
// than one that carries much. The parts are units, the matrices of one
// block that multiply one input. Each unit's error curve is measured alone
// (the model's error with only that unit thresholded, at a few
// sparsities); the allocation of every average level then fills the
// cheapest stretches of the curves first, per weight skipped: optimal for
// curves that are convex and add up, which the lower convex hull of each
// measured curve makes them.

// Unit is a part of a model whose sparsity an allocation sets: the
// matrices that multiply one input in one block.
type Unit struct {
	Matrices []string // their GGUF names
	// Weights is the number of weights of the matrices: the share of the
	// model's reading one level of this unit's sparsity skips.
	Weights int64
	// Errors[i] is the model's error with only this unit thresholded at
	// sparsity Probes[i] (Allocate's probes).
	Errors []float64
}

// Probes are the sparsities at which a greedy calibration measures each
// unit's error curve.
var Probes = []float64{0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9}

// segment is one stretch of a unit's convex error curve.
type segment struct {
	unit     int
	from, to float64 // sparsities
	cost     float64 // error per unit of the average sparsity it adds
}

// Allocate returns, for every level k < Levels, each unit's sparsity when
// the model's average sparsity (weighted by Weights) is k/Levels: levels[k][u].
// Each unit's sparsity rises with the level. Up to the average at which
// every unit is at the last probe, the allocation is the one that least
// adds up the measured errors; beyond it every unit rises evenly to the
// top level.
func Allocate(units []Unit, probes []float64) ([][]float64, error) {
	var total float64
	var segs []segment
	for u, un := range units {
		if len(un.Errors) != len(probes) || un.Weights <= 0 {
			return nil, fmt.Errorf("sparse: unit %d has %d errors for %d probes and %d weights", u, len(un.Errors), len(probes), un.Weights)
		}
		total += float64(un.Weights)
		xs, ys := hull(probes, un.Errors)
		for i := 1; i < len(xs); i++ {
			slope := (ys[i] - ys[i-1]) / (xs[i] - xs[i-1])
			segs = append(segs, segment{unit: u, from: xs[i-1], to: xs[i], cost: slope / float64(un.Weights)})
		}
	}
	// Stable: a unit's own segments keep their order when costs tie.
	sort.SliceStable(segs, func(i, j int) bool { return segs[i].cost < segs[j].cost })
	top := probes[len(probes)-1]
	levels := make([][]float64, Levels)
	cur := make([]float64, len(units))
	avg, next := 0.0, 0 // the average of cur; the next segment to take
	for k := range levels {
		want := float64(k) / Levels
		for next < len(segs) && avg < want {
			sg := &segs[next]
			w := float64(units[sg.unit].Weights) / total
			if gain := (sg.to - cur[sg.unit]) * w; avg+gain <= want {
				cur[sg.unit], avg = sg.to, avg+gain
				next++
			} else {
				cur[sg.unit] += (want - avg) / w
				avg = want
			}
		}
		row := append([]float64(nil), cur...)
		if avg < want { // every unit at the last probe: rise evenly
			f := (want - avg) / (MaxSparsity(Levels) - avg)
			for u := range row {
				row[u] += f * (MaxSparsity(Levels) - top)
			}
		}
		levels[k] = row
	}
	return levels, nil
}

// hull is the lower convex hull of the curve through (0, 0) and (xs[i],
// ys[i]) (ascending xs), with errors below zero (noise) taken as zero.
func hull(xs, ys []float64) (hx, hy []float64) {
	hx, hy = []float64{0}, []float64{0}
	for i, x := range xs {
		y := max(ys[i], 0)
		for len(hx) >= 2 {
			n := len(hx)
			// Drop the last point while it lies on or above the line from
			// the one before it to (x, y).
			if (hy[n-1]-hy[n-2])*(x-hx[n-2]) >= (y-hy[n-2])*(hx[n-1]-hx[n-2]) {
				hx, hy = hx[:n-1], hy[:n-1]
				continue
			}
			break
		}
		hx, hy = append(hx, x), append(hy, y)
	}
	return hx, hy
}
