package chat

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/nikolalohinski/gonja/v2/exec"
)

// filters are Jinja2's built-in filters as Python Jinja2 3.1 runs them, plus
// transformers' tojson. gonja's own versions differ in ways templates notice
// (sorted dict keys, HTML-escaping JSON, Go string semantics).
var filters = map[string]exec.FilterFunction{
	"abs":         filterAbs,
	"attr":        filterAttr,
	"batch":       filterBatch,
	"forceescape": filterEscape,
	"groupby":     filterGroupBy,
	"pprint":      filterPPrint,
	"slice":       filterSlice,
	"striptags":   filterStripTags,
	"urlencode":   filterURLEncode,
	"capitalize":  stringFilter(pyCapitalize),
	"center":      filterCenter,
	"count":       filterLength,
	"d":           filterDefault,
	"default":     filterDefault,
	"dictsort":    filterDictSort,
	"e":           filterEscape,
	"escape":      filterEscape,
	"first":       filterFirst,
	"float":       filterFloat,
	"format":      filterFormat,
	"indent":      filterIndent,
	"int":         filterInt,
	"items":       filterItems,
	"join":        filterJoin,
	"last":        filterLast,
	"length":      filterLength,
	"list":        filterList,
	"lower":       stringFilter(pyLower),
	"map":         filterMap,
	"max":         filterMinMax(true),
	"min":         filterMinMax(false),
	"reject":      filterSelect(false, false),
	"rejectattr":  filterSelect(false, true),
	"replace":     filterReplace,
	"reverse":     filterReverse,
	"round":       filterRound,
	"safe":        filterSafe,
	"select":      filterSelect(true, false),
	"selectattr":  filterSelect(true, true),
	"sort":        filterSort,
	"string":      filterString,
	"sum":         filterSum,
	"title":       plainStringFilter(jinjaTitle),
	"tojson":      filterToJSON,
	"trim":        filterTrim,
	"truncate":    filterTruncate,
	"unique":      filterUnique,
	"upper":       stringFilter(pyUpper),
	"wordcount":   filterWordCount,
	missingFilter: filterMissing,
}

// filterMissing stands for a filter that does not exist, used where Jinja2
// fails only when the filter runs (see rewriter): it fails the render.
func filterMissing(e *exec.Evaluator, _ *exec.Value, params *exec.VarArgs) *exec.Value {
	name := ""
	if len(params.Args) > 0 {
		name = pyStr(params.Args[0])
	}
	return failf(e, "TemplateRuntimeError: No filter named '%s' found.", name)
}

// stringFilter makes a filter of a function on str(value). Like Jinja2's,
// it keeps Markup Markup.
func stringFilter(f func(string) string) exec.FilterFunction {
	return func(_ *exec.Evaluator, in *exec.Value, params *exec.VarArgs) *exec.Value {
		if _, err := bindArgs("filter", params); err != nil {
			return errValue(err)
		}
		return sameSafety(in, f(pyStr(in)))
	}
}

// plainStringFilter is stringFilter for filters that return a plain str.
func plainStringFilter(f func(string) string) exec.FilterFunction {
	return func(_ *exec.Evaluator, in *exec.Value, params *exec.VarArgs) *exec.Value {
		if _, err := bindArgs("filter", params); err != nil {
			return errValue(err)
		}
		return exec.AsValue(f(pyStr(in)))
	}
}

// sameSafety makes s Markup when in is: Markup's str methods return Markup.
func sameSafety(in *exec.Value, s string) *exec.Value {
	if safeString(in) {
		return exec.AsSafeValue(s)
	}
	return exec.AsValue(s)
}

func filterToJSON(_ *exec.Evaluator, in *exec.Value, params *exec.VarArgs) *exec.Value {
	a, err := bindArgs("tojson", params, "ensure_ascii", "indent", "separators", "sort_keys")
	if err != nil {
		return errValue(err)
	}
	o, err := newJSONOptions(a[1], a[2], given(a[3]) && truthy(a[3]), given(a[0]) && truthy(a[0]))
	if err != nil {
		return errValue(err)
	}
	s, err := pyJSON(in, o)
	if err != nil {
		return errValue(err)
	}
	// transformers' tojson returns json.dumps' plain str, not Markup.
	return exec.AsValue(s)
}

