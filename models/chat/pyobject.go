package chat

import (
	"fmt"
	"math"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/nikolalohinski/gonja/v2/exec"
)

// This file gives gonja values their Python meaning: which Python type a
// value is, its str() and repr(), its items and pairs.

// pyKind is the Python type of a template value.
type pyKind int

const (
	kindUndefined pyKind = iota
	kindNone
	kindBool
	kindInt
	kindFloat
	kindString
	kindList
	kindDict
	kindCallable
	kindIter // a generator: iterable once, always true, no length
	kindOther
)

// kindOf tells the Python type of v.
func kindOf(v *exec.Value) pyKind {
	if v == nil || v.IsNil() {
		return kindUndefined
	}
	switch v.Interface().(type) {
	case noneType:
		return kindNone
	case namespace:
		return kindOther
	case bigInt:
		return kindInt
	case *pyIter:
		return kindIter
	}
	switch {
	case v.IsError():
		return kindOther
	case v.IsBool():
		return kindBool
	case v.IsInteger():
		return kindInt
	case v.IsFloat():
		return kindFloat
	case v.IsString():
		return kindString
	case v.IsDict():
		return kindDict
	case v.IsList():
		return kindList
	case v.IsCallable():
		return kindCallable
	}
	return kindOther
}

// typeName is the Python type name of v, for error messages.
func typeName(v *exec.Value) string {
	switch kindOf(v) {
	case kindUndefined:
		return "Undefined"
	case kindNone:
		return "NoneType"
	case kindBool:
		return "bool"
	case kindInt:
		return "int"
	case kindFloat:
		return "float"
	case kindString:
		return "str"
	case kindList:
		switch v.Interface().(type) {
		case pyTuple:
			return "tuple"
		case dictKeys:
			return "dict_keys"
		case dictValues:
			return "dict_values"
		case dictItems:
			return "dict_items"
		}
		return "list"
	case kindDict:
		return "dict"
	case kindCallable:
		return "function"
	case kindIter:
		return "generator"
	}
	return fmt.Sprintf("%T", v.Interface())
}

// resolved strips pointers so a value's kind can be inspected.
func resolved(v *exec.Value) reflect.Value {
	r := v.Val
	for r.IsValid() && (r.Kind() == reflect.Pointer || r.Kind() == reflect.Interface) {
		r = r.Elem()
	}
	return r
}

// listItems returns the elements of a list value.
func listItems(v *exec.Value) []*exec.Value {
	r := resolved(v)
	if r.Kind() != reflect.Slice && r.Kind() != reflect.Array {
		return nil
	}
	out := make([]*exec.Value, r.Len())
	for i := range out {
		out[i] = exec.ToValue(r.Index(i))
	}
	return out
}

// dictPairs returns the key/value pairs of a dict value in Python's order:
// insertion order for gonja dicts, key order for Go maps (whose insertion
// order is lost).
func dictPairs(v *exec.Value) []*exec.Pair {
	r := resolved(v)
	if r.Kind() == reflect.Struct && r.Type() == exec.TypeDict {
		d := r.Interface().(exec.Dict)
		out := make([]*exec.Pair, len(d.Pairs))
		for i, p := range d.Pairs {
			out[i] = &exec.Pair{Key: exec.ToValue(p.Key), Value: exec.ToValue(p.Value)}
		}
		return out
	}
	if r.Kind() != reflect.Map {
		return nil
	}
	keys := r.MapKeys()
	slices.SortFunc(keys, func(a, b reflect.Value) int {
		return strings.Compare(fmt.Sprint(a.Interface()), fmt.Sprint(b.Interface()))
	})
	out := make([]*exec.Pair, len(keys))
	for i, k := range keys {
		out[i] = &exec.Pair{Key: exec.ToValue(k), Value: exec.ToValue(r.MapIndex(k))}
	}
	return out
}

// lookupKey finds key in a dict value.
func lookupKey(v *exec.Value, key *exec.Value) (*exec.Value, bool) {
	for _, p := range dictPairs(v) {
		if pyEqual(p.Key, key) {
			return p.Value, true
		}
	}
	return nil, false
}

