package chat

import (
	"fmt"
	"slices"
	"strings"

	"github.com/nikolalohinski/gonja/v2/exec"
)

// The Python types templates see that gonja has no value for. Dicts are
// gonja's ordered *exec.Dict (an empty one an empty Go map), strings, ints,
// floats and bools Go's own.

// noneType is Python's None. gonja uses nil for undefined values, and Jinja2
// tells the two apart (None renders as "None", is defined, and is not caught
// by |default), so None needs a value of its own. Its kind is bool so that
// gonja's truth tests treat it as false.
type noneType bool

// none is the one None value.
const none noneType = false

// String renders None as Python's str(None) does.
func (noneType) String() string { return "None" }

// bigInt is an integer too big for int64, kept as its decimal digits so it
// prints as Python would print it.
type bigInt string

// String renders the integer.
func (b bigInt) String() string { return string(b) }

// pyList is a Python list. Lists made from the caller's data print as
// Python prints them.
type pyList []any

// String renders the list as Python's str() does.
func (l pyList) String() string { return pyRepr(exec.AsValue(l)) }

// pyTuple is a Python tuple: a list that prints in parentheses.
type pyTuple []any

// String renders the tuple as Python's str() does.
func (t pyTuple) String() string { return pyRepr(exec.AsValue(t)) }

// pyIter is a generator, which Jinja2's map, select, reject, unique and
// similar filters return: it is always true, has no length and prints as an
// object, until |list or a loop takes its items.
type pyIter struct {
	items []*exec.Value
	err   error // raised when the generator is iterated, as Python's are lazy
}

func (it *pyIter) values() ([]*exec.Value, error) { return slices.Clone(it.items), it.err }

// String renders the generator as Python does, but for its address.
func (it *pyIter) String() string { return "<generator object>" }

// dictKeys, dictValues and dictItems are the views dict.keys(), values() and
// items() return.
type (
	dictKeys   []any
	dictValues []any
	dictItems  []any
)

func (v dictKeys) String() string   { return pyRepr(exec.AsValue(v)) }
func (v dictValues) String() string { return pyRepr(exec.AsValue(v)) }
func (v dictItems) String() string  { return pyRepr(exec.AsValue(v)) }

// namespace is what Jinja2's namespace() makes: an object whose attributes
// {% set ns.x = ... %} may change from inside loops.
type namespace map[string]any

// String renders the namespace as Jinja2 does.
func (n namespace) String() string {
	var b strings.Builder
	b.WriteString("<Namespace {")
	for i, p := range dictPairs(exec.AsValue(map[string]any(n))) {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(pyRepr(p.Key) + ": " + pyRepr(p.Value))
	}
	b.WriteString("}>")
	return b.String()
}

// boundMethod is a method read but not called, like d.items. It prints as
// Python prints one.
type boundMethod struct {
	self *exec.Value
	name string
}

func (m boundMethod) String() string {
	return fmt.Sprintf("<built-in method %s of %s object>", m.name, typeName(m.self))
}
