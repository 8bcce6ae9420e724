package chat

import (
	"fmt"
	"io"

	controlStructures "github.com/nikolalohinski/gonja/v2/builtins/control_structures"
	"github.com/nikolalohinski/gonja/v2/exec"
	"github.com/nikolalohinski/gonja/v2/nodes"
	"github.com/nikolalohinski/gonja/v2/parser"
	"github.com/nikolalohinski/gonja/v2/tokens"
)

// The tags a chat template may use besides gonja's if, break, continue and
// raw. The set, filter and with tags are written here rather than taken from
// gonja, whose versions keep their expressions where the rewrite of ast.go
// cannot reach them, and make block captures Markup where Jinja2 (without
// autoescape) makes plain strings; for and macro wrap gonja's to bound the
// work a template may do.

// setTag is {% set a = expr %}, {% set a, b = expr %}, {% set ns.attr = expr %}
// and the block form {% set a | filters %}...{% endset %}.
type setTag struct {
	at      *tokens.Token
	targets []nodes.Expression // *nodes.Name or *nodes.GetAttribute
	value   nodes.Expression
	body    *nodes.Wrapper
	filters []*nodes.FilterCall
}

func (s *setTag) Position() *tokens.Token { return s.at }
func (s *setTag) String() string          { return "set" }

func setParser(p *parser.Parser, args *parser.Parser) (nodes.ControlStructure, error) {
	s := &setTag{at: p.Current()}
	for {
		name := args.Match(tokens.Name)
		if name == nil {
			return nil, args.Error("expected a name to assign to", args.Current())
		}
		var target nodes.Expression = &nodes.Name{Name: name}
		if dot := args.Match(tokens.Dot); dot != nil {
			attr := args.Match(tokens.Name)
			if attr == nil {
				return nil, args.Error("expected an attribute name", args.Current())
			}
			target = &nodes.GetAttribute{Location: dot, Node: target, Attribute: attr.Val}
		}
		s.targets = append(s.targets, target)
		if args.Match(tokens.Comma) == nil {
			break
		}
	}
	if args.Match(tokens.Assign) != nil {
		value, err := parseTuple(args)
		if err != nil {
			return nil, err
		}
		s.value = value
		if !args.End() {
			return nil, args.Error("unexpected text after the value of set", args.Current())
		}
		return s, nil
	}
	if len(s.targets) != 1 {
		return nil, args.Error("a set block assigns one name", args.Current())
	}
	for args.Match(tokens.Pipe) != nil {
		f, err := args.ParseFilter()
		if err != nil {
			return nil, err
		}
		s.filters = append(s.filters, f)
	}
	if !args.End() {
		return nil, args.Error("expected '=' or the end of the set tag", args.Current())
	}
	body, end, err := p.WrapUntil("endset")
	if err != nil {
		return nil, err
	}
	if !end.End() {
		return nil, end.Error("endset takes no arguments", end.Current())
	}
	s.body = body
	return s, nil
}

// parseTuple parses an expression, or several separated by commas into a
// tuple, as the right side of an assignment may be.
func parseTuple(args *parser.Parser) (nodes.Expression, error) {
	first, err := args.ParseExpression()
	if err != nil {
		return nil, err
	}
	if first == nil {
		return nil, args.Error("expected an expression", args.Current())
	}
	at := args.Current()
	if args.Current(tokens.Comma) == nil {
		return first, nil
	}
	items := []nodes.Expression{first}
	for args.Match(tokens.Comma) != nil {
		if args.End() {
			break
		}
		e, err := args.ParseExpression()
		if err != nil {
			return nil, err
		}
		items = append(items, e)
	}
	return &nodes.Tuple{Location: at, Val: items}, nil
}

func (s *setTag) Execute(r *exec.Renderer, _ *nodes.ControlStructureBlock) error {
	var value *exec.Value
	if s.body != nil {
		text, err := capture(r, s.body)
		if err != nil {
			return err
		}
		value, err = applyFilters(r, s.filters, exec.AsValue(text))
		if err != nil {
			return err
		}
	} else {
		value = r.Eval(s.value)
		if value.IsError() {
			return value.Interface().(error)
		}
	}
	if len(s.targets) == 1 {
		return assign(r, s.targets[0], value)
	}
	items, err := iterate(value)
	if err != nil {
		return fmt.Errorf("TypeError: cannot unpack non-iterable %s object", typeName(value))
	}
	if len(items) != len(s.targets) {
		return fmt.Errorf("ValueError: expected %d values to unpack, got %d", len(s.targets), len(items))
	}
	for i, t := range s.targets {
		if err := assign(r, t, items[i]); err != nil {
			return err
		}
	}
	return nil
}

