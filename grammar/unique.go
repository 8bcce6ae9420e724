package grammar

import (
	"encoding/json"
	"math/big"
	"slices"
	"strconv"
	"strings"
)

// uniqueItems: a grammar cannot remember the items it has written, so an
// array of items that must differ is written in a form that makes them
// differ, as far as one exists:
//
//   - items with few values (an enum, const, boolean or null schema, or
//     anyOf of them; up to maxAnyOrder values): any values, in any order,
//     each at most once, by a rule per set of the values written;
//   - items with more such values: each at most once, in the enum's order;
//   - strings with no constraint but lengths (Pydantic's set[str]): in
//     increasing order of their first characters (printable ASCII), so
//     that no two are equal, the empty string first;
//   - any other items: at most one (an array of one is unique), and the
//     schema is refused when it asks for more.

// maxAnyOrder is the most values written in any order: the rules are one
// per set of values, 2^maxAnyOrder of them.
const maxAnyOrder = 10

// maxUniqueRules bounds the rules of an array of unique items in order.
const maxUniqueRules = 1 << 15

// uniqueArray is the expression of the arrays of minItems to maxItems
// (maxItems < 0: no limit) items of schema rest that differ from each
// other.
func (c *schemaCompiler) uniqueArray(rest any, restPath string, minItems, maxItems int, path string) (*Expr, error) {
	sep := Seq(Ref(ruleWS), Lit(","), Ref(ruleWS))
	wrap := func(e *Expr) *Expr { return Seq(Lit("["), Ref(ruleWS), e, Ref(ruleWS), Lit("]")) }
	if vals, ok := c.finiteValues(rest, 0); ok {
		if len(vals) < minItems {
			return nil, schemaErr(path, "minItems %d needs more unique items than the %d values the items may have", minItems, len(vals))
		}
		items := make([]*Expr, len(vals))
		for i, v := range vals {
			items[i] = c.newRule(Lit(jsonLiteral(v)))
		}
		if len(vals) <= maxAnyOrder {
			return wrap(c.anyOrder(items, minItems, maxItems, sep, true)), nil
		}
		e, err := c.inOrder(items, minItems, maxItems, sep, true, path)
		if err != nil {
			return nil, err
		}
		return wrap(e), nil
	}
	if lo, hi, ok := c.plainString(rest); ok {
		// One class per first character, the empty string first.
		var items []*Expr
		if lo == 0 {
			items = append(items, Lit(`""`))
		}
		restChars := Repeat(Ref(ruleChar), max(lo-1, 0), dec(hi))
		for b := byte(' '); b <= '~'; b++ {
			if b == '"' || b == '\\' {
				continue
			}
			items = append(items, Seq(Lit(`"`+string(b)), restChars, Lit(`"`)))
		}
		if len(items) < minItems {
			return nil, schemaErr(path, "minItems %d is more unique strings than are written (%d, told apart by their first characters)", minItems, len(items))
		}
		e, err := c.inOrder(items, minItems, maxItems, sep, true, path)
		if err != nil {
			return nil, err
		}
		return wrap(e), nil
	}
	if minItems > 1 {
		return nil, schemaErr(path+"/uniqueItems", "uniqueItems with minItems above 1 is supported only for items of few values (enum, const, boolean) or plain strings")
	}
	item, err := c.schema(rest, restPath)
	if err != nil {
		return nil, err
	}
	if minItems == 1 {
		return wrap(item), nil
	}
	return wrap(Opt(item)), nil
}

// anyOrder is the items (told apart by their index), each at most once,
// in any order: a rule per set of those written. Each item follows sep,
// but the first one when bare.
func (c *schemaCompiler) anyOrder(items []*Expr, minItems, maxItems int, sep *Expr, bare bool) *Expr {
	n := len(items)
	names := make([]string, 1<<n)
	var rule func(set int) *Expr
	rule = func(set int) *Expr {
		if names[set] != "" {
			return Ref(names[set])
		}
		names[set] = c.ruleName()
		count := bitCount(set)
		var alts []*Expr
		if maxItems < 0 || count < maxItems {
			for i := range n {
				if set&(1<<i) != 0 {
					continue
				}
				lead := sep
				if set == 0 && bare {
					lead = Empty()
				}
				alts = append(alts, Seq(lead, items[i], rule(set|1<<i)))
			}
		}
		if count >= minItems {
			alts = append(alts, Empty())
		}
		c.b.rules[names[set]] = Alt(alts...)
		return Ref(names[set])
	}
	return rule(0)
}

func bitCount(x int) int {
	n := 0
	for ; x != 0; x &= x - 1 {
		n++
	}
	return n
}

// inOrder is the items (told apart by their index), each at most once,
// in the order given: a rule per index and count of items written so far
// (the count kept up to maxItems, or while it is below minItems and to
// tell the first item from the others). Each item follows sep, but the
// first one when bare.
func (c *schemaCompiler) inOrder(items []*Expr, minItems, maxItems int, sep *Expr, bare bool, path string) (*Expr, error) {
	n := len(items)
	if maxItems > n {
		maxItems = n // no more can be written
	}
	top := maxItems
	if top < 0 {
		top = max(minItems, 1)
	}
	if (n+1)*(top+1) > maxUniqueRules {
		return nil, schemaErr(path, "uniqueItems over %d values with up to %d items makes a grammar too large", n, top)
	}
	names := map[[2]int]string{}
	var rule func(i, count int) *Expr
	rule = func(i, count int) *Expr {
		k := [2]int{i, count}
		if name, ok := names[k]; ok {
			return Ref(name)
		}
		name := c.ruleName()
		names[k] = name
		var alts []*Expr
		if i == n {
			alts = append(alts, Empty())
		} else {
			if maxItems < 0 || count < maxItems {
				lead := sep
				if count == 0 && bare {
					lead = Empty()
				}
				next := count + 1
				if maxItems < 0 {
					next = min(next, top)
				}
				if next+(n-i-1) >= minItems {
					alts = append(alts, Seq(lead, items[i], rule(i+1, next)))
				}
			}
			if count+(n-i-1) >= minItems {
				alts = append(alts, rule(i+1, count))
			}
		}
		c.b.rules[name] = Alt(alts...)
		return Ref(name)
	}
	return rule(0, 0), nil
}