func filterTrim(_ *exec.Evaluator, in *exec.Value, params *exec.VarArgs) *exec.Value {
	a, err := bindArgs("trim", params, "chars")
	if err != nil {
		return errValue(err)
	}
	chars, err := optString("trim", "chars", a[0])
	if err != nil {
		return errValue(err)
	}
	return sameSafety(in, pyStrip(pyStr(in), chars, true, true))
}

func filterLength(_ *exec.Evaluator, in *exec.Value, params *exec.VarArgs) *exec.Value {
	if _, err := bindArgs("length", params); err != nil {
		return errValue(err)
	}
	n, err := pyLen(in)
	if err != nil {
		return errValue(err)
	}
	return exec.AsValue(n)
}

func filterDefault(_ *exec.Evaluator, in *exec.Value, params *exec.VarArgs) *exec.Value {
	a, err := bindArgs("default", params, "default_value", "boolean")
	if err != nil {
		return errValue(err)
	}
	def := a[0]
	if def == nil {
		def = exec.AsValue("")
	}
	if kindOf(in) == kindUndefined || (given(a[1]) && truthy(a[1]) && !truthy(in)) {
		return def
	}
	return in
}

func filterItems(_ *exec.Evaluator, in *exec.Value, params *exec.VarArgs) *exec.Value {
	if _, err := bindArgs("items", params); err != nil {
		return errValue(err)
	}
	switch kindOf(in) {
	case kindUndefined:
		return generator(nil)
	case kindDict:
		pairs := itemPairs(in)
		items := make([]*exec.Value, len(pairs))
		for i, p := range pairs {
			items[i] = exec.AsValue(p)
		}
		return generator(items)
	}
	return exec.AsValue(&pyIter{err: errors.New("TypeError: Can only get item pairs from a mapping")})
}

func filterString(_ *exec.Evaluator, in *exec.Value, params *exec.VarArgs) *exec.Value {
	if _, err := bindArgs("string", params); err != nil {
		return errValue(err)
	}
	return sameSafety(in, pyStr(in))
}

func filterSafe(_ *exec.Evaluator, in *exec.Value, params *exec.VarArgs) *exec.Value {
	if _, err := bindArgs("safe", params); err != nil {
		return errValue(err)
	}
	if kindOf(in) == kindString {
		return exec.AsSafeValue(in.String())
	}
	return exec.AsSafeValue(pyStr(in))
}

