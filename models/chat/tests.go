package chat

import (
	"fmt"
	"math"
	"strings"

	"github.com/nikolalohinski/gonja/v2/exec"
)

// testFunc is the shape of a gonja test.
type testFunc = func(*exec.Evaluator, *exec.Value, *exec.VarArgs) (bool, error)

// tests are Jinja2's built-in tests with Python's notion of types, which
// gonja's versions lack (None and undefined are one value there).
var tests = map[string]testFunc{
	missingTest: testMissing,
	"boolean":   kindTest(kindBool),
	"callable":  testCallable,
	"defined": func(_ *exec.Evaluator, v *exec.Value, _ *exec.VarArgs) (bool, error) {
		return kindOf(v) != kindUndefined, nil
	},
	"divisibleby": testDivisibleBy,
	"eq":          compareTest("==", 0, 0),
	"equalto":     compareTest("==", 0, 0),
	"==":          compareTest("==", 0, 0),
	"escaped":     func(_ *exec.Evaluator, v *exec.Value, _ *exec.VarArgs) (bool, error) { return v.Safe, nil },
	"even":        parityTest(0),
	"false":       boolTest(false),
	"filter": func(e *exec.Evaluator, v *exec.Value, _ *exec.VarArgs) (bool, error) {
		return e.Environment.Filters.Exists(pyStr(v)), nil
	},
	"float":       kindTest(kindFloat),
	"ge":          compareTest(">=", 1, 0),
	">=":          compareTest(">=", 1, 0),
	"gt":          compareTest(">", 1, 1),
	"greaterthan": compareTest(">", 1, 1),
	">":           compareTest(">", 1, 1),
	"in":          testIn,
	"integer":     kindTest(kindInt),
	"iterable":    testIterable,
	"le":          compareTest("<=", -1, 0),
	"<=":          compareTest("<=", -1, 0),
	"lower":       stringTest("islower"),
	"lt":          compareTest("<", -1, -1),
	"lessthan":    compareTest("<", -1, -1),
	"<":           compareTest("<", -1, -1),
	"mapping":     kindTest(kindDict),
	"ne":          compareTest("!=", 0, 0),
	"!=":          compareTest("!=", 0, 0),
	"none":        kindTest(kindNone),
	"number":      testNumber,
	"odd":         parityTest(1),
	"sameas":      testSameAs,
	"sequence":    testSequence,
	"string":      kindTest(kindString),
	"test": func(e *exec.Evaluator, v *exec.Value, _ *exec.VarArgs) (bool, error) {
		return e.Environment.Tests.Exists(pyStr(v)), nil
	},
	"true": boolTest(true),
	"undefined": func(_ *exec.Evaluator, v *exec.Value, _ *exec.VarArgs) (bool, error) {
		return kindOf(v) == kindUndefined, nil
	},
	"upper": stringTest("isupper"),
}

func kindTest(k pyKind) testFunc {
	return func(_ *exec.Evaluator, v *exec.Value, _ *exec.VarArgs) (bool, error) { return kindOf(v) == k, nil }
}

func boolTest(want bool) testFunc {
	return func(_ *exec.Evaluator, v *exec.Value, _ *exec.VarArgs) (bool, error) {
		return kindOf(v) == kindBool && (toFloat(v) != 0) == want, nil
	}
}

func stringTest(method string) testFunc {
	return func(_ *exec.Evaluator, v *exec.Value, _ *exec.VarArgs) (bool, error) {
		return stringPredicate(pyStr(v), method), nil
	}
}

// testCallable: Jinja2's undefined is callable (calling it fails).
func testCallable(_ *exec.Evaluator, v *exec.Value, _ *exec.VarArgs) (bool, error) {
	switch kindOf(v) {
	case kindCallable, kindUndefined:
		return true, nil
	}
	switch v.Interface().(type) {
	case boundMethod, exec.Macro:
		return true, nil
	}
	return false, nil
}

func testNumber(_ *exec.Evaluator, v *exec.Value, _ *exec.VarArgs) (bool, error) {
	k := kindOf(v)
	return k == kindInt || k == kindFloat || k == kindBool, nil
}

func testIterable(_ *exec.Evaluator, v *exec.Value, _ *exec.VarArgs) (bool, error) {
	switch kindOf(v) {
	case kindUndefined, kindString, kindList, kindDict, kindIter:
		return true, nil
	}
	return false, nil
}

func testSequence(_ *exec.Evaluator, v *exec.Value, _ *exec.VarArgs) (bool, error) {
	switch kindOf(v) {
	case kindUndefined, kindString, kindList, kindDict:
		return true, nil
	}
	return false, nil
}

