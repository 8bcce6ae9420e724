package sona

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"math"
	"os"
	"slices"
	"strconv"
	"time"
)

// maxTraceLine bounds one line of a trace file.
const maxTraceLine = 4 << 20

// TraceQuery is one query of a routing trace (RouterBench's logs, as
// ../shared/routing/README.md describes them): a prompt, and for every
// model whether it answered well and what the answer cost.
type TraceQuery struct {
	ID     string `json:"id"`
	Prompt string `json:"prompt"`
	// Quality[m] in [0, 1] is how good model m's answer was (1: correct).
	Quality map[string]float64 `json:"quality"`
	// Cost[m] ≥ 0 is what model m's answer cost.
	Cost map[string]float64 `json:"cost"`
	// Task is the hidden task family; only a train split has it, and the
	// router never reads it.
	Task string `json:"task,omitempty"`
}

// ReadTrace reads a trace: one JSON query a line (blank lines skipped).
// Every query must give a quality and a cost for the same models.
func ReadTrace(r io.Reader) ([]TraceQuery, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<16), maxTraceLine)
	var out []TraceQuery
	var models []string
	for line := 1; sc.Scan(); line++ {
		b := sc.Bytes()
		if len(b) == 0 {
			continue
		}
		var q TraceQuery
		if err := json.Unmarshal(b, &q); err != nil {
			return nil, fmt.Errorf("trace line %d: %w", line, err)
		}
		ms := slices.Sorted(maps.Keys(q.Quality))
		if len(ms) == 0 {
			return nil, fmt.Errorf("trace line %d: no model has a quality", line)
		}
		if models == nil {
			models = ms
		} else if !slices.Equal(ms, models) {
			return nil, fmt.Errorf("trace line %d: the models %v are not the first line's %v", line, ms, models)
		}
		for _, m := range ms {
			qv, c, ok := q.Quality[m], q.Cost[m], false
			_, ok = q.Cost[m]
			switch {
			case !ok:
				return nil, fmt.Errorf("trace line %d: model %q has no cost", line, m)
			case math.IsNaN(qv) || qv < 0 || qv > 1:
				return nil, fmt.Errorf("trace line %d: quality %g of %q is outside [0, 1]", line, qv, m)
			case math.IsNaN(c) || math.IsInf(c, 0) || c < 0:
				return nil, fmt.Errorf("trace line %d: cost %g of %q is not a finite cost", line, c, m)
			}
		}
		if len(q.Cost) != len(ms) {
			return nil, fmt.Errorf("trace line %d: a cost is given for a model without a quality", line)
		}
		out = append(out, q)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("reading the trace: %w", err)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("the trace holds no query")
	}
	return out, nil
}

// ReadTraceFile reads the trace at path.
func ReadTraceFile(path string) ([]TraceQuery, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	qs, err := ReadTrace(f)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return qs, nil
}

// Models lists the trace's models, sorted.
func Models(qs []TraceQuery) []string {
	if len(qs) == 0 {
		return nil
	}
	return slices.Sorted(maps.Keys(qs[0].Quality))
}

// Point is a mean quality and a mean cost per query.
type Point struct {
	Quality float64 `json:"quality"`
	Cost    float64 `json:"cost"`
}

// Evaluation is how a router did on a trace's eval split, beside every
// single model and the oracle.
type Evaluation struct {
	CostWeight float64 `json:"cost_weight"`
	Quality    float64 `json:"quality"`
	Cost       float64 `json:"cost"`
	// Share[m] is the fraction of queries routed to model m.
	Share map[string]float64 `json:"share"`
	// Explored is the fraction of decisions that explored.
	Explored float64          `json:"explored"`
	Single   map[string]Point `json:"single"`
	// Oracle picks, per query, the best quality at the least cost.
	Oracle Point `json:"oracle"`
	// DecisionP99 is the 99th percentile of the time of one decision, in
	// microseconds.
	DecisionP99 float64 `json:"decision_us_p99"`
}

// Evaluate runs a router made with o on a trace, as
// ../shared/routing/README.md describes: it learns from train, where every
// model's quality and cost is known, then replays eval in order, choosing
// one model per query and learning only that model's quality and cost.
func Evaluate(train, eval []TraceQuery, o Options) (Evaluation, error) {
	if len(eval) == 0 {
		return Evaluation{}, fmt.Errorf("the eval split holds no query")
	}
	models := Models(eval)
	if tm := Models(train); len(train) > 0 && !slices.Equal(tm, models) {
		return Evaluation{}, fmt.Errorf("the train split's models %v are not the eval split's %v", tm, models)
	}
	r, err := New(o)
	if err != nil {
		return Evaluation{}, err
	}
	defer r.Close()
	for _, q := range train {
		outs := make(map[string]Outcome, len(models))
		for _, m := range models {
			outs[m] = Outcome{Quality: q.Quality[m], Rated: true, Cost: q.Cost[m]}
		}
		if err := r.Learn(Request{Text: q.Prompt}, outs); err != nil {
			return Evaluation{}, err
		}
	}
	arms := make([]Arm, len(models))
	for i, m := range models {
		arms[i] = Arm{Name: m}
	}
	ev := Evaluation{CostWeight: r.opt.CostWeight, Share: map[string]float64{}, Single: map[string]Point{}}
	times := make([]time.Duration, 0, len(eval))
	for i, q := range eval {
		id := "eval-" + strconv.Itoa(i)
		start := time.Now()
		d, err := r.Decide(Request{ID: id, Text: q.Prompt}, arms)
		times = append(times, time.Since(start))
		if err != nil {
			return Evaluation{}, err
		}
		r.Observe(id, Outcome{Quality: q.Quality[d.Arm], Rated: true, Cost: q.Cost[d.Arm]})
		ev.Quality += q.Quality[d.Arm]
		ev.Cost += q.Cost[d.Arm]
		ev.Share[d.Arm]++
		if d.Explore {
			ev.Explored++
		}
		for _, m := range models {
			p := ev.Single[m]
			p.Quality += q.Quality[m]
			p.Cost += q.Cost[m]
			ev.Single[m] = p
		}
		ev.Oracle.Quality += q.Quality[oracle(q, models)]
		ev.Oracle.Cost += q.Cost[oracle(q, models)]
	}
	n := float64(len(eval))
	ev.Quality /= n
	ev.Cost /= n
	ev.Explored /= n
	for m := range ev.Share {
		ev.Share[m] /= n
	}
	for m, p := range ev.Single {
		ev.Single[m] = Point{Quality: p.Quality / n, Cost: p.Cost / n}
	}
	ev.Oracle = Point{Quality: ev.Oracle.Quality / n, Cost: ev.Oracle.Cost / n}
	slices.Sort(times)
	ev.DecisionP99 = float64(times[(len(times)*99)/100].Nanoseconds()) / 1e3
	return ev, nil
}

// oracle is the model of the best quality on q, the cheapest among equals.
func oracle(q TraceQuery, models []string) string {
	best := models[0]
	for _, m := range models[1:] {
		if q.Quality[m] > q.Quality[best] || (q.Quality[m] == q.Quality[best] && q.Cost[m] < q.Cost[best]) {
			best = m
		}
	}
	return best
}
