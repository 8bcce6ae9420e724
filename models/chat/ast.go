package chat

import (
	"fmt"

	controlStructures "github.com/nikolalohinski/gonja/v2/builtins/control_structures"
	"github.com/nikolalohinski/gonja/v2/nodes"
	"github.com/nikolalohinski/gonja/v2/tokens"
)

// gonja parses Jinja2 faithfully enough, but evaluates operators, subscripts,
// attributes, method calls and output with Go semantics (negative indexes
// off by one, "a" + 1 == "a1", no Markup escaping, Go's printing of dicts).
// After parsing, the tree is rewritten so that each of those becomes a call
// to one of the functions below, which do what Python does.
const (
	fnBinary = "__chat_binary" // (op, left, right)
	fnNot    = "__chat_not"    // (x)
	fnNeg    = "__chat_neg"    // (x)
	fnPos    = "__chat_pos"    // (x)
	fnItem   = "__chat_item"   // (obj, key, variable name of obj or "")
	fnAttr   = "__chat_attr"   // (obj, name, variable name of obj or "")
	fnMethod = "__chat_method" // (obj, name, args...; kwargs)
	fnStr    = "__chat_str"    // (x): str(x) for output
	fnDict   = "__chat_dict"   // (k1, v1, k2, v2, ...): a dict literal
	fnTuple  = "__chat_tuple"  // (items...): a tuple literal
	fnIter   = "__chat_iter"   // (x): what a for loop iterates
	fnSlice  = "__chat_slice"  // (obj, start, stop, step), None for a missing bound
)

// rewriter rewrites a parsed template and notes the filters and tests it
// uses that do not exist, which Jinja2 rejects when it compiles. Inside an
// if (its tests and branches, or a conditional expression), up to the next
// for, macro or block tag, Jinja2 rejects them only when they run: soft
// says the rewriter is there, and such a filter or test becomes a call to
// missingFilter or missingTest, which fail the render.
type rewriter struct {
	unknown []string
	soft    bool
}

const (
	missingFilter = "__chat_missing_filter" // (name, ...)
	missingTest   = "__chat_missing_test"   // (name, ...)
	fnSoft        = "__chat_soft"           // (x): x, inside a conditional expression
)

// within runs f with soft set to soft, restoring it after.
func (rw *rewriter) within(soft bool, f func() error) error {
	saved := rw.soft
	rw.soft = soft
	defer func() { rw.soft = saved }()
	return f()
}

// rewriteTree rewrites every expression of the template in place.
func rewriteTree(t *nodes.Template) error {
	var rw rewriter
	for i, n := range t.Nodes {
		r, err := rw.rewriteNode(n)
		if err != nil {
			return err
		}
		t.Nodes[i] = r
	}
	if len(rw.unknown) > 0 {
		return fmt.Errorf("TemplateAssertionError: %s", rw.unknown[0])
	}
	return nil
}

func (rw *rewriter) checkFilter(f *nodes.FilterCall) {
	if _, ok := filters[f.Name]; ok {
		return
	}
	if !rw.soft {
		rw.unknown = append(rw.unknown, fmt.Sprintf("No filter named '%s'.", f.Name))
		return
	}
	f.Args = append([]nodes.Expression{str(f.Token, f.Name)}, f.Args...)
	f.Name = missingFilter
}

func (rw *rewriter) checkTest(t *nodes.TestCall) {
	if _, ok := tests[t.Name]; ok {
		return
	}
	if !rw.soft {
		rw.unknown = append(rw.unknown, fmt.Sprintf("No test named '%s'.", t.Name))
		return
	}
	t.Args = append([]nodes.Expression{str(t.Token, t.Name)}, t.Args...)
	t.Name = missingTest
}

func (rw *rewriter) rewriteWrapper(w *nodes.Wrapper) error {
	if w == nil {
		return nil
	}
	for i, n := range w.Nodes {
		r, err := rw.rewriteNode(n)
		if err != nil {
			return err
		}
		w.Nodes[i] = r
	}
	return nil
}