// finiteValues lists the values schema s allows when they are few and
// plain to see: an enum or const (of the types the schema allows),
// booleans, null, and anyOf or oneOf of such, through references; each
// value once (as JSON schema compares values: 1 and 1.0 are one).
func (c *schemaCompiler) finiteValues(s any, depth int) ([]any, bool) {
	o, ok := s.(*object)
	if !ok || depth > maxNesting {
		return nil, false
	}
	if r, ok := o.get("$ref"); ok {
		rs, _ := r.(string)
		if len(constraining(o, "$ref")) > 0 || !strings.HasPrefix(rs, "#") {
			return nil, false
		}
		t, err := c.resolve(rs[1:])
		if err != nil {
			return nil, false
		}
		return c.finiteValues(t, depth+1)
	}
	var vals []any
	for _, kw := range []string{"anyOf", "oneOf"} {
		if v, ok := o.get(kw); ok {
			if len(constraining(o, kw)) > 0 {
				return nil, false
			}
			list, _ := v.([]any)
			for _, b := range list {
				bv, ok := c.finiteValues(b, depth+1)
				if !ok {
					return nil, false
				}
				vals = append(vals, bv...)
			}
			return dedupe(vals), true
		}
	}
	types, err := typesOf(o, "")
	if err != nil {
		return nil, false
	}
	if v, ok := o.get("const"); ok && len(constraining(o, "const", "type")) == 0 {
		vals = []any{v}
	} else if v, ok := o.get("enum"); ok && len(constraining(o, "enum", "type")) == 0 {
		vals, _ = v.([]any)
	} else if len(constraining(o, "type")) == 0 && len(types) > 0 {
		for _, t := range types {
			switch t {
			case "boolean":
				vals = append(vals, true, false)
			case "null":
				vals = append(vals, nil)
			default:
				return nil, false
			}
		}
		return vals, true
	} else {
		return nil, false
	}
	if len(types) > 0 {
		vals = slices.DeleteFunc(slices.Clone(vals), func(v any) bool { return !hasType(v, types) })
	}
	return dedupe(vals), true
}

// hasType reports whether v is of one of the types.
func hasType(v any, types []string) bool {
	for _, t := range types {
		switch x := v.(type) {
		case nil:
			if t == "null" {
				return true
			}
		case bool:
			if t == "boolean" {
				return true
			}
		case json.Number:
			if t == "number" {
				return true
			}
			if r, ok := new(big.Rat).SetString(string(x)); ok && t == "integer" && r.IsInt() {
				return true
			}
		case string:
			if t == "string" {
				return true
			}
		case []any:
			if t == "array" {
				return true
			}
		case *object:
			if t == "object" {
				return true
			}
		}
	}
	return false
}

// dedupe keeps the first of the values equal as JSON schema compares them.
func dedupe(vals []any) []any {
	var out []any
	seen := map[string]bool{}
	for _, v := range vals {
		k := canonical(v)
		if !seen[k] {
			seen[k] = true
			out = append(out, v)
		}
	}
	return out
}

// canonical is a text that two values have alike exactly when JSON
// schema calls them equal: numbers by value, object members in any
// order.
func canonical(v any) string {
	switch x := v.(type) {
	case json.Number:
		if r, ok := new(big.Rat).SetString(string(x)); ok {
			return "n" + r.RatString()
		}
		return "n" + string(x)
	case []any:
		var b strings.Builder
		b.WriteByte('[')
		for _, e := range x {
			b.WriteString(canonical(e))
			b.WriteByte(',')
		}
		b.WriteByte(']')
		return b.String()
	case *object:
		keys := slices.Sorted(slices.Values(x.keys))
		var b strings.Builder
		b.WriteByte('{')
		for _, k := range keys {
			b.WriteString(strconv.Quote(k))
			b.WriteByte(':')
			b.WriteString(canonical(x.vals[k]))
			b.WriteByte(',')
		}
		b.WriteByte('}')
		return b.String()
	}
	return jsonLiteral(v)
}

// plainString reports whether schema s (through references) is a string
// schema with no constraint but lengths, and those lengths (hi -1: none).
func (c *schemaCompiler) plainString(s any) (lo, hi int, ok bool) {
	o, isObj := s.(*object)
	for depth := 0; isObj && depth < maxNesting; depth++ {
		r, isRef := o.get("$ref")
		rs, _ := r.(string)
		if !isRef || len(constraining(o, "$ref")) > 0 || !strings.HasPrefix(rs, "#") {
			break
		}
		t, err := c.resolve(rs[1:])
		if err != nil {
			return 0, 0, false
		}
		o, isObj = t.(*object)
	}
	if !isObj || o.vals["type"] != "string" || len(constraining(o, "type", "minLength", "maxLength")) > 0 {
		return 0, 0, false
	}
	lo, err := count(o, "minLength", "")
	if err != nil {
		return 0, 0, false
	}
	hi, err = count(o, "maxLength", "")
	if err != nil || (hi >= 0 && max(lo, 0) > hi) || lo > MaxRepeat {
		return 0, 0, false
	}
	if hi > MaxRepeat {
		hi = MaxRepeat
	}
	return max(lo, 0), hi, true
}