// iterate returns what a Python for loop over v yields: elements of a list,
// keys of a dict, characters of a string; undefined yields nothing.
func iterate(v *exec.Value) ([]*exec.Value, error) {
	switch kindOf(v) {
	case kindUndefined:
		return nil, nil
	case kindList:
		return listItems(v), nil
	case kindIter:
		return v.Interface().(*pyIter).values()
	case kindDict:
		pairs := dictPairs(v)
		out := make([]*exec.Value, len(pairs))
		for i, p := range pairs {
			out[i] = p.Key
		}
		return out, nil
	case kindString:
		s := v.String()
		out := make([]*exec.Value, 0, len(s))
		for _, r := range s {
			out = append(out, exec.AsValue(string(r)))
		}
		return out, nil
	}
	return nil, fmt.Errorf("'%s' object is not iterable", typeName(v))
}

// pyEqual is Python's ==.
func pyEqual(a, b *exec.Value) bool {
	ka, kb := kindOf(a), kindOf(b)
	num := func(k pyKind) bool { return k == kindInt || k == kindFloat || k == kindBool }
	switch {
	case num(ka) && num(kb):
		return toFloat(a) == toFloat(b)
	case ka != kb:
		return false
	}
	switch ka {
	case kindUndefined, kindNone:
		return true
	case kindString:
		return a.String() == b.String()
	case kindList:
		x, y := listItems(a), listItems(b)
		if len(x) != len(y) {
			return false
		}
		for i := range x {
			if !pyEqual(x[i], y[i]) {
				return false
			}
		}
		return true
	case kindDict:
		x, y := dictPairs(a), dictPairs(b)
		if len(x) != len(y) {
			return false
		}
		for _, p := range x {
			q, ok := lookupKey(b, p.Key)
			if !ok || !pyEqual(p.Value, q) {
				return false
			}
		}
		return true
	}
	return a.Interface() == b.Interface()
}

// toFloat reads a bool, int or float value as float64.
func toFloat(v *exec.Value) float64 {
	if b, ok := v.Interface().(bigInt); ok {
		f, _ := strconv.ParseFloat(string(b), 64)
		return f
	}
	r := resolved(v)
	switch r.Kind() {
	case reflect.Bool:
		if r.Bool() {
			return 1
		}
		return 0
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return float64(r.Int())
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return float64(r.Uint())
	case reflect.Float32, reflect.Float64:
		return r.Float()
	}
	return 0
}

// truthy is Python's bool(v).
func truthy(v *exec.Value) bool {
	switch kindOf(v) {
	case kindUndefined, kindNone:
		return false
	case kindBool, kindInt, kindFloat:
		return toFloat(v) != 0
	case kindString:
		return v.String() != ""
	case kindList:
		return resolved(v).Len() > 0
	case kindDict:
		return len(dictPairs(v)) > 0
	}
	return true
}

// pyStr is Python's str(v); undefined is the empty string.
func pyStr(v *exec.Value) string {
	switch kindOf(v) {
	case kindUndefined:
		return ""
	case kindString:
		return v.String()
	case kindList, kindDict, kindNone, kindBool, kindInt, kindFloat, kindIter:
		return pyRepr(v)
	}
	return v.String()
}

// pyRepr is Python's repr(v).
func pyRepr(v *exec.Value) string {
	var b strings.Builder
	writeRepr(&b, v, 0)
	return b.String()
}

