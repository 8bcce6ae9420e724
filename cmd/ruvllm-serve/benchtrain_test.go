package main

import (
	"strings"
	"testing"
)

// TestPrintTrainWhile checks the two summaries of alternated runs: the
// ratio of the medians, and the median of the ratios of each training run
// to the idle run before it, which a burst of outside load over one pair
// does not move.
func TestPrintTrainWhile(t *testing.T) {
	cases := []struct {
		name           string
		idle, training []float64
		want           []string
	}{
		{"steady", []float64{100, 100, 100}, []float64{90, 95, 92}, []string{"-8.0% (medians)", "0.920x (median of the 3 paired ratios)"}},
		{"a burst of load in one pair", []float64{100, 50, 100, 100}, []float64{95, 47.5, 96, 94}, []string{"-5.5% (medians)", "0.950x (median of the 4 paired ratios)"}},
		{"load falling between the runs of a pair", []float64{100, 100, 200}, []float64{95, 190, 190}, []string{"+90.0% (medians)", "0.950x (median of the 3 paired ratios)"}},
		{"a slow phase", []float64{100, 100, 40, 40}, []float64{40, 40, 36, 36}, []string{"-45.7% (medians)", "0.650x (median of the 4 paired ratios)"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var b strings.Builder
			printTrainWhile(&b, trainWhileResult{Streams: 4, Idle: c.idle, Training: c.training, Updates: 7})
			for _, w := range c.want {
				if !strings.Contains(b.String(), w) {
					t.Errorf("%q does not say %q", b.String(), w)
				}
			}
		})
	}
}