func testDivisibleBy(_ *exec.Evaluator, v *exec.Value, params *exec.VarArgs) (bool, error) {
	a, err := bindArgs("divisibleby", params, "num")
	if err != nil || a[0] == nil {
		return false, fmt.Errorf("divisibleby needs a number")
	}
	if !isNumber(kindOf(v)) || !isNumber(kindOf(a[0])) {
		return false, fmt.Errorf("TypeError: unsupported operand type(s) for %%: '%s' and '%s'", typeName(v), typeName(a[0]))
	}
	d := toFloat(a[0])
	if d == 0 {
		return false, fmt.Errorf("integer division or modulo by zero")
	}
	n := toFloat(v)
	return n-d*float64(int64(n/d)) == 0, nil
}

func parityTest(rem float64) testFunc {
	return func(_ *exec.Evaluator, v *exec.Value, _ *exec.VarArgs) (bool, error) {
		if !isNumber(kindOf(v)) {
			return false, fmt.Errorf("TypeError: not all arguments converted during string formatting")
		}
		n := math.Mod(toFloat(v), 2)
		if n < 0 {
			n += 2
		}
		return n == rem, nil
	}
}

func testIn(_ *exec.Evaluator, v *exec.Value, params *exec.VarArgs) (bool, error) {
	a, err := bindArgs("in", params, "seq")
	if err != nil || a[0] == nil {
		return false, fmt.Errorf("in needs a container")
	}
	return pyContains(a[0], v)
}

// pyContains is Python's needle in container.
func pyContains(container, needle *exec.Value) (bool, error) {
	switch kindOf(container) {
	case kindString:
		if kindOf(needle) != kindString {
			return false, fmt.Errorf("'in <string>' requires string as left operand, not %s", typeName(needle))
		}
		return strings.Contains(container.String(), needle.String()), nil
	case kindList:
		for _, e := range listItems(container) {
			if pyEqual(e, needle) {
				return true, nil
			}
		}
		return false, nil
	case kindDict:
		if k := kindOf(needle); (k == kindList && !isTuple(needle)) || k == kindDict {
			return false, fmt.Errorf("unhashable type: '%s'", typeName(needle))
		}
		_, ok := lookupKey(container, needle)
		return ok, nil
	case kindIter:
		items, err := iterate(container)
		if err != nil {
			return false, err
		}
		for _, e := range items {
			if pyEqual(e, needle) {
				return true, nil
			}
		}
		return false, nil
	case kindUndefined:
		return false, nil
	}
	if ns, ok := container.Interface().(namespace); ok && kindOf(needle) == kindString {
		_, ok := ns[needle.String()]
		return ok, nil
	}
	return false, fmt.Errorf("argument of type '%s' is not iterable", typeName(container))
}

// testSameAs is Python's "is": identity for None and booleans, which is all
// templates compare that way.
func testSameAs(_ *exec.Evaluator, v *exec.Value, params *exec.VarArgs) (bool, error) {
	a, err := bindArgs("sameas", params, "other")
	if err != nil || a[0] == nil {
		return false, fmt.Errorf("sameas needs a value")
	}
	kv, ko := kindOf(v), kindOf(a[0])
	if kv != ko {
		return false, nil
	}
	switch kv {
	case kindNone, kindUndefined:
		return true, nil
	case kindBool, kindInt:
		return toFloat(v) == toFloat(a[0]), nil
	case kindString:
		return v.String() == a[0].String(), nil
	}
	return v.Interface() == a[0].Interface(), nil
}

// compareTest makes eq, ne, lt, le, gt, ge: want is the sign that passes and
// strict excludes equality (for ne, want 0 is inverted).
func compareTest(op string, want, strict int) testFunc {
	return func(_ *exec.Evaluator, v *exec.Value, params *exec.VarArgs) (bool, error) {
		a, err := bindArgs(op, params, "other")
		if err != nil || a[0] == nil {
			return false, fmt.Errorf("test %s needs a value", op)
		}
		switch op {
		case "==":
			return pyEqual(v, a[0]), nil
		case "!=":
			return !pyEqual(v, a[0]), nil
		}
		c, err := compareValues(v, a[0], true)
		if err != nil {
			return false, err
		}
		if c == 0 {
			return strict == 0, nil
		}
		return (c > 0) == (want > 0), nil
	}
}

// testMissing stands for a test that does not exist, used where Jinja2
// fails only when the test runs (see rewriter): it fails the render.
func testMissing(e *exec.Evaluator, _ *exec.Value, params *exec.VarArgs) (bool, error) {
	name := ""
	if len(params.Args) > 0 {
		name = pyStr(params.Args[0])
	}
	//lint:ignore ST1005 Jinja2's own message, as the render cases compare it
	err := fmt.Errorf("TemplateRuntimeError: No test named '%s' found.", name)
	fail(e, err)
	return false, err
}
