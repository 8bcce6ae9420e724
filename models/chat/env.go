package chat

import (
	"fmt"

	controlStructures "github.com/nikolalohinski/gonja/v2/builtins/control_structures"
	"github.com/nikolalohinski/gonja/v2/exec"
	"github.com/nikolalohinski/gonja/v2/parser"
)

// Limits that keep a hostile template from running or recursing without end.
const (
	maxMacroDepth = 200       // nested macro calls
	maxRange      = 1_000_000 // elements range() may make
)

// maxSteps bounds the loop iterations and macro calls of one render (about
// five seconds of work); real templates need thousands.
var maxSteps = 1_000_000

// environment is gonja set up as transformers sets up Jinja2: the
// loopcontrols and generation extensions, and only the tags a sandboxed
// template without a loader can use.
var environment = &exec.Environment{
	Context:           exec.NewContext(allGlobals()),
	Filters:           newFilterSet(),
	Tests:             newTestSet(),
	ControlStructures: exec.NewControlStructureSet(controlStructureParsers()),
	Methods:           methods,
}

func allGlobals() map[string]any {
	m := map[string]any{}
	for k, v := range globals {
		m[k] = v
	}
	for k, v := range opFuncs {
		m[k] = v
	}
	return m
}

// newFilterSet registers the filters so that a failing one fails the render
// even where gonja would carry on with its error as a value.
func newFilterSet() *exec.FilterSet {
	m := make(map[string]exec.FilterFunction, len(filters))
	for k, f := range filters {
		m[k] = func(e *exec.Evaluator, in *exec.Value, params *exec.VarArgs) *exec.Value {
			if in.IsError() {
				return in
			}
			out := f(e, in, params)
			if out.IsError() {
				return fail(e, out.Interface().(error))
			}
			return out
		}
	}
	return exec.NewFilterSet(m)
}

func newTestSet() *exec.TestSet {
	m := make(map[string]exec.TestFunction, len(tests))
	for k, f := range tests {
		m[k] = func(e *exec.Evaluator, v *exec.Value, params *exec.VarArgs) (bool, error) {
			if v.IsError() {
				return false, v.Interface().(error)
			}
			ok, err := f(e, v, params)
			if err != nil {
				fail(e, err)
			}
			return ok, err
		}
	}
	return exec.NewTestSet(m)
}

func controlStructureParsers() map[string]parser.ControlStructureParser {
	m := map[string]parser.ControlStructureParser{
		"for":        forParser,
		"macro":      macroParser,
		"set":        setParser,
		"filter":     filterParser,
		"with":       withParser,
		"generation": generationParser,
	}
	for _, name := range []string{"if", "break", "continue", "raw"} {
		p, ok := controlStructures.All.Get(name)
		if !ok {
			panic("gonja has no " + name + " tag")
		}
		m[name] = p
	}
	return m
}

// renderStateOf finds the state of the render a template function runs in.
func renderStateOf(ctx *exec.Context) (*renderState, error) {
	v, _ := ctx.Get(stateKey)
	st, ok := v.(*renderState)
	if !ok {
		return nil, fmt.Errorf("render state missing")
	}
	return st, nil
}

// step counts one unit of work against the render's budget.
func (st *renderState) step() error {
	st.steps++
	if st.steps > maxSteps {
		return fmt.Errorf("template runs more than %d loop iterations and macro calls", maxSteps)
	}
	return nil
}

var globals = map[string]any{
	"none": none,
	"raise_exception": func(e *exec.Evaluator, args *exec.VarArgs) (*exec.Value, error) {
		a, err := bindArgs("raise_exception", args, "message")
		if err != nil {
			return nil, err
		}
		raised := &RaiseError{Message: pyStr(a[0])}
		if st, err := renderStateOf(e.Environment.Context); err == nil && st.raised == nil {
			st.raised = raised
		}
		return nil, raised
	},
	"strftime_now": func(e *exec.Evaluator, args *exec.VarArgs) (*exec.Value, error) {
		a, err := bindArgs("strftime_now", args, "format")
		if err != nil {
			return nil, err
		}
		if a[0] == nil || kindOf(a[0]) != kindString {
			return nil, fmt.Errorf("strftime_now() needs a format string")
		}
		st, err := renderStateOf(e.Environment.Context)
		if err != nil {
			return nil, err
		}
		return exec.AsValue(strftime(a[0].String(), st.now())), nil
	},
	"namespace": func(args *exec.VarArgs) (*exec.Value, error) {
		ns := namespace{}
		if len(args.Args) > 1 {
			return nil, fmt.Errorf("namespace() takes at most one positional argument")
		}
		if len(args.Args) == 1 {
			if kindOf(args.Args[0]) != kindDict {
				return nil, fmt.Errorf("namespace() argument must be a mapping")
			}
			for _, p := range dictPairs(args.Args[0]) {
				ns[pyStr(p.Key)] = p.Value.Interface()
			}
		}
		for k, v := range args.KwArgs {
			ns[k] = v.Interface()
		}
		return exec.AsValue(ns), nil
	},
	"range": func(args *exec.VarArgs) (*exec.Value, error) {
		if len(args.KwArgs) > 0 || len(args.Args) == 0 || len(args.Args) > 3 {
			return nil, fmt.Errorf("range expected 1 to 3 integer arguments")
		}
		n := make([]int, len(args.Args))
		for i, a := range args.Args {
			if k := kindOf(a); k != kindInt && k != kindBool {
				return nil, fmt.Errorf("'%s' object cannot be interpreted as an integer", typeName(a))
			}
			n[i] = int(resolvedInt(a))
		}
		start, stop, step := 0, n[0], 1
		if len(n) > 1 {
			start, stop = n[0], n[1]
		}
		if len(n) > 2 {
			step = n[2]
		}
		if step == 0 {
			return nil, fmt.Errorf("range() arg 3 must not be zero")
		}
		count := 0
		if step > 0 && stop > start {
			count = (stop - start + step - 1) / step
		} else if step < 0 && stop < start {
			count = (start - stop - step - 1) / -step
		}
		if count > maxRange {
			return nil, fmt.Errorf("range too big, more than %d elements", maxRange)
		}
		out := make(pyList, count)
		for i := range out {
			out[i] = start + i*step
		}
		return exec.AsValue(out), nil
	},
	"dict": func(args *exec.VarArgs) (*exec.Value, error) {
		d := &exec.Dict{Pairs: []*exec.Pair{}}
		if len(args.Args) > 1 {
			return nil, fmt.Errorf("dict expected at most 1 argument")
		}
		if len(args.Args) == 1 {
			if kindOf(args.Args[0]) != kindDict {
				return nil, fmt.Errorf("dict() argument must be a mapping")
			}
			d.Pairs = dictPairs(args.Args[0])
		}
		// Keyword order is lost by gonja's parser; sorting keeps renders
		// stable.
		for _, p := range dictPairs(exec.AsValue(args.KwArgs)) {
			d.Pairs = append(d.Pairs, &exec.Pair{Key: p.Key, Value: p.Value})
		}
		return exec.AsValue(d), nil
	},
}