func (rw *rewriter) rewriteNode(n nodes.Node) (nodes.Node, error) {
	switch n := n.(type) {
	case *nodes.Output:
		n.Expression = call(fnStr, n.Start, rw.rewriteExpr(n.Expression))
		if n.Condition != nil {
			n.Condition = rw.rewriteExpr(n.Condition)
		}
		if n.Alternative != nil {
			n.Alternative = call(fnStr, n.Start, rw.rewriteExpr(n.Alternative))
		}
	case *nodes.ControlStructureBlock:
		return n, rw.rewriteControl(n.ControlStructure)
	case *nodes.Wrapper:
		return n, rw.rewriteWrapper(n)
	}
	return n, nil
}

func (rw *rewriter) rewriteControl(c nodes.ControlStructure) error {
	switch c := c.(type) {
	case *controlStructures.IfControlStructure:
		return rw.within(true, func() error {
			for i, cond := range c.Conditions {
				c.Conditions[i] = rw.rewriteExpr(cond)
			}
			for _, w := range c.Wrappers {
				if err := rw.rewriteWrapper(w); err != nil {
					return err
				}
			}
			return nil
		})
	case *controlStructures.ForControlStructure:
		c.ObjectEvaluator = call(fnIter, c.BodyWrapper.Location, rw.rewriteExpr(c.ObjectEvaluator))
		return rw.within(false, func() error {
			if c.IfCondition != nil {
				c.IfCondition = rw.rewriteExpr(c.IfCondition)
			}
			if err := rw.rewriteWrapper(c.BodyWrapper); err != nil {
				return err
			}
			return rw.rewriteWrapper(c.EmptyWrapper)
		})
	case *boundedMacro:
		// A Jinja2 macro takes extra arguments when its body uses varargs or
		// kwargs; gonja wants them declared.
		if c.VarArgsName == "" && wrapperUsesName(c.Wrapper, "varargs") {
			c.VarArgsName = "varargs"
		}
		if c.KwArgsName == "" && wrapperUsesName(c.Wrapper, "kwargs") {
			c.KwArgsName = "kwargs"
		}
		return rw.within(false, func() error {
			for _, p := range c.Kwargs {
				if p.Value != nil {
					p.Value = rw.rewriteExpr(p.Value)
				}
			}
			return rw.rewriteWrapper(c.Wrapper)
		})
	case *setTag:
		if c.value != nil {
			c.value = rw.rewriteExpr(c.value)
		}
		for _, t := range c.targets {
			if a, ok := t.(*nodes.GetAttribute); ok {
				a.Node = rw.rewriteExpr(a.Node)
			}
		}
		// A block set has a scope of its own.
		return rw.within(rw.soft && c.body == nil, func() error {
			rw.rewriteFilterCalls(c.filters)
			return rw.rewriteWrapper(c.body)
		})
	case *filterTag:
		return rw.within(false, func() error {
			rw.rewriteFilterCalls(c.filters)
			return rw.rewriteWrapper(c.body)
		})
	case *withTag:
		for i, v := range c.values {
			c.values[i] = rw.rewriteExpr(v)
		}
		return rw.within(false, func() error { return rw.rewriteWrapper(c.body) })
	case *generationBlock:
		return rw.within(false, func() error { return rw.rewriteWrapper(c.body) })
	case *controlStructures.BreakControlStructure, *controlStructures.ContinueControlStructure,
		*controlStructures.RawControlStructure, *stepCounter:
	default:
		return fmt.Errorf("chat template: unexpected tag %T", c)
	}
	return nil
}

func (rw *rewriter) rewriteFilterCalls(calls []*nodes.FilterCall) {
	for _, f := range calls {
		rw.checkFilter(f)
		for i, a := range f.Args {
			f.Args[i] = rw.rewriteExpr(a)
		}
		for k, a := range f.Kwargs {
			f.Kwargs[k] = rw.rewriteExpr(a)
		}
	}
}

// nameOf is the variable an expression reads, or "" when it is not a plain
// variable, for error messages.
func nameOf(n nodes.Node) string {
	if name, ok := n.(*nodes.Name); ok {
		return name.Name.Val
	}
	return ""
}