func writeRepr(b *strings.Builder, v *exec.Value, depth int) {
	if depth > maxDepth {
		b.WriteString("...")
		return
	}
	switch kindOf(v) {
	case kindUndefined:
		b.WriteString("Undefined")
	case kindNone:
		b.WriteString("None")
	case kindBool:
		if toFloat(v) != 0 {
			b.WriteString("True")
		} else {
			b.WriteString("False")
		}
	case kindInt:
		b.WriteString(intText(v))
	case kindFloat:
		b.WriteString(formatPyFloat(toFloat(v)))
	case kindString:
		b.WriteString(reprString(v.String()))
	case kindIter:
		b.WriteString("<generator object>")
	case kindList:
		_, tuple := v.Interface().(pyTuple)
		open, close := "[", "]"
		switch v.Interface().(type) {
		case pyTuple:
			open, close = "(", ")"
		case dictKeys:
			open, close = "dict_keys([", "])"
		case dictValues:
			open, close = "dict_values([", "])"
		case dictItems:
			open, close = "dict_items([", "])"
		}
		items := listItems(v)
		b.WriteString(open)
		for i, e := range items {
			if i > 0 {
				b.WriteString(", ")
			}
			writeRepr(b, e, depth+1)
		}
		if tuple && len(items) == 1 {
			b.WriteByte(',')
		}
		b.WriteString(close)
	case kindDict:
		b.WriteByte('{')
		for i, p := range dictPairs(v) {
			if i > 0 {
				b.WriteString(", ")
			}
			writeRepr(b, p.Key, depth+1)
			b.WriteString(": ")
			writeRepr(b, p.Value, depth+1)
		}
		b.WriteByte('}')
	default:
		b.WriteString(v.String())
	}
}

// resolvedInt reads an int value; a bigInt is clamped to int64.
func resolvedInt(v *exec.Value) int64 {
	if b, ok := v.Interface().(bigInt); ok {
		if strings.HasPrefix(string(b), "-") {
			return math.MinInt64
		}
		return math.MaxInt64
	}
	r := resolved(v)
	switch r.Kind() {
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return int64(r.Uint())
	}
	return r.Int()
}

// reprString quotes s as Python's repr of a str does: single quotes unless
// the string holds a single quote and no double quote.
func reprString(s string) string {
	quote := byte('\'')
	if strings.IndexByte(s, '\'') >= 0 && strings.IndexByte(s, '"') < 0 {
		quote = '"'
	}
	var b strings.Builder
	b.WriteByte(quote)
	for _, r := range s {
		switch {
		case r == rune(quote) || r == '\\':
			b.WriteByte('\\')
			b.WriteRune(r)
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\r':
			b.WriteString(`\r`)
		case r == '\t':
			b.WriteString(`\t`)
		case r < 0x20 || r == 0x7f:
			fmt.Fprintf(&b, `\x%02x`, r)
		case r == utf8.RuneError:
			b.WriteString(`\ufffd`)
		case r >= 0x80 && !isPrintable(r):
			b.WriteString(backslashReplace(r))
		default:
			b.WriteRune(r)
		}
	}
	b.WriteByte(quote)
	return b.String()
}

// isPrintable approximates Python's str.isprintable for one character.
func isPrintable(r rune) bool {
	if r == ' ' {
		return true
	}
	return strconv.IsPrint(r) && !isUnicodeSpace(r)
}

// formatPyFloat is Python's repr of a float: the shortest digits that read
// back the same, in fixed notation for decimal exponents from -4 to 15 and in
// exponent notation otherwise, always with a fractional part or exponent.
func formatPyFloat(f float64) string {
	switch {
	case math.IsInf(f, 1):
		return "inf"
	case math.IsInf(f, -1):
		return "-inf"
	case math.IsNaN(f):
		return "nan"
	}
	s := strconv.FormatFloat(f, 'e', -1, 64)
	sign := ""
	if s[0] == '-' {
		sign, s = "-", s[1:]
	}
	mant, expText, _ := strings.Cut(s, "e")
	exp, _ := strconv.Atoi(expText)
	digits := strings.Replace(mant, ".", "", 1)
	point := exp + 1 // digits before the decimal point
	if point > -4 && point <= 16 {
		switch {
		case point <= 0:
			return sign + "0." + strings.Repeat("0", -point) + digits
		case point >= len(digits):
			return sign + digits + strings.Repeat("0", point-len(digits)) + ".0"
		default:
			return sign + digits[:point] + "." + digits[point:]
		}
	}
	m := digits[:1]
	if len(digits) > 1 {
		m += "." + digits[1:]
	}
	es := "+"
	if exp < 0 {
		es, exp = "-", -exp
	}
	return fmt.Sprintf("%s%se%s%02d", sign, m, es, exp)
}

// intText is the decimal text of an int value.
func intText(v *exec.Value) string {
	if b, ok := v.Interface().(bigInt); ok {
		return string(b)
	}
	return strconv.FormatInt(resolvedInt(v), 10)
}

