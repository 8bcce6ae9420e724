package chat

import (
	"errors"
	"fmt"
	"math"
	"strings"

	controlStructures "github.com/nikolalohinski/gonja/v2/builtins/control_structures"
	"github.com/nikolalohinski/gonja/v2/exec"
)

// The functions the rewritten tree calls (see ast.go). Each records its
// failure in the render state, so the render fails with Python's message
// even where gonja would swallow or reword the error.

// maxString bounds strings and lists built by +, * and **.
const maxString = 16 << 20

// fail records err as the render's failure and returns it as a value.
func fail(e *exec.Evaluator, err error) *exec.Value {
	if st, serr := renderStateOf(e.Environment.Context); serr == nil && st.failure == nil {
		st.failure = err
	}
	return errValue(err)
}

func failf(e *exec.Evaluator, format string, args ...any) *exec.Value {
	return fail(e, fmt.Errorf(format, args...))
}

// undefinedAccess is Jinja2's UndefinedError for reading name (an attribute
// or item) of an undefined value, named after its variable when it has one.
func undefinedAccess(variable, name string) error {
	if variable != "" {
		return fmt.Errorf("UndefinedError: '%s' is undefined", variable)
	}
	return fmt.Errorf("UndefinedError: cannot read %s of an undefined value", name)
}

var opFuncs = map[string]any{
	fnBinary: opBinary,
	fnNot: func(e *exec.Evaluator, args *exec.VarArgs) *exec.Value {
		return exec.AsValue(!truthy(args.Args[0]))
	},
	fnNeg:    func(e *exec.Evaluator, args *exec.VarArgs) *exec.Value { return opUnary(e, args.Args[0], -1) },
	fnPos:    func(e *exec.Evaluator, args *exec.VarArgs) *exec.Value { return opUnary(e, args.Args[0], 1) },
	fnItem:   opItem,
	fnSlice:  opSlice,
	fnAttr:   opAttr,
	fnMethod: opMethod,
	fnStr: func(e *exec.Evaluator, args *exec.VarArgs) *exec.Value {
		v := args.Args[0]
		if kindOf(v) == kindString {
			return v
		}
		return exec.AsValue(pyStr(v))
	},
	fnIter: func(e *exec.Evaluator, args *exec.VarArgs) *exec.Value {
		v := args.Args[0]
		switch kindOf(v) {
		case kindList:
			return v
		case kindString, kindDict, kindUndefined, kindIter:
			items, err := iterate(v)
			if err != nil {
				return fail(e, err)
			}
			return exec.AsValue(valuesToList(items))
		}
		return failf(e, "TypeError: '%s' object is not iterable", typeName(v))
	},
	fnTuple: func(e *exec.Evaluator, args *exec.VarArgs) *exec.Value {
		return exec.AsValue(pyTuple(valuesToList(args.Args)))
	},
	fnDict: func(e *exec.Evaluator, args *exec.VarArgs) *exec.Value {
		var pairs []*exec.Pair
		for i := 0; i+1 < len(args.Args); i += 2 {
			pairs = setPair(pairs, args.Args[i], args.Args[i+1])
		}
		return exec.AsValue(newDict(pairs))
	},
}

// setPair sets key to value in pairs with Python dict semantics: a new key
// goes last, an existing one keeps its place.
func setPair(pairs []*exec.Pair, key, value *exec.Value) []*exec.Pair {
	for _, p := range pairs {
		if pyEqual(p.Key, key) {
			p.Value = value
			return pairs
		}
	}
	return append(pairs, &exec.Pair{Key: key, Value: value})
}

