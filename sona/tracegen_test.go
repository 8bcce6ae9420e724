package sona

import (
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// traceSpec describes a synthetic routing trace: its models, task families
// with their wording, and how hard requests say they are hard. Nothing of
// it is style-a's: other model names and prices, other tasks and templates,
// other difficulty words, another mix.
type traceSpec struct {
	models []genModel
	tasks  []genTask
	// hardWords are phrases that make any request hard when appended;
	// hardShare is the chance a request is hard.
	hardWords []string
	hardShare float64
	// hardFirst puts the hard words before the request instead of after.
	hardFirst bool
}

// genModel is a model of the trace: its general skill, its price per answer
// token, and its verbosity (answer length factor).
type genModel struct {
	name                    string
	skill, price, verbosity float64
}

// genTask is a task family: templates with {a} {b} slots filled from
// fillers, its difficulty, how much harder its hard requests are, its share
// of the mix and its answer length; affinity favours some models.
type genTask struct {
	name       string
	templates  []string
	fillers    [][]string
	difficulty float64
	hardness   float64
	weight     float64
	length     float64
	affinity   map[string]float64
}

// otherSpec is the second trace: five models, seven other tasks, other
// wording.
func otherSpec() traceSpec {
	topics := []string{"volcanoes", "the french revolution", "photosynthesis", "blockchains", "jazz", "tides", "vaccines", "black holes", "the silk road", "compilers"}
	people := []string{"Ana", "Bram", "Chidi", "Dmitri", "Esra", "Farah", "Goran", "Hiro", "Ines", "Jomo"}
	tables := []string{"orders", "users", "invoices", "shipments", "sessions", "payments"}
	units := []string{"miles to kilometres", "pounds to kilograms", "fahrenheit to celsius", "gallons to litres", "inches to centimetres"}
	reviews := []string{"the battery died within an hour", "absolutely loved the soundtrack", "delivery was late but the staff were kind",
		"worst purchase of the year", "it does exactly what it says", "the plot dragged in the middle"}
	nums := func(n int) []string {
		out := make([]string, n)
		for i := range out {
			out[i] = fmt.Sprint(3 + 7*i)
		}
		return out
	}
	return traceSpec{
		models: []genModel{
			{"nano-1b", -1.2, 0.0002, 0.8},
			{"lite-7b", 0.0, 0.0009, 1.0},
			{"core-13b", 0.7, 0.0021, 1.1},
			{"pro-70b", 1.6, 0.0085, 1.2},
			{"coder-34b", 0.4, 0.0030, 0.9},
		},
		tasks: []genTask{
			{name: "sql", templates: []string{"Write a SQL query that lists the {a} table's rows from the last {b} days.",
				"Give me SQL to count rows in {a} grouped by week for {b} weeks."}, fillers: [][]string{tables, nums(8)},
				difficulty: 0.6, hardness: 1.4, weight: 2, length: 120, affinity: map[string]float64{"coder-34b": 1.6}},
			{name: "haiku", templates: []string{"Compose a haiku about {a}.", "Write a short poem on {a} for {b}."},
				fillers: [][]string{topics, people}, difficulty: -1.0, hardness: 0.3, weight: 1, length: 40},
			{name: "convert", templates: []string{"Convert {b} {a}.", "How many is {b} when converting {a}?"},
				fillers: [][]string{units, nums(20)}, difficulty: -0.2, hardness: 1.2, weight: 1.5, length: 25},
			{name: "sentiment", templates: []string{"Is this review positive or negative: {a}", "Classify the sentiment: {a}"},
				fillers: [][]string{reviews, people}, difficulty: -1.4, hardness: 0.2, weight: 1.2, length: 8},
			{name: "explain", templates: []string{"Explain {a} to {b}.", "Why does {a} matter? Answer for {b}."},
				fillers: [][]string{topics, people}, difficulty: 0.2, hardness: 0.9, weight: 1.6, length: 220},
			{name: "proof", templates: []string{"Show that the sum of the first {b} odd numbers is a square.",
				"Prove that {b} cannot be written as a sum of two cubes in more than {a} ways."}, fillers: [][]string{nums(5), nums(12)},
				difficulty: 1.5, hardness: 0.8, weight: 0.8, length: 300},
			{name: "email", templates: []string{"Draft an email to {a} declining the meeting about {b}.",
				"Write a polite reminder to {a} about {b}."}, fillers: [][]string{people, topics},
				difficulty: -0.5, hardness: 0.6, weight: 1.4, length: 150, affinity: map[string]float64{"coder-34b": -1.0}},
		},
		hardWords: []string{"Be rigorous.", "Handle every corner case.", "Justify each step in detail.", "Assume an expert reader."},
		hardShare: 0.3,
	}
}

// thirdSpec is a third trace: three models, where the middle one is best
// at some tasks, other tasks again, a mix dominated by one task, and hard
// requests marked at the front rather than the end.
func thirdSpec() traceSpec {
	things := []string{"a phone number", "an ISO date", "a hex colour", "an email address", "a UK postcode", "a semantic version"}
	dishes := []string{"lentil soup", "pad thai", "shakshuka", "risotto", "pancakes", "ramen"}
	clauses := []string{"the indemnity clause", "a non-compete", "the termination notice", "the liability cap", "an arbitration clause"}
	riddles := []string{"what has keys but no locks", "what gets wetter as it dries", "what has a neck but no head", "what can you catch but not throw"}
	n := []string{"2", "4", "6", "8"}
	return traceSpec{
		models: []genModel{
			{"m-fast", -0.6, 0.0005, 1.0},
			{"m-mid", 0.5, 0.0020, 0.9},
			{"m-big", 1.1, 0.0100, 1.3},
		},
		tasks: []genTask{
			{name: "regex", templates: []string{"Give a regular expression matching %a.", "Regex that validates %a, please"},
				fillers: [][]string{things, n}, difficulty: 0.3, hardness: 1.0, weight: 4, length: 30, affinity: map[string]float64{"m-mid": 1.2}},
			{name: "recipe", templates: []string{"How do I cook %a for %b people?", "Recipe for %a serving %b"},
				fillers: [][]string{dishes, n}, difficulty: -1.2, hardness: 0.4, weight: 1, length: 200},
			{name: "legal", templates: []string{"Summarise %a in plain English.", "What does %a usually mean for an employee?"},
				fillers: [][]string{clauses, n}, difficulty: 0.9, hardness: 0.7, weight: 1, length: 160, affinity: map[string]float64{"m-mid": -0.8}},
			{name: "riddle", templates: []string{"Answer the riddle: %a?", "Riddle me this: %a"},
				fillers: [][]string{riddles, n}, difficulty: 0.0, hardness: 1.5, weight: 1, length: 12},
		},
		hardWords: []string{"(Strict mode)", "[production]", "URGENT AND EXACT:"},
		hardShare: 0.4,
		hardFirst: true,
	}
}

// generate draws n queries from spec with rng. Each model's chance of a
// correct answer is a logistic function of its skill (plus its affinity
// to the task) minus the task's difficulty (plus its hardness when the
// request is hard); the cost is the answer's length, which the task, the
// difficulty, the model's verbosity and noise set, times the model's price.
func (spec traceSpec) generate(rng *rand.Rand, n int, prefix string) ([]TraceQuery, []string) {
	var total float64
	for _, t := range spec.tasks {
		total += t.weight
	}
	out := make([]TraceQuery, n)
	kinds := make([]string, n)
	for i := range out {
		u := rng.Float64() * total
		task := spec.tasks[len(spec.tasks)-1]
		for _, t := range spec.tasks {
			if u < t.weight {
				task = t
				break
			}
			u -= t.weight
		}
		tmpl := task.templates[rng.IntN(len(task.templates))]
		text := strings.NewReplacer("{a}", task.fillers[0][rng.IntN(len(task.fillers[0]))], "%a", task.fillers[0][rng.IntN(len(task.fillers[0]))],
			"{b}", task.fillers[1][rng.IntN(len(task.fillers[1]))], "%b", task.fillers[1][rng.IntN(len(task.fillers[1]))]).Replace(tmpl)
		hard := rng.Float64() < spec.hardShare
		switch {
		case hard && spec.hardFirst:
			text = spec.hardWords[rng.IntN(len(spec.hardWords))] + " " + text
		case hard:
			text += " " + spec.hardWords[rng.IntN(len(spec.hardWords))]
		}
		q := TraceQuery{ID: fmt.Sprintf("%s-%d", prefix, i), Prompt: text, Quality: map[string]float64{}, Cost: map[string]float64{}, Task: task.name}
		kinds[i] = fmt.Sprint(task.name, "/", hard)
		length := task.length * math.Exp(0.4*rng.NormFloat64())
		if hard {
			length *= 2
		}
		for _, m := range spec.models {
			logit := 2 * (m.skill + task.affinity[m.name] - task.difficulty)
			if hard {
				logit -= 2 * task.hardness
			}
			if rng.Float64() < 1/(1+math.Exp(-logit)) {
				q.Quality[m.name] = 1
			} else {
				q.Quality[m.name] = 0
			}
			q.Cost[m.name] = math.Round(length*m.verbosity*math.Exp(0.2*rng.NormFloat64())*m.price*1e5) / 1e5
		}
		out[i] = q
	}
	return out, kinds
}

// generated is a generated trace: its splits (the eval split without its
// tasks, as a router sees it), and each query's hidden kind (task and
// whether it is hard), which only the tests' ideal router reads.
type generated struct {
	train, eval           []TraceQuery
	trainKinds, evalKinds []string
}

func (spec traceSpec) trace(seed uint64, prefix string, nTrain, nEval int) generated {
	rng := rand.New(rand.NewPCG(seed, 2026))
	var g generated
	g.train, g.trainKinds = spec.generate(rng, nTrain, prefix)
	g.eval, g.evalKinds = spec.generate(rng, nEval, prefix)
	for i := range g.eval {
		g.eval[i].Task = ""
	}
	return g
}

// otherTrace is the second trace, seeded: 2,000 train queries and 3,000
// eval queries.
func otherTrace() generated { return otherSpec().trace(15, "b", 2000, 3000) }

// thirdTrace is the third trace, seeded: 1,500 train queries and 2,500
// eval queries.
func thirdTrace() generated { return thirdSpec().trace(16, "c", 1500, 2500) }

// TestWriteOtherTrace writes the second trace (or with SONA_TRACE=third the
// third) as PREFIX.train.jsonl and PREFIX.eval.jsonl when
// SONA_TRACE_OUT=PREFIX is set, so that route-eval can replay it:
// SONA_TRACE_OUT=/tmp/style-b go test ./sona -run TestWriteOtherTrace.
func TestWriteOtherTrace(t *testing.T) {
	prefix := os.Getenv("SONA_TRACE_OUT")
	if prefix == "" {
		t.Skip("set SONA_TRACE_OUT=PREFIX to write the second trace (SONA_TRACE=third for the third)")
	}
	g := otherTrace()
	if os.Getenv("SONA_TRACE") == "third" {
		g = thirdTrace()
	}
	for _, split := range []struct {
		name string
		qs   []TraceQuery
	}{{"train", g.train}, {"eval", g.eval}} {
		f, err := os.Create(filepath.Clean(prefix + "." + split.name + ".jsonl"))
		if err != nil {
			t.Fatal(err)
		}
		enc := json.NewEncoder(f)
		for _, q := range split.qs {
			if err := enc.Encode(q); err != nil {
				t.Fatal(err)
			}
		}
		if err := f.Close(); err != nil {
			t.Fatal(err)
		}
	}
}