// call makes the node of a call to one of the functions above.
func call(fn string, at *tokens.Token, args ...nodes.Expression) *nodes.Call {
	if at == nil {
		at = &tokens.Token{}
	}
	name := &tokens.Token{Type: tokens.Name, Val: fn, Pos: at.Pos, Line: at.Line, Col: at.Col}
	return &nodes.Call{
		Location: at,
		Func:     &nodes.Name{Name: name},
		Args:     args,
		Kwargs:   map[string]nodes.Expression{},
	}
}

func str(at *tokens.Token, s string) *nodes.String {
	return &nodes.String{Location: at, Val: s}
}

// binaryOps maps gonja's operator tokens to Python's operators.
var binaryOps = map[tokens.Type]string{
	tokens.Addition:           "+",
	tokens.Subtraction:        "-",
	tokens.Multiply:           "*",
	tokens.Division:           "/",
	tokens.FloorDivision:      "//",
	tokens.Modulo:             "%",
	tokens.Power:              "**",
	tokens.Tilde:              "~",
	tokens.Equals:             "==",
	tokens.Ne:                 "!=",
	tokens.LowerThan:          "<",
	tokens.LowerThanOrEqual:   "<=",
	tokens.GreaterThan:        ">",
	tokens.GreaterThanOrEqual: ">=",
	tokens.In:                 "in",
}

// rewriteExpr returns e with Python semantics.
func (rw *rewriter) rewriteExpr(e nodes.Expression) nodes.Expression {
	switch e := e.(type) {
	case nil:
		return nil
	case *nodes.BinaryExpression:
		left, right := rw.rewriteExpr(e.Left), rw.rewriteExpr(e.Right)
		if op, ok := binaryOps[e.Operator.Token.Type]; ok {
			return call(fnBinary, e.Operator.Token, str(e.Operator.Token, op), left, right)
		}
		// and, or: gonja short-circuits them as Python does.
		e.Left, e.Right = left, right
		return e
	case *nodes.Negation:
		return call(fnNot, e.Operator, rw.rewriteExpr(e.Term))
	case *nodes.UnaryExpression:
		if e.Negative {
			return call(fnNeg, e.Operator, rw.rewriteExpr(e.Term))
		}
		return call(fnPos, e.Operator, rw.rewriteExpr(e.Term))
	case *nodes.GetItem:
		if e.Arg == nil {
			return e
		}
		return call(fnItem, e.Location, rw.rewriteExpr(e.Node), rw.rewriteExpr(e.Arg), str(e.Location, nameOf(e.Node)))
	case *nodes.GetAttribute:
		obj := rw.rewriteExpr(e.Node)
		if e.Attribute == "" {
			return call(fnItem, e.Location, obj, &nodes.Integer{Location: e.Location, Val: e.Index}, str(e.Location, nameOf(e.Node)))
		}
		return call(fnAttr, e.Location, obj, str(e.Location, e.Attribute), str(e.Location, nameOf(e.Node)))
	case *nodes.GetSlice:
		bound := func(n nodes.Node) nodes.Expression {
			if n == nil {
				return &nodes.Name{Name: &tokens.Token{Type: tokens.Name, Val: "none"}}
			}
			return rw.rewriteExpr(n)
		}
		return call(fnSlice, e.Location, rw.rewriteExpr(e.Node), bound(e.Start), bound(e.End), bound(e.Step))
	case *nodes.Call:
		if name, ok := e.Func.(*nodes.Name); ok && name.Name.Val == fnSoft && len(e.Args) == 1 {
			var x nodes.Expression
			rw.within(true, func() error { x = rw.rewriteExpr(e.Args[0]); return nil })
			return x
		}
		for i, a := range e.Args {
			e.Args[i] = rw.rewriteExpr(a)
		}
		for k, a := range e.Kwargs {
			e.Kwargs[k] = rw.rewriteExpr(a)
		}
		if attr, ok := e.Func.(*nodes.GetAttribute); ok && attr.Attribute != "" {
			args := append([]nodes.Expression{rw.rewriteExpr(attr.Node), str(attr.Location, attr.Attribute)}, e.Args...)
			c := call(fnMethod, e.Location, args...)
			c.Kwargs = e.Kwargs
			return c
		}
		e.Func = rw.rewriteExpr(e.Func)
		e.Parent = nil
		return e
	case *nodes.FilteredExpression:
		e.Expression = rw.rewriteExpr(e.Expression)
		rw.rewriteFilterCalls(e.Filters)
		return e
	case *nodes.TestExpression:
		rw.checkTest(e.Test)
		e.Expression = rw.rewriteExpr(e.Expression)
		for i, a := range e.Test.Args {
			e.Test.Args[i] = rw.rewriteExpr(a)
		}
		for k, a := range e.Test.Kwargs {
			e.Test.Kwargs[k] = rw.rewriteExpr(a)
		}
		return e
	case *nodes.List:
		for i, a := range e.Val {
			e.Val[i] = rw.rewriteExpr(a)
		}
		return e
	case *nodes.Tuple:
		args := make([]nodes.Expression, len(e.Val))
		for i, a := range e.Val {
			args[i] = rw.rewriteExpr(a)
		}
		return call(fnTuple, e.Location, args...)
	case *nodes.Dict:
		args := make([]nodes.Expression, 0, 2*len(e.Pairs))
		for _, p := range e.Pairs {
			args = append(args, rw.rewriteExpr(p.Key), rw.rewriteExpr(p.Value))
		}
		return call(fnDict, e.Token, args...)
	}
	return e
}