func opBinary(e *exec.Evaluator, args *exec.VarArgs) *exec.Value {
	op, a, b := args.Args[0].String(), args.Args[1], args.Args[2]
	switch op {
	case "~":
		s := pyStr(a) + pyStr(b)
		if len(s) > maxString {
			return failf(e, "MemoryError: string too long")
		}
		return exec.AsValue(s)
	case "==":
		return exec.AsValue(pyEqual(a, b))
	case "!=":
		return exec.AsValue(!pyEqual(a, b))
	case "in":
		ok, err := pyContains(b, a)
		if err != nil {
			return fail(e, fmt.Errorf("TypeError: %w", err))
		}
		return exec.AsValue(ok)
	}
	ka, kb := kindOf(a), kindOf(b)
	// str % x formats x with str(), undefined included; every other use of
	// an undefined operand fails.
	if !(op == "%" && ka == kindString) {
		for _, v := range []*exec.Value{a, b} {
			if kindOf(v) == kindUndefined {
				return fail(e, fmt.Errorf("UndefinedError: an operand of %s is undefined", op))
			}
		}
	}
	switch op {
	case "<", "<=", ">", ">=":
		c, err := compareValues(a, b, true)
		if err != nil {
			return fail(e, fmt.Errorf("TypeError: %w", err))
		}
		return exec.AsValue(map[string]bool{"<": c < 0, "<=": c <= 0, ">": c > 0, ">=": c >= 0}[op])
	}
	if isNumber(ka) && isNumber(kb) {
		return numberOp(e, op, a, b)
	}
	switch {
	case op == "+" && ka == kindString && kb == kindString:
		x, y := a.String(), b.String()
		if len(x)+len(y) > maxString {
			return failf(e, "MemoryError: string too long")
		}
		// Markup + str escapes the plain operand and stays Markup.
		switch {
		case safeString(a) && !safeString(b):
			return exec.AsSafeValue(x + escapeHTML(y))
		case safeString(b) && !safeString(a):
			return exec.AsSafeValue(escapeHTML(x) + y)
		case safeString(a):
			return exec.AsSafeValue(x + y)
		}
		return exec.AsValue(x + y)
	case op == "+" && ka == kindList && kb == kindList && isTuple(a) == isTuple(b):
		x, y := listItems(a), listItems(b)
		if len(x)+len(y) > maxString {
			return failf(e, "MemoryError: list too long")
		}
		if isTuple(a) {
			return exec.AsValue(pyTuple(valuesToList(append(x, y...))))
		}
		return exec.AsValue(valuesToList(append(x, y...)))
	case op == "*" && (ka == kindString || ka == kindList) && (kb == kindInt || kb == kindBool):
		return repeat(e, a, b)
	case op == "*" && (kb == kindString || kb == kindList) && (ka == kindInt || ka == kindBool):
		return repeat(e, b, a)
	case op == "%" && ka == kindString:
		params := exec.NewVarArgs()
		_, tuple := b.Interface().(pyTuple)
		switch {
		case tuple:
			params.Args = listItems(b)
		case kb == kindDict:
			for _, p := range dictPairs(b) {
				params.KwArgs[pyStr(p.Key)] = p.Value
			}
			params.Args = []*exec.Value{b}
		default:
			params.Args = []*exec.Value{b}
		}
		s, err := percentFormat(a.String(), params)
		// Anything subscriptable but a str or tuple counts as a mapping,
		// which needs no positional conversion.
		if err != nil && (kb == kindDict || kb == kindUndefined || (kb == kindList && !tuple)) {
			params.Args = nil
			s, err = percentFormat(a.String(), params)
		}
		if err != nil {
			return fail(e, fmt.Errorf("TypeError: %w", err))
		}
		return exec.AsValue(s)
	}
	if op == "+" && ka == kindList && kb == kindList {
		return failf(e, "TypeError: can only concatenate %s (not \"%s\") to %s", typeName(a), typeName(b), typeName(a))
	}
	if op == "+" && (ka == kindString || kb == kindString) {
		other := b
		if ka != kindString {
			other = a
		}
		return failf(e, "TypeError: can only concatenate str (not \"%s\") to str", typeName(other))
	}
	return failf(e, "TypeError: unsupported operand type(s) for %s: '%s' and '%s'", op, typeName(a), typeName(b))
}

func repeat(e *exec.Evaluator, seq, times *exec.Value) *exec.Value {
	n := int(toFloat(times))
	if n < 0 {
		n = 0
	}
	if kindOf(seq) == kindString {
		s := seq.String()
		if n > 0 && len(s) > maxString/n {
			return failf(e, "MemoryError: string too long")
		}
		out := strings.Repeat(s, n)
		if seq.Safe {
			return exec.AsSafeValue(out)
		}
		return exec.AsValue(out)
	}
	items := listItems(seq)
	if n > 0 && len(items) > maxString/n {
		return failf(e, "MemoryError: list too long")
	}
	out := make([]*exec.Value, 0, len(items)*n)
	for range n {
		out = append(out, items...)
	}
	if _, ok := seq.Interface().(pyTuple); ok {
		return exec.AsValue(pyTuple(valuesToList(out)))
	}
	return exec.AsValue(valuesToList(out))
}

