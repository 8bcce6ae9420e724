package main

import (
	"cmp"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/ruvllm/ruvllm/sona"
)

func init() {
	register("route-eval", "replay a routing trace through the router: quality and cost against every single model", runRouteEval)
}

const routeEvalSynopsis = "--trace PREFIX [--cost-weight W[,W...]] [--json] [--seed S] [--no-explore]"

func runRouteEval(e *env, args []string) error {
	fs := newFlags("route-eval", routeEvalSynopsis)
	prefix := fs.String("trace", "", "the trace: PREFIX.train.jsonl is learnt from, PREFIX.eval.jsonl replayed with bandit feedback")
	weights := fs.String("cost-weight", "0", "W, the router maximises quality − W × cost; several, comma-separated, give the quality–cost curve")
	asJSON := fs.Bool("json", false, "print one JSON object per cost weight")
	seed := fs.Uint64("seed", 1, "seed of exploration")
	noExplore := fs.Bool("no-explore", false, "always take the arm of the best expected score")
	var o sona.Options
	fs.IntVar(&o.Neighbours, "neighbours", sona.DefaultNeighbours, "similar past trajectories that inform a decision")
	fs.Float64Var(&o.PriorStrength, "prior-strength", sona.DefaultPriorStrength, "outcomes the linear estimate is worth at most beside the neighbours'")
	fs.Float64Var(&o.MinSimilarity, "min-similarity", sona.DefaultMinSimilarity, "least cosine similarity of a neighbour")
	fs.Float64Var(&o.ExploreRate, "explore-rate", sona.DefaultExploreRate, "share of decisions that may explore")
	fs.Float64Var(&o.ExploreZ, "explore-z", sona.DefaultExploreZ, "standard deviations below the best an arm may be and still be explored")
	pos, err := fs.parse(args, e.stdout)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return fmt.Errorf("%w: unexpected argument %q (see -h)", errUsage, pos[0])
	}
	if *prefix == "" {
		return fmt.Errorf("%w: --trace PREFIX is required", errUsage)
	}
	ws, err := parseWeights(*weights)
	if err != nil {
		return fmt.Errorf("%w: --cost-weight: %v", errUsage, err)
	}
	train, err := sona.ReadTraceFile(*prefix + ".train.jsonl")
	if err != nil {
		return err
	}
	eval, err := sona.ReadTraceFile(*prefix + ".eval.jsonl")
	if err != nil {
		return err
	}
	for i, w := range ws {
		o.CostWeight, o.Seed, o.NoExplore = w, *seed, *noExplore
		ev, err := sona.Evaluate(train, eval, o)
		if err != nil {
			return err
		}
		if *asJSON {
			b, err := json.Marshal(ev)
			if err != nil {
				return err
			}
			fmt.Fprintf(e.stdout, "%s\n", b)
			continue
		}
		if i == 0 {
			printTraceSummary(e.stdout, *prefix, len(train), len(eval), ev)
		}
		printEvaluation(e.stdout, ev)
	}
	return nil
}

// parseWeights reads a comma-separated list of cost weights.
func parseWeights(s string) ([]float64, error) {
	var ws []float64
	for part := range strings.SplitSeq(s, ",") {
		w, err := strconv.ParseFloat(strings.TrimSpace(part), 64)
		if err != nil || w < 0 || math.IsInf(w, 0) {
			return nil, fmt.Errorf("%q is not a cost weight (a number ≥ 0)", part)
		}
		ws = append(ws, w)
	}
	return ws, nil
}

// bestSingle is the model of the best quality, the cheapest among equals.
func bestSingle(ev sona.Evaluation) string {
	best := ""
	for _, m := range slices.Sorted(func(yield func(string) bool) {
		for m := range ev.Single {
			if !yield(m) {
				return
			}
		}
	}) {
		p, b := ev.Single[m], ev.Single[best]
		if best == "" || p.Quality > b.Quality || (p.Quality == b.Quality && p.Cost < b.Cost) {
			best = m
		}
	}
	return best
}

// printTraceSummary prints the single models and the oracle once.
func printTraceSummary(w io.Writer, prefix string, trainN, evalN int, ev sona.Evaluation) {
	fmt.Fprintf(w, "trace %s: learnt from %d queries, replayed %d\n", prefix, trainN, evalN)
	models := make([]string, 0, len(ev.Single))
	for m := range ev.Single {
		models = append(models, m)
	}
	slices.SortFunc(models, func(a, b string) int { return cmp.Compare(ev.Single[a].Cost, ev.Single[b].Cost) })
	for _, m := range models {
		fmt.Fprintf(w, "single %-12s quality %.4f  cost %.4f\n", m, ev.Single[m].Quality, ev.Single[m].Cost)
	}
	fmt.Fprintf(w, "oracle %-12s quality %.4f  cost %.4f\n", "", ev.Oracle.Quality, ev.Oracle.Cost)
}

// printEvaluation prints one cost weight's result against the best single
// model.
func printEvaluation(w io.Writer, ev sona.Evaluation) {
	best := bestSingle(ev)
	b := ev.Single[best]
	fmt.Fprintf(w, "router W=%-8g quality %.4f (%.1f%% of %s)  cost %.4f (%.1f%% of %s)  explored %.1f%%  decision p99 %.0f µs\n",
		ev.CostWeight, ev.Quality, 100*ev.Quality/b.Quality, best, ev.Cost, 100*ev.Cost/b.Cost, best, 100*ev.Explored, ev.DecisionP99)
	shares := make([]string, 0, len(ev.Share))
	for m, s := range ev.Share {
		shares = append(shares, fmt.Sprintf("%s %.1f%%", m, 100*s))
	}
	slices.Sort(shares)
	fmt.Fprintf(w, "       share: %s\n", strings.Join(shares, ", "))
}