// wrapperUsesName reports whether any expression in w reads the variable name.
func wrapperUsesName(w *nodes.Wrapper, name string) bool {
	if w == nil {
		return false
	}
	found := false
	var visitExpr func(e nodes.Node)
	visitExpr = func(e nodes.Node) {
		if e == nil || found {
			return
		}
		switch e := e.(type) {
		case *nodes.Name:
			found = e.Name.Val == name
		case *nodes.BinaryExpression:
			visitExpr(e.Left)
			visitExpr(e.Right)
		case *nodes.Negation:
			visitExpr(e.Term)
		case *nodes.UnaryExpression:
			visitExpr(e.Term)
		case *nodes.GetItem:
			visitExpr(e.Node)
			visitExpr(e.Arg)
		case *nodes.GetAttribute:
			visitExpr(e.Node)
		case *nodes.GetSlice:
			visitExpr(e.Node)
			visitExpr(e.Start)
			visitExpr(e.End)
			visitExpr(e.Step)
		case *nodes.Call:
			visitExpr(e.Func)
			for _, a := range e.Args {
				visitExpr(a)
			}
			for _, a := range e.Kwargs {
				visitExpr(a)
			}
		case *nodes.FilteredExpression:
			visitExpr(e.Expression)
			for _, f := range e.Filters {
				for _, a := range f.Args {
					visitExpr(a)
				}
			}
		case *nodes.TestExpression:
			visitExpr(e.Expression)
		case *nodes.List:
			for _, a := range e.Val {
				visitExpr(a)
			}
		case *nodes.Tuple:
			for _, a := range e.Val {
				visitExpr(a)
			}
		case *nodes.Dict:
			for _, p := range e.Pairs {
				visitExpr(p.Key)
				visitExpr(p.Value)
			}
		}
	}
	var visitWrapper func(w *nodes.Wrapper)
	visitNode := func(n nodes.Node) {
		switch n := n.(type) {
		case *nodes.Output:
			visitExpr(n.Expression)
		case *nodes.ControlStructureBlock:
			switch c := n.ControlStructure.(type) {
			case *controlStructures.IfControlStructure:
				for _, cond := range c.Conditions {
					visitExpr(cond)
				}
				for _, w := range c.Wrappers {
					visitWrapper(w)
				}
			case *controlStructures.ForControlStructure:
				visitExpr(c.ObjectEvaluator)
				visitWrapper(c.BodyWrapper)
				visitWrapper(c.EmptyWrapper)
			case *setTag:
				visitExpr(c.value)
				visitWrapper(c.body)
			case *filterTag:
				visitWrapper(c.body)
			case *withTag:
				for _, v := range c.values {
					visitExpr(v)
				}
				visitWrapper(c.body)
			case *generationBlock:
				visitWrapper(c.body)
			}
		}
	}
	visitWrapper = func(w *nodes.Wrapper) {
		if w == nil {
			return
		}
		for _, n := range w.Nodes {
			visitNode(n)
		}
	}
	visitWrapper(w)
	return found
}