// pyLen is Python's len(v); undefined has length 0.
func pyLen(v *exec.Value) (int, error) {
	switch kindOf(v) {
	case kindUndefined:
		return 0, nil
	case kindString:
		return utf8.RuneCountInString(v.String()), nil
	case kindList:
		return resolved(v).Len(), nil
	case kindDict:
		return len(dictPairs(v)), nil
	}
	return 0, fmt.Errorf("object of type '%s' has no len()", typeName(v))
}

// getItem is Jinja2's environment.getitem: subscript first, and undefined
// when there is nothing there.
func getItem(obj, key *exec.Value) *exec.Value {
	switch kindOf(obj) {
	case kindDict:
		if v, ok := lookupKey(obj, key); ok {
			return v
		}
	case kindList, kindString:
		if kindOf(key) != kindInt {
			break
		}
		items := listItems(obj)
		if kindOf(obj) == kindString {
			items, _ = iterate(obj)
		}
		i := int(resolvedInt(key))
		if i < 0 {
			i += len(items)
		}
		if i >= 0 && i < len(items) {
			return items[i]
		}
	default:
		if ns, ok := obj.Interface().(namespace); ok && kindOf(key) == kindString {
			if v, ok := ns[key.String()]; ok {
				return exec.ToValue(v)
			}
		}
	}
	return exec.AsValue(nil)
}

// compareValues orders values as Python's < does for the types templates
// compare: numbers by value, strings by code point (lowered unless case
// sensitive), sequences item by item.
func compareValues(x, y *exec.Value, caseSensitive bool) (int, error) {
	kx, ky := kindOf(x), kindOf(y)
	num := func(k pyKind) bool { return k == kindInt || k == kindFloat || k == kindBool }
	switch {
	case num(kx) && num(ky):
		a, b := toFloat(x), toFloat(y)
		switch {
		case a < b:
			return -1, nil
		case a > b:
			return 1, nil
		}
		return 0, nil
	case kx == kindString && ky == kindString:
		a, b := x.String(), y.String()
		if !caseSensitive {
			a, b = strings.ToLower(a), strings.ToLower(b)
		}
		return strings.Compare(a, b), nil
	case kx == kindList && ky == kindList && isTuple(x) == isTuple(y):
		// Python compares sequences at their first unequal items.
		a, b := listItems(x), listItems(y)
		for i := 0; i < len(a) && i < len(b); i++ {
			if pyEqual(a[i], b[i]) {
				continue
			}
			return compareValues(a[i], b[i], caseSensitive)
		}
		return len(a) - len(b), nil
	}
	return 0, fmt.Errorf("'<' not supported between instances of '%s' and '%s'", typeName(x), typeName(y))
}

// valuesToList makes a template list of values.
func valuesToList(items []*exec.Value) pyList {
	out := make(pyList, len(items))
	for i, e := range items {
		out[i] = e.Interface()
	}
	return out
}

// itemPairs is dict.items() as a list of (key, value) tuples.
func itemPairs(v *exec.Value) pyList {
	pairs := dictPairs(v)
	out := make(pyList, len(pairs))
	for i, p := range pairs {
		out[i] = pyTuple{p.Key.Interface(), p.Value.Interface()}
	}
	return out
}

func isTuple(v *exec.Value) bool {
	_, ok := v.Interface().(pyTuple)
	return ok
}

// newDict makes a dict value. An empty dict is an empty Go map, which gonja
// counts as false, where its ordered dict type would count as true.
func newDict(pairs []*exec.Pair) any {
	if len(pairs) == 0 {
		return map[string]any{}
	}
	return &exec.Dict{Pairs: pairs}
}

func isNumber(k pyKind) bool { return k == kindInt || k == kindFloat || k == kindBool }

// safeString reports a Markup string (the result of |safe and friends).
func safeString(v *exec.Value) bool { return v.Safe && kindOf(v) == kindString }

// escapeHTML is markupsafe's escape.
func escapeHTML(s string) string {
	return strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;", `"`, "&#34;", "'", "&#39;").Replace(s)
}
