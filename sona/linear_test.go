package sona

import (
	"math"
	"testing"
)

func TestLinearLearns(t *testing.T) {
	x := newExtractor(12)
	code := x.extract(Request{Text: "write a python function that sorts a list"})
	chat := x.extract(Request{Text: "say hello to my friend"})
	newModel := func(arms int, maxPrec float64) *linear {
		l := newLinear(x.buckets(), maxPrec)
		for range arms {
			l.addArm()
		}
		return l
	}
	t.Run("logistic tells arms and requests apart", func(t *testing.T) {
		l := newModel(2, DefaultMaxPrecision)
		for range 100 {
			l.updateLogistic(&code, 0, 1, 1)
			l.updateLogistic(&code, 1, 0, 1)
			l.updateLogistic(&chat, 0, 1, 1)
			l.updateLogistic(&chat, 1, 1, 1)
		}
		out, cost := make([]float64, 2), make([]float64, 2)
		l.means(&code, out, cost)
		if p0, p1 := sigmoid(out[0]), sigmoid(out[1]); p0 < 0.9 || p1 > 0.1 {
			t.Fatalf("code: p = %.3f, %.3f; want arm 0 good, arm 1 bad", p0, p1)
		}
		l.means(&chat, out, cost)
		if p0, p1 := sigmoid(out[0]), sigmoid(out[1]); p0 < 0.9 || p1 < 0.5 {
			t.Fatalf("chat: p = %.3f, %.3f; want both good", p0, p1)
		}
	})
	t.Run("the variance shrinks with evidence", func(t *testing.T) {
		l := newModel(1, DefaultMaxPrecision)
		_, v0 := l.predict(&code, 0, headQuality)
		for range 20 {
			l.updateLogistic(&code, 0, 1, 1)
		}
		_, v1 := l.predict(&code, 0, headQuality)
		_, vOther := l.predict(&chat, 0, headQuality)
		if !(v1 < 0.8*v0) || vOther < v1 {
			t.Fatalf("variance %g before, %g after 20 observations, %g for an unseen request", v0, v1, vOther)
		}
	})
	t.Run("gaussian fits ln cost", func(t *testing.T) {
		l := newModel(1, DefaultMaxPrecision)
		for range 200 {
			l.updateGaussian(&code, 0, 2, 1, 0.1)
			l.updateGaussian(&chat, 0, -1, 1, 0.1)
		}
		for _, c := range []struct {
			f    *features
			want float64
		}{{&code, 2}, {&chat, -1}} {
			if m, _ := l.predict(c.f, 0, headCost); math.Abs(m-c.want) > 0.1 {
				t.Fatalf("predicted %g, want %g", m, c.want)
			}
		}
	})
	t.Run("capped precision follows a change", func(t *testing.T) {
		l := newModel(1, 50)
		for range 2000 {
			l.updateLogistic(&code, 0, 1, 1)
		}
		for range 300 {
			l.updateLogistic(&code, 0, 0, 1)
		}
		if m, _ := l.predict(&code, 0, headQuality); sigmoid(m) > 0.5 {
			t.Fatalf("p = %.3f after the arm turned bad", sigmoid(m))
		}
		for _, p := range l.prec {
			if p > 50 {
				t.Fatalf("precision %g above its cap", p)
			}
		}
	})
	t.Run("a new arm keeps the others' weights", func(t *testing.T) {
		l := newModel(1, DefaultMaxPrecision)
		for range 50 {
			l.updateLogistic(&code, 0, 1, 1)
		}
		before, _ := l.predict(&code, 0, headQuality)
		l.addArm()
		after, _ := l.predict(&code, 0, headQuality)
		fresh, v := l.predict(&code, 1, headQuality)
		if before != after || fresh != 0 || v <= 0 {
			t.Fatalf("arm 0: %g then %g; the new arm: %g (variance %g)", before, after, fresh, v)
		}
	})
}