func filterEscape(_ *exec.Evaluator, in *exec.Value, params *exec.VarArgs) *exec.Value {
	if _, err := bindArgs("escape", params); err != nil {
		return errValue(err)
	}
	if in.Safe {
		return in
	}
	r := strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;", `"`, "&#34;", "'", "&#39;")
	return exec.AsSafeValue(r.Replace(pyStr(in)))
}

// attrGetter is Jinja2's make_attrgetter: a dotted path, with integer parts
// used as indexes.
func attrGetter(path *exec.Value) func(*exec.Value) *exec.Value {
	if kindOf(path) != kindString {
		return func(v *exec.Value) *exec.Value { return getItem(v, path) }
	}
	parts := strings.Split(path.String(), ".")
	keys := make([]*exec.Value, len(parts))
	for i, p := range parts {
		if n, err := strconv.Atoi(p); err == nil {
			keys[i] = exec.AsValue(n)
		} else {
			keys[i] = exec.AsValue(p)
		}
	}
	return func(v *exec.Value) *exec.Value {
		for _, k := range keys {
			v = getItem(v, k)
		}
		return v
	}
}

func filterAttr(_ *exec.Evaluator, in *exec.Value, params *exec.VarArgs) *exec.Value {
	a, err := bindArgs("attr", params, "name")
	if err != nil || a[0] == nil {
		return errorf("attr() needs a name")
	}
	// attr() reads attributes only, and a dict's keys are not attributes.
	if ns, ok := in.Interface().(namespace); ok {
		return exec.ToValue(ns[a[0].String()])
	}
	return exec.AsValue(nil)
}

func filterJoin(_ *exec.Evaluator, in *exec.Value, params *exec.VarArgs) *exec.Value {
	a, err := bindArgs("join", params, "d", "attribute")
	if err != nil {
		return errValue(err)
	}
	items, err := iterate(in)
	if err != nil {
		return errValue(err)
	}
	sep := ""
	if a[0] != nil {
		sep = pyStr(a[0])
	}
	parts := make([]string, len(items))
	for i, e := range items {
		if a[1] != nil {
			e = attrGetter(a[1])(e)
		}
		parts[i] = pyStr(e)
	}
	return exec.AsValue(strings.Join(parts, sep))
}

func filterList(_ *exec.Evaluator, in *exec.Value, params *exec.VarArgs) *exec.Value {
	if _, err := bindArgs("list", params); err != nil {
		return errValue(err)
	}
	items, err := iterate(in)
	if err != nil {
		return errValue(err)
	}
	return exec.AsValue(valuesToList(items))
}

func filterFirst(_ *exec.Evaluator, in *exec.Value, params *exec.VarArgs) *exec.Value {
	if _, err := bindArgs("first", params); err != nil {
		return errValue(err)
	}
	items, err := iterate(in)
	if err != nil {
		return errValue(err)
	}
	if len(items) == 0 {
		return exec.AsValue(nil)
	}
	return items[0]
}

func filterLast(_ *exec.Evaluator, in *exec.Value, params *exec.VarArgs) *exec.Value {
	if _, err := bindArgs("last", params); err != nil {
		return errValue(err)
	}
	if kindOf(in) == kindIter {
		return errorf("'generator' object is not reversible")
	}
	items, err := iterate(in)
	if err != nil {
		return errValue(err)
	}
	if len(items) == 0 {
		return exec.AsValue(nil)
	}
	return items[len(items)-1]
}

func filterReverse(_ *exec.Evaluator, in *exec.Value, params *exec.VarArgs) *exec.Value {
	if _, err := bindArgs("reverse", params); err != nil {
		return errValue(err)
	}
	items, err := iterate(in)
	if err != nil {
		return errValue(err)
	}
	slices.Reverse(items)
	if kindOf(in) == kindIter {
		// A generator cannot be reversed: Jinja2 makes a list of it.
		return exec.AsValue(valuesToList(items))
	}
	if kindOf(in) == kindString {
		var b strings.Builder
		for _, c := range items {
			b.WriteString(c.String())
		}
		return exec.AsValue(b.String())
	}
	// reversed() of a list is an iterator, as true as a generator.
	return generator(items)
}

func filterReplace(_ *exec.Evaluator, in *exec.Value, params *exec.VarArgs) *exec.Value {
	a, err := bindArgs("replace", params, "old", "new", "count")
	if err != nil {
		return errValue(err)
	}
	if a[0] == nil || a[1] == nil {
		return errorf("replace() needs old and new")
	}
	count, err := intOr("replace", "count", a[2], -1)
	if err != nil {
		return errValue(err)
	}
	return exec.AsValue(strings.Replace(pyStr(in), pyStr(a[0]), pyStr(a[1]), count))
}

func filterIndent(_ *exec.Evaluator, in *exec.Value, params *exec.VarArgs) *exec.Value {
	a, err := bindArgs("indent", params, "width", "first", "blank")
	if err != nil {
		return errValue(err)
	}
	indent := "    "
	if a[0] != nil {
		if kindOf(a[0]) == kindString {
			indent = a[0].String()
		} else {
			n, err := intOr("indent", "width", a[0], 4)
			if err != nil {
				return errValue(err)
			}
			indent = strings.Repeat(" ", max(0, n))
		}
	}
	if kindOf(in) != kindString {
		return errorf("TypeError: unsupported operand type(s) for +=: '%s' and 'str'", typeName(in))
	}
	s := in.String() + "\n"
	lines := pySplitLines(s, false)
	var out string
	if given(a[2]) && truthy(a[2]) {
		out = strings.Join(lines, "\n"+indent)
	} else {
		out = lines[0]
		if len(lines) > 1 {
			rest := make([]string, len(lines)-1)
			for i, l := range lines[1:] {
				if l != "" {
					l = indent + l
				}
				rest[i] = l
			}
			out += "\n" + strings.Join(rest, "\n")
		}
	}
	if given(a[1]) && truthy(a[1]) {
		out = indent + out
	}
	return sameSafety(in, out)
}

func filterCenter(_ *exec.Evaluator, in *exec.Value, params *exec.VarArgs) *exec.Value {
	a, err := bindArgs("center", params, "width")
	if err != nil {
		return errValue(err)
	}
	w, err := intOr("center", "width", a[0], 80)
	if err != nil {
		return errValue(err)
	}
	return sameSafety(in, pyPad(pyStr(in), w, ' ', 'c'))
}

func filterWordCount(_ *exec.Evaluator, in *exec.Value, params *exec.VarArgs) *exec.Value {
	if _, err := bindArgs("wordcount", params); err != nil {
		return errValue(err)
	}
	n := 0
	inWord := false
	for _, r := range pyStr(in) {
		word := r == '_' || isWordRune(r)
		if word && !inWord {
			n++
		}
		inWord = word
	}
	return exec.AsValue(n)
}

func isWordRune(r rune) bool {
	return r == '_' || ('0' <= r && r <= '9') || ('a' <= r && r <= 'z') || ('A' <= r && r <= 'Z') ||
		(r >= 0x80 && (isCased(r) || strings.ContainsRune("0123456789", r)))
}

func filterTruncate(_ *exec.Evaluator, in *exec.Value, params *exec.VarArgs) *exec.Value {
	a, err := bindArgs("truncate", params, "length", "killwords", "end", "leeway")
	if err != nil {
		return errValue(err)
	}
	length, err := intOr("truncate", "length", a[0], 255)
	if err != nil {
		return errValue(err)
	}
	leeway, err := intOr("truncate", "leeway", a[3], 5)
	if err != nil {
		return errValue(err)
	}
	end := "..."
	if a[2] != nil {
		end = pyStr(a[2])
	}
	if kindOf(in) != kindString {
		// truncate measures and returns other sequences unchanged when short.
		n, err := pyLen(in)
		if err != nil {
			return errorf("TypeError: %v", err)
		}
		if n <= length+leeway {
			return in
		}
		return errorf("TypeError: can only truncate strings")
	}
	s := []rune(pyStr(in))
	if len(s) <= length+leeway {
		return exec.AsValue(string(s))
	}
	cut := max(0, length-utf8.RuneCountInString(end))
	if given(a[1]) && truthy(a[1]) {
		return exec.AsValue(string(s[:cut]) + end)
	}
	head := string(s[:cut])
	if i := strings.LastIndex(head, " "); i >= 0 {
		head = head[:i]
	} else {
		head = ""
	}
	return exec.AsValue(head + end)
}

func filterInt(_ *exec.Evaluator, in *exec.Value, params *exec.VarArgs) *exec.Value {
	a, err := bindArgs("int", params, "default", "base")
	if err != nil {
		return errValue(err)
	}
	def := exec.AsValue(0)
	if a[0] != nil {
		def = a[0]
	}
	base, err := intOr("int", "base", a[1], 10)
	if err != nil {
		return errValue(err)
	}
	switch kindOf(in) {
	case kindUndefined:
		return errorf("UndefinedError: int of an undefined value")
	case kindInt:
		return in
	case kindBool, kindFloat:
		return exec.AsValue(int(math.Trunc(toFloat(in))))
	case kindString:
		s := strings.TrimSpace(strings.ReplaceAll(in.String(), "_", ""))
		if n, ok := parsePyInt(s, base); ok {
			return exec.AsValue(n)
		}
		if f, err := strconv.ParseFloat(s, 64); err == nil && !math.IsInf(f, 0) && !math.IsNaN(f) {
			return exec.AsValue(int(math.Trunc(f)))
		}
	}
	return def
}

func filterFloat(_ *exec.Evaluator, in *exec.Value, params *exec.VarArgs) *exec.Value {
	a, err := bindArgs("float", params, "default")
	if err != nil {
		return errValue(err)
	}
	def := exec.AsValue(0.0)
	if a[0] != nil {
		def = a[0]
	}
	switch kindOf(in) {
	case kindUndefined:
		return errorf("UndefinedError: float of an undefined value")
	case kindInt, kindBool, kindFloat:
		return exec.AsValue(toFloat(in))
	case kindString:
		if f, err := strconv.ParseFloat(strings.TrimSpace(in.String()), 64); err == nil {
			return exec.AsValue(f)
		}
	}
	return def
}

func filterAbs(_ *exec.Evaluator, in *exec.Value, params *exec.VarArgs) *exec.Value {
	if _, err := bindArgs("abs", params); err != nil {
		return errValue(err)
	}
	switch kindOf(in) {
	case kindInt, kindBool:
		n := int(toFloat(in))
		if n < 0 {
			n = -n
		}
		return exec.AsValue(n)
	case kindFloat:
		return exec.AsValue(math.Abs(toFloat(in)))
	}
	return errorf("bad operand type for abs(): '%s'", typeName(in))
}

func filterRound(_ *exec.Evaluator, in *exec.Value, params *exec.VarArgs) *exec.Value {
	a, err := bindArgs("round", params, "precision", "method")
	if err != nil {
		return errValue(err)
	}
	prec, err := intOr("round", "precision", a[0], 0)
	if err != nil {
		return errValue(err)
	}
	method := "common"
	if a[1] != nil {
		method = pyStr(a[1])
	}
	if k := kindOf(in); !isNumber(k) {
		return errorf("TypeError: type %s doesn't define __round__ method", typeName(in))
	}
	if k := kindOf(in); (k == kindInt || k == kindBool) && method == "common" && prec >= 0 {
		// Python's round of an int is that int.
		return exec.AsValue(int(toFloat(in)))
	}
	f := toFloat(in)
	scale := math.Pow(10, float64(prec))
	switch method {
	case "common":
		// Python's round: to nearest, ties to even.
		return exec.AsValue(math.RoundToEven(f*scale) / scale)
	case "floor":
		return exec.AsValue(math.Floor(f*scale) / scale)
	case "ceil":
		return exec.AsValue(math.Ceil(f*scale) / scale)
	}
	return errorf("method must be common, ceil or floor")
}

func filterSum(_ *exec.Evaluator, in *exec.Value, params *exec.VarArgs) *exec.Value {
	a, err := bindArgs("sum", params, "attribute", "start")
	if err != nil {
		return errValue(err)
	}
	items, err := iterate(in)
	if err != nil {
		return errValue(err)
	}
	total := exec.AsValue(0)
	if a[1] != nil {
		total = a[1]
	}
	for _, e := range items {
		if a[0] != nil {
			e = attrGetter(a[0])(e)
		}
		if k := kindOf(e); k != kindInt && k != kindFloat && k != kindBool {
			return errorf("unsupported operand type(s) for +: '%s' and '%s'", typeName(total), typeName(e))
		}
		if kindOf(total) == kindFloat || kindOf(e) == kindFloat {
			total = exec.AsValue(toFloat(total) + toFloat(e))
		} else {
			total = exec.AsValue(int(toFloat(total)) + int(toFloat(e)))
		}
	}
	return total
}

func sortValues(items []*exec.Value, key func(*exec.Value) *exec.Value, caseSensitive, reverse bool) error {
	var err error
	slices.SortStableFunc(items, func(a, b *exec.Value) int {
		c, e := compareValues(key(a), key(b), caseSensitive)
		if e != nil && err == nil {
			err = e
		}
		if reverse {
			return -c
		}
		return c
	})
	return err
}

func identity(v *exec.Value) *exec.Value { return v }

func filterSort(_ *exec.Evaluator, in *exec.Value, params *exec.VarArgs) *exec.Value {
	a, err := bindArgs("sort", params, "reverse", "case_sensitive", "attribute")
	if err != nil {
		return errValue(err)
	}
	items, err := iterate(in)
	if err != nil {
		return errValue(err)
	}
	key := identity
	if a[2] != nil {
		key = attrGetter(a[2])
	}
	if err := sortValues(items, key, given(a[1]) && truthy(a[1]), given(a[0]) && truthy(a[0])); err != nil {
		return errValue(err)
	}
	return exec.AsValue(valuesToList(items))
}

func filterDictSort(_ *exec.Evaluator, in *exec.Value, params *exec.VarArgs) *exec.Value {
	a, err := bindArgs("dictsort", params, "case_sensitive", "by", "reverse")
	if err != nil {
		return errValue(err)
	}
	if kindOf(in) != kindDict {
		return errorf("dictsort: expected a mapping, got %s", typeName(in))
	}
	pairs := itemPairs(in)
	items := make([]*exec.Value, len(pairs))
	for i, p := range pairs {
		items[i] = exec.AsValue(p)
	}
	pos := 0
	if a[1] != nil {
		switch pyStr(a[1]) {
		case "key":
		case "value":
			pos = 1
		default:
			return errorf("You can only sort by either 'key' or 'value'")
		}
	}
	key := func(v *exec.Value) *exec.Value { return listItems(v)[pos] }
	if err := sortValues(items, key, given(a[0]) && truthy(a[0]), given(a[2]) && truthy(a[2])); err != nil {
		return errValue(err)
	}
	return exec.AsValue(valuesToList(items))
}

func filterUnique(_ *exec.Evaluator, in *exec.Value, params *exec.VarArgs) *exec.Value {
	a, err := bindArgs("unique", params, "case_sensitive", "attribute")
	if err != nil {
		return errValue(err)
	}
	items, err := iterate(in)
	if err != nil {
		return lazyError(err)
	}
	key := identity
	if a[1] != nil {
		key = attrGetter(a[1])
	}
	caseSensitive := given(a[0]) && truthy(a[0])
	var seen []*exec.Value
	var out []*exec.Value
	for _, e := range items {
		k := key(e)
		if kk := kindOf(k); kk == kindDict || (kk == kindList && !isTuple(k)) {
			return lazyError(fmt.Errorf("unhashable type: '%s'", typeName(k)))
		}
		if !caseSensitive && kindOf(k) == kindString {
			k = exec.AsValue(strings.ToLower(k.String()))
		}
		if slices.ContainsFunc(seen, func(s *exec.Value) bool { return pyEqual(s, k) }) {
			continue
		}
		seen = append(seen, k)
		out = append(out, e)
	}
	return generator(out)
}

func filterMinMax(isMax bool) exec.FilterFunction {
	return func(_ *exec.Evaluator, in *exec.Value, params *exec.VarArgs) *exec.Value {
		a, err := bindArgs("min", params, "case_sensitive", "attribute")
		if err != nil {
			return errValue(err)
		}
		items, err := iterate(in)
		if err != nil {
			return errValue(err)
		}
		if len(items) == 0 {
			return exec.AsValue(nil)
		}
		key := identity
		if a[1] != nil {
			key = attrGetter(a[1])
		}
		best := items[0]
		for _, e := range items[1:] {
			c, err := compareValues(key(e), key(best), given(a[0]) && truthy(a[0]))
			if err != nil {
				return errValue(err)
			}
			if (isMax && c > 0) || (!isMax && c < 0) {
				best = e
			}
		}
		return best
	}
}

func filterMap(e *exec.Evaluator, in *exec.Value, params *exec.VarArgs) *exec.Value {
	// Jinja2's map, select and reject yield nothing for a false value
	// (None included) instead of failing to iterate it.
	if !truthy(in) {
		return generator(nil)
	}
	items, err := iterate(in)
	if err != nil {
		return lazyError(err)
	}
	var f func(*exec.Value) *exec.Value
	if attr, ok := params.KwArgs["attribute"]; ok {
		get := attrGetter(attr)
		def := params.KwArgs["default"]
		for k := range params.KwArgs {
			if k != "attribute" && k != "default" {
				return errorf("Unexpected keyword argument '%s'", k)
			}
		}
		f = func(v *exec.Value) *exec.Value {
			r := get(v)
			if def != nil && kindOf(r) == kindUndefined {
				return def
			}
			return r
		}
	} else {
		if len(params.Args) == 0 {
			return errorf("map requires a filter argument")
		}
		name := pyStr(params.Args[0])
		rest := &exec.VarArgs{Args: params.Args[1:], KwArgs: params.KwArgs}
		f = func(v *exec.Value) *exec.Value { return e.ExecuteFilterByName(name, v, rest) }
	}
	out := make([]*exec.Value, len(items))
	for i, it := range items {
		r := f(it)
		if r.IsError() {
			return r
		}
		out[i] = r
	}
	return generator(out)
}

// generator wraps items as a generator value.
func generator(items []*exec.Value) *exec.Value { return exec.AsValue(&pyIter{items: items}) }

// lazyError is a generator that fails when iterated: a filter written as a
// Python generator raises only then.
func lazyError(err error) *exec.Value {
	return exec.AsValue(&pyIter{err: fmt.Errorf("TypeError: %w", err)})
}

// filterSelect makes select, reject, selectattr and rejectattr.
func filterSelect(keep, byAttr bool) exec.FilterFunction {
	return func(e *exec.Evaluator, in *exec.Value, params *exec.VarArgs) *exec.Value {
		if !truthy(in) {
			return generator(nil)
		}
		items, err := iterate(in)
		if err != nil {
			return lazyError(err)
		}
		args := params.Args
		get := identity
		if byAttr {
			if len(args) == 0 {
				return errorf("Missing parameter for attribute name")
			}
			get = attrGetter(args[0])
			args = args[1:]
		}
		test := func(v *exec.Value) (bool, error) { return truthy(v), nil }
		if len(args) > 0 {
			name := pyStr(args[0])
			rest := &exec.VarArgs{Args: args[1:], KwArgs: params.KwArgs}
			test = func(v *exec.Value) (bool, error) {
				r := e.ExecuteTestByName(name, v, rest)
				if r.IsError() {
					return false, r.Interface().(error)
				}
				return truthy(r), nil
			}
		}
		var out []*exec.Value
		for _, it := range items {
			ok, err := test(get(it))
			if err != nil {
				return errValue(err)
			}
			if ok == keep {
				out = append(out, it)
			}
		}
		return generator(out)
	}
}

func filterFormat(_ *exec.Evaluator, in *exec.Value, params *exec.VarArgs) *exec.Value {
	if len(params.Args) > 0 && len(params.KwArgs) > 0 {
		return errorf("can't handle positional and keyword arguments at the same time")
	}
	s, err := percentFormat(pyStr(in), params)
	if err != nil {
		return errValue(err)
	}
	return sameSafety(in, s)
}

func filterPPrint(_ *exec.Evaluator, in *exec.Value, _ *exec.VarArgs) *exec.Value {
	return exec.AsValue(pyRepr(in))
}

// filterBatch is batch(value, linecount, fill_with=None): lists of
// linecount items, the last one padded when fill_with is given.
func filterBatch(_ *exec.Evaluator, in *exec.Value, params *exec.VarArgs) *exec.Value {
	a, err := bindArgs("batch", params, "linecount", "fill_with")
	if err != nil {
		return errValue(err)
	}
	n, err := optInt("batch", "linecount", a[0])
	if err != nil || n == nil || *n <= 0 {
		return errorf("batch needs a positive linecount")
	}
	items, err := iterate(in)
	if err != nil {
		return errValue(err)
	}
	var out []*exec.Value
	for start := 0; start < len(items); start += *n {
		end := min(start+*n, len(items))
		chunk := valuesToList(items[start:end])
		if a[1] != nil {
			for len(chunk) < *n {
				chunk = append(chunk, a[1].Interface())
			}
		}
		out = append(out, exec.AsValue(chunk))
	}
	return generator(out)
}

// filterSlice is slice(value, slices, fill_with=None): the items cut into
// that many columns, the first ones one longer when they do not divide.
func filterSlice(_ *exec.Evaluator, in *exec.Value, params *exec.VarArgs) *exec.Value {
	a, err := bindArgs("slice", params, "slices", "fill_with")
	if err != nil {
		return errValue(err)
	}
	n, err := optInt("slice", "slices", a[0])
	if err != nil || n == nil || *n <= 0 {
		return errorf("slice needs a positive number of slices")
	}
	items, err := iterate(in)
	if err != nil {
		return errValue(err)
	}
	per, extra := len(items)/(*n), len(items)%(*n)
	var out []*exec.Value
	offset := 0
	for i := 0; i < *n; i++ {
		start := offset + i*per
		if i < extra {
			offset++
		}
		end := offset + (i+1)*per
		chunk := valuesToList(items[start:end])
		if a[1] != nil && i >= extra {
			chunk = append(chunk, a[1].Interface())
		}
		out = append(out, exec.AsValue(chunk))
	}
	return generator(out)
}

// filterGroupBy is groupby(value, attribute, default=None,
// case_sensitive=False): (grouper, list) pairs sorted by the attribute.
func filterGroupBy(_ *exec.Evaluator, in *exec.Value, params *exec.VarArgs) *exec.Value {
	a, err := bindArgs("groupby", params, "attribute", "default", "case_sensitive")
	if err != nil {
		return errValue(err)
	}
	if a[0] == nil {
		return errorf("groupby needs an attribute")
	}
	items, err := iterate(in)
	if err != nil {
		return errValue(err)
	}
	get := attrGetter(a[0])
	caseSensitive := given(a[2]) && truthy(a[2])
	key := func(v *exec.Value) *exec.Value {
		k := get(v)
		if kindOf(k) == kindUndefined && a[1] != nil {
			k = a[1]
		}
		if !caseSensitive && kindOf(k) == kindString {
			k = exec.AsValue(strings.ToLower(k.String()))
		}
		return k
	}
	if err := sortValues(items, key, true, false); err != nil {
		return errValue(err)
	}
	out := pyList{}
	for i := 0; i < len(items); {
		k := key(items[i])
		j := i + 1
		for j < len(items) && pyEqual(key(items[j]), k) {
			j++
		}
		grouper := get(items[i])
		if kindOf(grouper) == kindUndefined && a[1] != nil {
			grouper = a[1]
		}
		out = append(out, pyTuple{grouper.Interface(), valuesToList(items[i:j])})
		i = j
	}
	return exec.AsValue(out)
}

// filterStripTags removes SGML/XML tags and collapses white space.
func filterStripTags(_ *exec.Evaluator, in *exec.Value, params *exec.VarArgs) *exec.Value {
	s := pyStr(in)
	var b strings.Builder
	for {
		i := strings.Index(s, "<")
		if i < 0 {
			b.WriteString(s)
			break
		}
		j := strings.Index(s[i:], ">")
		if j < 0 {
			b.WriteString(s)
			break
		}
		b.WriteString(s[:i])
		s = s[i+j+1:]
	}
	words, _ := pySplit(b.String(), nil, -1)
	r := strings.NewReplacer("&amp;", "&", "&lt;", "<", "&gt;", ">", "&#34;", `"`, "&#39;", "'", "&quot;", `"`)
	return exec.AsValue(r.Replace(strings.Join(words, " ")))
}