// numberOp is arithmetic on bools, ints and floats, with Python's int/float
// rules: ints stay ints except under /, and // and % floor.
func numberOp(e *exec.Evaluator, op string, a, b *exec.Value) *exec.Value {
	_, bigA := a.Interface().(bigInt)
	_, bigB := b.Interface().(bigInt)
	ints := kindOf(a) != kindFloat && kindOf(b) != kindFloat && !bigA && !bigB
	if ints {
		x, y := int64(toFloat(a)), int64(toFloat(b))
		if kindOf(a) == kindInt {
			x = resolvedInt(a)
		}
		if kindOf(b) == kindInt {
			y = resolvedInt(b)
		}
		switch op {
		case "+":
			return exec.AsValue(int(x + y))
		case "-":
			return exec.AsValue(int(x - y))
		case "*":
			return exec.AsValue(int(x * y))
		case "/":
			if y == 0 {
				return failf(e, "ZeroDivisionError: division by zero")
			}
			return exec.AsValue(float64(x) / float64(y))
		case "//", "%":
			if y == 0 {
				return failf(e, "ZeroDivisionError: integer division or modulo by zero")
			}
			q, r := x/y, x%y
			if r != 0 && (r < 0) != (y < 0) {
				q--
				r += y
			}
			if op == "//" {
				return exec.AsValue(int(q))
			}
			return exec.AsValue(int(r))
		case "**":
			if y >= 0 {
				p := math.Pow(float64(x), float64(y))
				if math.Abs(p) > 1<<62 {
					return failf(e, "OverflowError: integer power too large")
				}
				out := int64(1)
				for range y {
					out *= x
				}
				return exec.AsValue(int(out))
			}
			if x == 0 {
				return failf(e, "ZeroDivisionError: 0.0 cannot be raised to a negative power")
			}
			return exec.AsValue(math.Pow(float64(x), float64(y)))
		}
	}
	x, y := toFloat(a), toFloat(b)
	switch op {
	case "+":
		return exec.AsValue(x + y)
	case "-":
		return exec.AsValue(x - y)
	case "*":
		return exec.AsValue(x * y)
	case "/":
		if y == 0 {
			return failf(e, "ZeroDivisionError: float division by zero")
		}
		return exec.AsValue(x / y)
	case "//", "%":
		if y == 0 {
			return failf(e, "ZeroDivisionError: float modulo")
		}
		r := math.Mod(x, y)
		switch {
		case r == 0:
			r = math.Copysign(0, y)
		case (r < 0) != (y < 0):
			r += y
		}
		if op == "//" {
			return exec.AsValue(math.Round((x - r) / y))
		}
		return exec.AsValue(r)
	case "**":
		return exec.AsValue(math.Pow(x, y))
	}
	return failf(e, "TypeError: unsupported operand type(s) for %s", op)
}

func opUnary(e *exec.Evaluator, v *exec.Value, sign int) *exec.Value {
	switch kindOf(v) {
	case kindInt, kindBool:
		return exec.AsValue(sign * int(toFloat(v)))
	case kindFloat:
		return exec.AsValue(float64(sign) * toFloat(v))
	case kindUndefined:
		return failf(e, "UndefinedError: the operand of unary - is undefined")
	}
	return failf(e, "TypeError: bad operand type for unary -: '%s'", typeName(v))
}

// opItem is Jinja2's subscript obj[key]: the item, or else the attribute of
// that name, or else undefined.
func opItem(e *exec.Evaluator, args *exec.VarArgs) *exec.Value {
	obj, key := args.Args[0], args.Args[1]
	switch kindOf(obj) {
	case kindUndefined:
		return fail(e, undefinedAccess(args.Args[2].String(), "item "+pyRepr(key)))
	case kindDict:
		if v, ok := lookupKey(obj, key); ok {
			return v
		}
	case kindList, kindString:
		switch obj.Interface().(type) {
		case dictKeys, dictValues, dictItems:
			// Views are not subscriptable.
			return exec.AsValue(nil)
		}
		if k := kindOf(key); k == kindInt || k == kindBool {
			return getItem(obj, exec.AsValue(int(toFloat(key))))
		}
	case kindOther:
		if ns, ok := obj.Interface().(namespace); ok {
			return nsGet(ns, key)
		}
		if kindOf(key) == kindString {
			if v, found := obj.GetItem(key.String()); found && !v.IsError() {
				return v
			}
		}
	}
	if kindOf(key) == kindString {
		return attribute(obj, key.String())
	}
	return exec.AsValue(nil)
}