// assign binds a name in the current scope, or sets a namespace attribute.
func assign(r *exec.Renderer, target nodes.Expression, value *exec.Value) error {
	switch t := target.(type) {
	case *nodes.Name:
		r.Environment.Context.Set(t.Name.Val, value)
		return nil
	case *nodes.GetAttribute:
		obj := r.Eval(t.Node)
		if obj.IsError() {
			return obj.Interface().(error)
		}
		ns, ok := obj.Interface().(namespace)
		if !ok {
			return fmt.Errorf("TemplateRuntimeError: cannot assign attribute on non-namespace object")
		}
		ns[t.Attribute] = value
		return nil
	}
	return fmt.Errorf("cannot assign to %T", target)
}

// capture renders a block body in its own scope and returns the text.
func capture(r *exec.Renderer, body *nodes.Wrapper) (string, error) {
	var buf limitedBuilder
	sub := r.Inherit()
	sub.Output = &buf
	if err := sub.ExecuteWrapper(body); err != nil {
		return "", err
	}
	return buf.String(), nil
}

func applyFilters(r *exec.Renderer, calls []*nodes.FilterCall, v *exec.Value) (*exec.Value, error) {
	for _, f := range calls {
		v = r.Evaluator().ExecuteFilter(f, v)
		if v.IsError() {
			return nil, v.Interface().(error)
		}
	}
	return v, nil
}

// filterTag is {% filter name(args) | ... %}...{% endfilter %}.
type filterTag struct {
	at      *tokens.Token
	filters []*nodes.FilterCall
	body    *nodes.Wrapper
}

func (f *filterTag) Position() *tokens.Token { return f.at }
func (f *filterTag) String() string          { return "filter" }

func filterParser(p *parser.Parser, args *parser.Parser) (nodes.ControlStructure, error) {
	f := &filterTag{at: p.Current()}
	for {
		call, err := args.ParseFilter()
		if err != nil {
			return nil, err
		}
		f.filters = append(f.filters, call)
		if args.Match(tokens.Pipe) == nil {
			break
		}
	}
	if !args.End() {
		return nil, args.Error("unexpected text in filter tag", args.Current())
	}
	body, end, err := p.WrapUntil("endfilter")
	if err != nil {
		return nil, err
	}
	if !end.End() {
		return nil, end.Error("endfilter takes no arguments", end.Current())
	}
	f.body = body
	return f, nil
}

func (f *filterTag) Execute(r *exec.Renderer, _ *nodes.ControlStructureBlock) error {
	text, err := capture(r, f.body)
	if err != nil {
		return err
	}
	v, err := applyFilters(r, f.filters, exec.AsValue(text))
	if err != nil {
		return err
	}
	_, err = io.WriteString(r.Output, pyStr(v))
	return err
}

// withTag is {% with a = expr, ... %}...{% endwith %}: a scope with names.
type withTag struct {
	at     *tokens.Token
	names  []string
	values []nodes.Expression
	body   *nodes.Wrapper
}

func (w *withTag) Position() *tokens.Token { return w.at }
func (w *withTag) String() string          { return "with" }

func withParser(p *parser.Parser, args *parser.Parser) (nodes.ControlStructure, error) {
	w := &withTag{at: p.Current()}
	for !args.End() {
		name := args.Match(tokens.Name)
		if name == nil || args.Match(tokens.Assign) == nil {
			return nil, args.Error("expected name = value in with tag", args.Current())
		}
		value, err := args.ParseExpression()
		if err != nil {
			return nil, err
		}
		w.names = append(w.names, name.Val)
		w.values = append(w.values, value)
		if args.Match(tokens.Comma) == nil {
			break
		}
	}
	if !args.End() {
		return nil, args.Error("unexpected text in with tag", args.Current())
	}
	body, end, err := p.WrapUntil("endwith")
	if err != nil {
		return nil, err
	}
	if !end.End() {
		return nil, end.Error("endwith takes no arguments", end.Current())
	}
	w.body = body
	return w, nil
}

func (w *withTag) Execute(r *exec.Renderer, _ *nodes.ControlStructureBlock) error {
	sub := r.Inherit()
	for i, name := range w.names {
		v := r.Eval(w.values[i])
		if v.IsError() {
			return v.Interface().(error)
		}
		sub.Environment.Context.Set(name, v)
	}
	return sub.ExecuteWrapper(w.body)
}