// filterURLEncode quotes a string for a URL path, or a dict/list of pairs as
// a query string.
func filterURLEncode(_ *exec.Evaluator, in *exec.Value, params *exec.VarArgs) *exec.Value {
	quote := func(s string, safe string) string {
		var b strings.Builder
		for _, c := range []byte(s) {
			if c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || c >= '0' && c <= '9' ||
				strings.IndexByte("_.-~"+safe, c) >= 0 {
				b.WriteByte(c)
			} else {
				fmt.Fprintf(&b, "%%%02X", c)
			}
		}
		return b.String()
	}
	var pairs [][2]*exec.Value
	switch kindOf(in) {
	case kindString:
		return exec.AsValue(quote(in.String(), "/"))
	case kindDict:
		for _, p := range dictPairs(in) {
			pairs = append(pairs, [2]*exec.Value{p.Key, p.Value})
		}
	case kindList:
		for _, e := range listItems(in) {
			kv := listItems(e)
			if len(kv) != 2 {
				return errorf("urlencode needs pairs")
			}
			pairs = append(pairs, [2]*exec.Value{kv[0], kv[1]})
		}
	default:
		return exec.AsValue(quote(pyStr(in), "/"))
	}
	parts := make([]string, len(pairs))
	for i, p := range pairs {
		parts[i] = quote(pyStr(p[0]), "") + "=" + quote(pyStr(p[1]), "")
	}
	return exec.AsValue(strings.Join(parts, "&"))
}

// parsePyInt is Python's int(s, base): a sign, then digits, with a 0x, 0o
// or 0b prefix allowed when it matches the base (or base is 0).
func parsePyInt(s string, base int) (int, bool) {
	sign := ""
	if s != "" && (s[0] == '+' || s[0] == '-') {
		sign, s = s[:1], s[1:]
	}
	if len(s) > 2 && s[0] == '0' {
		prefixes := map[byte]int{'x': 16, 'X': 16, 'o': 8, 'O': 8, 'b': 2, 'B': 2}
		if b, ok := prefixes[s[1]]; ok && (base == b || base == 0) {
			s, base = s[2:], b
		}
	}
	if base == 0 {
		base = 10
	}
	n, err := strconv.ParseInt(sign+s, base, 64)
	if err != nil {
		return 0, false
	}
	return int(n), true
}