func nsGet(ns namespace, key *exec.Value) *exec.Value {
	if v, ok := ns[pyStr(key)]; ok {
		return exec.ToValue(v)
	}
	return exec.AsValue(nil)
}

// opAttr is Jinja2's obj.name: the attribute, or else the item of that name,
// or else undefined.
func opAttr(e *exec.Evaluator, args *exec.VarArgs) *exec.Value {
	obj, name := args.Args[0], args.Args[1].String()
	switch kindOf(obj) {
	case kindUndefined:
		return fail(e, undefinedAccess(args.Args[2].String(), "attribute '"+name+"'"))
	case kindDict:
		if _, ok := dictMethods[name]; ok {
			return attribute(obj, name)
		}
		if v, ok := lookupKey(obj, exec.AsValue(name)); ok {
			return v
		}
		return exec.AsValue(nil)
	}
	if ns, ok := obj.Interface().(namespace); ok {
		return nsGet(ns, exec.AsValue(name))
	}
	return attribute(obj, name)
}

// attribute is Python's getattr for template values, undefined where there
// is none or where the sandbox forbids it.
func attribute(obj *exec.Value, name string) *exec.Value {
	has := false
	switch kindOf(obj) {
	case kindString:
		_, has = strMethods[name]
	case kindDict:
		_, has = dictMethods[name]
	case kindList:
		_, has = listMethods[name]
	case kindOther, kindCallable:
		if _, ok := obj.Interface().(*controlStructures.LoopInfos); ok && (name == "depth" || name == "depth0") {
			// Only recursive loops nest in Jinja2, and they are not supported.
			return exec.AsValue(map[string]int{"depth": 1, "depth0": 0}[name])
		}
		if v, found := obj.GetAttribute(name); found && !v.IsError() {
			return v
		}
		return exec.AsValue(nil)
	}
	if has && !mutating(name) {
		return exec.AsValue(boundMethod{obj, name})
	}
	return exec.AsValue(nil)
}

// mutating names the list and dict methods the immutable sandbox refuses.
func mutating(name string) bool {
	switch name {
	case "append", "extend", "insert", "pop", "remove", "reverse", "sort", "clear",
		"update", "popitem", "setdefault":
		return true
	}
	return false
}

// opMethod calls obj.name(args...).
func opMethod(e *exec.Evaluator, args *exec.VarArgs) *exec.Value {
	obj, name := args.Args[0], args.Args[1].String()
	params := &exec.VarArgs{Args: args.Args[2:], KwArgs: args.KwArgs}
	var (
		result any
		err    error
		found  bool
	)
	switch kindOf(obj) {
	case kindUndefined:
		return fail(e, undefinedAccess("", "method '"+name+"'"))
	case kindString:
		var m strMethod
		if m, found = strMethods[name]; found {
			result, err = m(obj.String(), obj, params)
			if s, ok := result.(string); ok && obj.Safe && err == nil {
				return exec.AsSafeValue(s)
			}
		}
	case kindDict:
		var m dictMethod
		if m, found = dictMethods[name]; found {
			result, err = m(nil, obj, params)
		}
	case kindList:
		var m listMethod
		if m, found = listMethods[name]; found {
			result, err = m(nil, obj, params)
		}
	default:
		if ns, ok := obj.Interface().(namespace); ok {
			return callValue(e, nsGet(ns, exec.AsValue(name)), name, params)
		}
		return callValue(e, attribute(obj, name), name, params)
	}
	if !found {
		return failf(e, "UndefinedError: '%s object' has no attribute '%s'", typeName(obj), name)
	}
	if err != nil {
		var se *securityError
		if errors.As(err, &se) {
			return failf(e, "SecurityError: %v", err)
		}
		return fail(e, err)
	}
	return exec.AsValue(result)
}