// forParser is gonja's for tag with a step counted on each iteration, and
// without recursive loops, which no chat template needs and whose recursion
// could not be bounded.
func forParser(p *parser.Parser, args *parser.Parser) (nodes.ControlStructure, error) {
	start := args.Current()
	forTag, _ := controlStructures.All.Get("for")
	cs, err := forTag(p, args)
	if err != nil {
		return nil, err
	}
	f, ok := cs.(*controlStructures.ForControlStructure)
	if !ok {
		return nil, fmt.Errorf("unexpected for tag %T", cs)
	}
	if f.Recursive {
		return nil, fmt.Errorf("recursive for loops are not supported")
	}
	counter := &nodes.ControlStructureBlock{Location: start, Name: "step", ControlStructure: &stepCounter{at: start}}
	f.BodyWrapper.Nodes = append([]nodes.Node{counter}, f.BodyWrapper.Nodes...)
	return f, nil
}

// stepCounter is a node placed first in loop bodies to count iterations.
type stepCounter struct{ at *tokens.Token }

func (s *stepCounter) Position() *tokens.Token { return s.at }
func (s *stepCounter) String() string          { return "step" }

func (s *stepCounter) Execute(r *exec.Renderer, _ *nodes.ControlStructureBlock) error {
	st, err := renderStateOf(r.Environment.Context)
	if err != nil {
		return err
	}
	return st.step()
}

// macroParser is gonja's macro tag with calls counted and their nesting
// bounded, so a recursive macro fails instead of exhausting the stack.
func macroParser(p *parser.Parser, args *parser.Parser) (nodes.ControlStructure, error) {
	macroTag, _ := controlStructures.All.Get("macro")
	cs, err := macroTag(p, args)
	if err != nil {
		return nil, err
	}
	m, ok := cs.(*controlStructures.MacroControlStructure)
	if !ok {
		return nil, fmt.Errorf("unexpected macro tag %T", cs)
	}
	return &boundedMacro{m}, nil
}

type boundedMacro struct {
	*controlStructures.MacroControlStructure
}

func (m *boundedMacro) Execute(r *exec.Renderer, tag *nodes.ControlStructureBlock) error {
	if err := m.MacroControlStructure.Execute(r, tag); err != nil {
		return err
	}
	st, err := renderStateOf(r.Environment.Context)
	if err != nil {
		return err
	}
	v, _ := r.Environment.Context.Get(m.Name)
	call, ok := v.(exec.Macro)
	if !ok {
		return fmt.Errorf("macro %s did not define a function", m.Name)
	}
	name := m.Name
	r.Environment.Context.Set(name, exec.Macro(func(params *exec.VarArgs) *exec.Value {
		if err := st.step(); err != nil {
			if st.failure == nil {
				st.failure = err
			}
			return errValue(err)
		}
		st.macroDepth++
		defer func() { st.macroDepth-- }()
		if st.macroDepth > maxMacroDepth {
			err := fmt.Errorf("RecursionError: macro %s: maximum recursion depth exceeded", name)
			if st.failure == nil {
				st.failure = err
			}
			return errValue(err)
		}
		out := call(params)
		if out.IsError() {
			return out
		}
		// Without autoescape a macro returns a plain str, not Markup.
		return exec.AsValue(out.String())
	}))
	return nil
}

// generationBlock is transformers' {% generation %} tag, which marks the
// assistant's part of the prompt for training masks and renders its body
// unchanged.
type generationBlock struct {
	at   *tokens.Token
	body *nodes.Wrapper
}

func (g *generationBlock) Position() *tokens.Token { return g.at }
func (g *generationBlock) String() string          { return "generation" }

func (g *generationBlock) Execute(r *exec.Renderer, _ *nodes.ControlStructureBlock) error {
	return r.ExecuteWrapper(g.body)
}

func generationParser(p *parser.Parser, args *parser.Parser) (nodes.ControlStructure, error) {
	g := &generationBlock{at: p.Current()}
	if !args.End() {
		return nil, args.Error("generation takes no arguments", args.Current())
	}
	body, endargs, err := p.WrapUntil("endgeneration")
	if err != nil {
		return nil, err
	}
	if !endargs.End() {
		return nil, endargs.Error("endgeneration takes no arguments", endargs.Current())
	}
	g.body = body
	return g, nil
}