// securityError is a refusal by the sandbox.
type securityError struct{ msg string }

func (s *securityError) Error() string { return s.msg }

// callValue calls a function value the way gonja would: macros, loop.cycle
// and other functions of the VarArgs shapes gonja knows.
func callValue(e *exec.Evaluator, fn *exec.Value, name string, params *exec.VarArgs) *exec.Value {
	if kindOf(fn) == kindUndefined {
		return failf(e, "UndefinedError: '%s' is undefined", name)
	}
	var out *exec.Value
	switch f := fn.Interface().(type) {
	case exec.Macro:
		out = f(params)
	case func(*exec.VarArgs) *exec.Value:
		out = f(params)
	case func(*exec.Evaluator, *exec.VarArgs) *exec.Value:
		out = f(e, params)
	case func(*exec.VarArgs) (*exec.Value, error):
		v, err := f(params)
		if err != nil {
			return fail(e, err)
		}
		out = v
	case func(*exec.Evaluator, *exec.VarArgs) (*exec.Value, error):
		v, err := f(e, params)
		if err != nil {
			return fail(e, err)
		}
		out = v
	default:
		return failf(e, "TypeError: '%s' object is not callable", typeName(fn))
	}
	if out == nil {
		return exec.AsValue(nil)
	}
	return out
}

// opSlice is obj[start:stop:step] for strings, lists and tuples; anything
// else sliced is undefined, as Jinja2's subscript makes it. A missing bound
// comes as None.
func opSlice(e *exec.Evaluator, args *exec.VarArgs) *exec.Value {
	obj := args.Args[0]
	bound := func(v *exec.Value) (*int, error) {
		switch kindOf(v) {
		case kindNone:
			return nil, nil
		case kindInt, kindBool:
			n := int(toFloat(v))
			return &n, nil
		}
		return nil, fmt.Errorf("TypeError: slice indices must be integers or None")
	}
	var b [3]*int
	for i := range b {
		n, err := bound(args.Args[1+i])
		if err != nil {
			return fail(e, err)
		}
		b[i] = n
	}
	step := 1
	if b[2] != nil {
		step = *b[2]
	}
	if step == 0 {
		return failf(e, "ValueError: slice step cannot be zero")
	}
	// A slice is Python's plain subscript, not Jinja2's getitem: what
	// cannot be sliced raises.
	var items []*exec.Value
	switch kindOf(obj) {
	case kindUndefined:
		return failf(e, "UndefinedError: the sliced value is undefined")
	case kindDict:
		return failf(e, "TypeError: unhashable type: 'slice'")
	case kindString, kindList:
		switch obj.Interface().(type) {
		case dictKeys:
			return failf(e, "TypeError: 'dict_keys' object is not subscriptable")
		case dictValues:
			return failf(e, "TypeError: 'dict_values' object is not subscriptable")
		case dictItems:
			return failf(e, "TypeError: 'dict_items' object is not subscriptable")
		}
		items, _ = iterate(obj)
	default:
		return failf(e, "TypeError: '%s' object is not subscriptable", typeName(obj))
	}
	n := len(items)
	// Python's slice.indices.
	clamp := func(p *int, def, lo, hi int) int {
		if p == nil {
			return def
		}
		x := *p
		if x < 0 {
			x += n
			if x < lo {
				x = lo
			}
		} else if x > hi {
			x = hi
		}
		return x
	}
	var start, stop int
	if step > 0 {
		start, stop = clamp(b[0], 0, 0, n), clamp(b[1], n, 0, n)
	} else {
		start, stop = clamp(b[0], n-1, -1, n-1), clamp(b[1], -1, -1, n-1)
	}
	var out []*exec.Value
	for i := start; (step > 0 && i < stop) || (step < 0 && i > stop); i += step {
		out = append(out, items[i])
	}
	if kindOf(obj) == kindString {
		var sb strings.Builder
		for _, c := range out {
			sb.WriteString(c.String())
		}
		return sameSafety(obj, sb.String())
	}
	if _, ok := obj.Interface().(pyTuple); ok {
		return exec.AsValue(pyTuple(valuesToList(out)))
	}
	return exec.AsValue(valuesToList(out))
}
