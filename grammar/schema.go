package grammar

import (
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"math/big"
	"slices"
	"strconv"
	"strings"
)

// SchemaError says why a JSON schema cannot be compiled: it uses a feature
// this compiler does not support, it is not a valid schema, or no value
// satisfies it. Path is the JSON pointer of the schema at fault ("" for
// the root).
type SchemaError struct {
	Path string
	Msg  string
}

func (e *SchemaError) Error() string {
	if e.Path == "" {
		return "schema: " + e.Msg
	}
	return "schema at " + e.Path + ": " + e.Msg
}

func schemaErr(path, format string, a ...any) error {
	return &SchemaError{Path: path, Msg: fmt.Sprintf(format, a...)}
}

// Builder collects the rules of a grammar made of JSON schemas (each with
// rules of its own, so one grammar can hold several, as tool calls need)
// and other expressions, then compiles it. The zero value is not usable;
// call NewBuilder.
type Builder struct {
	rules   Rules
	schemas int
}

// NewBuilder returns a Builder holding the shared JSON rules.
func NewBuilder() *Builder { return &Builder{rules: jsonRules()} }

// JSONValue matches any JSON value.
func (b *Builder) JSONValue() *Expr { return Ref(ruleValue) }

// JSONObject matches any JSON object.
func (b *Builder) JSONObject() *Expr { return Ref(ruleObject) }

// JSONString matches any JSON string.
func (b *Builder) JSONString() *Expr { return Ref(ruleString) }

// WS matches the whitespace allowed between JSON tokens.
func (b *Builder) WS() *Expr { return Ref(ruleWS) }

// Compile compiles root with the rules collected so far. A failure is a
// *SchemaError: the schemas' rules cannot make a grammar (a $ref cycle
// that matches nothing, for one).
func (b *Builder) Compile(root *Expr) (*Grammar, error) {
	g, err := Compile(root, b.rules)
	if err != nil {
		return nil, schemaErr("", "%v", err)
	}
	return g, nil
}

// JSONSchema compiles a JSON schema to the expression of the JSON texts of
// values valid under it: of all of them where the schema allows, and of a
// subset of them where generating exactly the valid ones would take more
// than a grammar (a pattern is matched whole rather than found inside the
// string, unless the other constraints of the string leave no whole
// match; objects get no properties beyond those named; numbers have at
// most 16 digits before and after the point and no exponent when bounded;
// formats are written in their simplest valid form; items that must be
// unique are written in a form that keeps them apart, unique.go).
// Properties come in the order of "properties", the required ones always.
// Supported: type (one or a list), enum and const (the values the other
// keywords allow), properties, required, additionalProperties,
// patternProperties, propertyNames, minProperties, maxProperties,
// dependentRequired, dependentSchemas (and draft 7's dependencies),
// unevaluatedProperties, unevaluatedItems, contains and minContains,
// if-then-else (as if and then together), not (of types or of required
// names), items,
// prefixItems (and draft 7's items list with additionalItems), minItems,
// maxItems, uniqueItems, minLength and maxLength (counted in characters),
// pattern (ECMA-262, lookaheads included), format (date, time, date-time,
// duration, uuid, email, ipv4, ipv6, hostname, uri and their IRI and
// reference forms; a format JSON schema does not define is an
// annotation), any of pattern, format and the lengths together, minimum,
// maximum, exclusiveMinimum, exclusiveMaximum, multipleOf (exactly, as
// decimals), anyOf and oneOf (oneOf with branches no value can match
// twice; both beside other keywords), allOf (of object schemas, or of
// string and number schemas), $ref to the same document ($defs,
// definitions, any JSON pointer, recursion included; beside other
// keywords too), and the annotations. Anything else that constrains
// values is a *SchemaError, as is a schema no value satisfies, and one
// whose grammar would pass the limits (a pattern whose automaton with the
// lengths counted needs more than 32768 states). docs/structured-output.md
// lists what is written and what is refused, and why.
func (b *Builder) JSONSchema(schema []byte) (*Expr, error) {
	doc, err := decodeOrdered(schema)
	if err != nil {
		return nil, schemaErr("", "not valid JSON: %v", err)
	}
	b.schemas++
	c := &schemaCompiler{b: b, doc: doc, prefix: "s" + strconv.Itoa(b.schemas) + "-", refs: map[string]string{}}
	localRefs(doc)
	return c.schema(doc, "")
}

// JSONSchema compiles schema (see Builder.JSONSchema) into a grammar.
func JSONSchema(schema []byte) (*Grammar, error) {
	b := NewBuilder()
	e, err := b.JSONSchema(schema)
	if err != nil {
		return nil, err
	}
	return b.Compile(e)
}

// JSONObject is the grammar of any JSON object, for response_format
// json_object.
func JSONObject() *Grammar {
	b := NewBuilder()
	g, err := b.Compile(b.JSONObject())
	if err != nil {
		panic(err) // the shared rules always compile
	}
	return g
}

type schemaCompiler struct {
	b      *Builder
	doc    any
	prefix string
	refs   map[string]string // JSON pointer → rule name
	n      int
}

func (c *schemaCompiler) newRule(e *Expr) *Expr {
	name := c.ruleName()
	c.b.rules[name] = e
	return Ref(name)
}

// ruleName is a new name for a rule of this schema.
func (c *schemaCompiler) ruleName() string {
	c.n++
	return c.prefix + strconv.Itoa(c.n)
}

// Keywords by what the compiler does with them.
var (
	// assertionKeywords are those of JSON schema (drafts 4 to 2020-12)
	// that can change a value's validity. Every other keyword (title,
	// description, default, examples, $defs, draft 4's id, OpenAPI's
	// nullable and discriminator, x-…) is an annotation: validators
	// ignore the keywords they do not know.
	assertionKeywords = []string{"type", "enum", "const", "multipleOf", "maximum", "exclusiveMaximum",
		"minimum", "exclusiveMinimum", "maxLength", "minLength", "pattern", "format", "maxItems", "minItems",
		"uniqueItems", "maxContains", "minContains", "contains", "maxProperties", "minProperties", "required",
		"dependentRequired", "dependentSchemas", "dependencies", "properties", "patternProperties",
		"additionalProperties", "propertyNames", "items", "prefixItems", "additionalItems", "unevaluatedItems",
		"unevaluatedProperties", "allOf", "anyOf", "oneOf", "not", "if", "then", "else", "$ref",
		"$dynamicRef", "$recursiveRef"}
	unsupportedKeywords = []string{
		"$dynamicRef", "$recursiveRef", "$dynamicAnchor", "$recursiveAnchor"}
	// typeKeywords imply a type when "type" is absent.
	typeKeywords = map[string]string{
		"properties": "object", "required": "object", "additionalProperties": "object",
		"patternProperties": "object", "propertyNames": "object", "minProperties": "object", "maxProperties": "object",
		"dependentRequired": "object", "dependencies": "object", "unevaluatedProperties": "object", "unevaluatedItems": "array",
		"dependentSchemas": "object", "contains": "array", "minContains": "array", "maxContains": "array",
		"items": "array", "prefixItems": "array", "additionalItems": "array", "minItems": "array", "maxItems": "array",
		"minLength": "string", "maxLength": "string", "pattern": "string", "format": "string",
		"minimum": "number", "maximum": "number", "exclusiveMinimum": "number", "exclusiveMaximum": "number",
		"multipleOf": "number",
	}
)

// constraining reports the keywords of o that constrain values, other
// than those listed in except.
func constraining(o *object, except ...string) []string {
	var out []string
	for _, k := range o.keys {
		if slices.Contains(assertionKeywords, k) && !slices.Contains(except, k) {
			out = append(out, k)
		}
	}
	return out
}

func (c *schemaCompiler) schema(s any, path string) (*Expr, error) {
	switch v := s.(type) {
	case bool:
		if v {
			return c.b.JSONValue(), nil
		}
		return nil, schemaErr(path, "the schema false allows no value")
	case *object:
		return c.objectSchema(v, path)
	}
	return nil, schemaErr(path, "a schema must be an object or a boolean")
}

func (c *schemaCompiler) objectSchema(o *object, path string) (*Expr, error) {
	for _, k := range o.keys {
		if slices.Contains(unsupportedKeywords, k) {
			return nil, schemaErr(path+"/"+k, "%s is not supported", k)
		}
	}
	if u, ok := o.get("uniqueItems"); ok {
		if _, isBool := u.(bool); !isBool {
			return nil, schemaErr(path+"/uniqueItems", "uniqueItems must be a boolean")
		}
	}
	if n, changed, err := c.conditionals(o, path); err != nil {
		return nil, err
	} else if changed {
		return c.objectSchema(n, path)
	}
	if r, ok := o.get("$ref"); ok {
		ref, ok := r.(string)
		if !ok {
			return nil, schemaErr(path+"/$ref", "$ref must be a string")
		}
		if len(constraining(o, "$ref")) == 0 {
			return c.ref(ref, path)
		}
		// Beside other keywords (as in 2019-09 and later, and OpenAPI):
		// all of them apply, as allOf of the reference and the rest.
		branches := []any{&object{keys: []string{"$ref"}, vals: map[string]any{"$ref": ref}}}
		others := &object{vals: map[string]any{}}
		for _, k := range o.keys {
			switch k {
			case "$ref":
			case "allOf":
				list, ok := o.vals[k].([]any)
				if !ok {
					return nil, schemaErr(path+"/allOf", "allOf must be a non-empty array")
				}
				branches = append(branches, list...)
			default:
				others.keys = append(others.keys, k)
				others.vals[k] = o.vals[k]
			}
		}
		merged, err := c.mergeAllOf(others, branches, path)
		if err != nil {
			return nil, err
		}
		return c.objectSchema(merged, path)
	}
	if v, ok := o.get("const"); ok {
		return c.literals([]any{v}, o, "const", path)
	}
	if v, ok := o.get("enum"); ok {
		vals, ok := v.([]any)
		if !ok || len(vals) == 0 {
			return nil, schemaErr(path+"/enum", "enum must be a non-empty array")
		}
		return c.literals(vals, o, "enum", path)
	}
	if v, ok := o.get("allOf"); ok {
		merged, err := c.mergeAllOf(o, v, path)
		if err != nil {
			return nil, err
		}
		return c.objectSchema(merged, path)
	}
	for _, kw := range []string{"anyOf", "oneOf"} {
		v, ok := o.get(kw)
		if !ok {
			continue
		}
		branches, ok := v.([]any)
		if !ok || len(branches) == 0 {
			return nil, schemaErr(path+"/"+kw, "%s must be a non-empty array", kw)
		}
		if kw == "oneOf" {
			if err := c.checkExclusive(branches, path+"/oneOf"); err != nil {
				apart, ok := c.keptApart(o, branches)
				if !ok {
					return nil, err
				}
				branches = apart
			}
		}
		if len(constraining(o, kw, "type")) > 0 {
			return c.distribute(o, kw, branches, path)
		}
		alts := make([]*Expr, len(branches))
		for i, br := range branches {
			e, err := c.schema(br, path+"/"+kw+"/"+strconv.Itoa(i))
			if err != nil {
				return nil, err
			}
			alts[i] = e
		}
		return Alt(alts...), nil
	}
	types, err := typesOf(o, path)
	if err != nil {
		return nil, err
	}
	if len(types) == 0 {
		return c.b.JSONValue(), nil
	}
	alts := make([]*Expr, 0, len(types))
	for _, t := range types {
		e, err := c.typed(o, t, path)
		if err != nil {
			return nil, err
		}
		alts = append(alts, e)
	}
	return Alt(alts...), nil
}

// conditionals rewrites the keywords that apply a schema on a condition,
// or its negation, as parts of allOf that the values written satisfy, so
// that the condition never matters: if and then together (a value that
// satisfies both satisfies if-then-else; else is never needed);
// dependentSchemas' and draft 7's dependencies' schemas always (their
// property present or not); not of types as the other types, and not of
// required names as the first of them never written. Any other not is
// refused. changed reports whether o had any of them.
func (c *schemaCompiler) conditionals(o *object, path string) (n *object, changed bool, err error) {
	var parts []any
	n = &object{vals: map[string]any{}, patterns: o.patterns}
	keep := func(k string, v any) {
		n.keys = append(n.keys, k)
		n.vals[k] = v
	}
	for _, k := range o.keys {
		v := o.vals[k]
		switch k {
		case "if":
			switch v {
			case false: // the condition never holds: else always applies
				if e, ok := o.get("else"); ok {
					parts = append(parts, e)
				}
			case true:
			default:
				parts = append(parts, v)
			}
			if t, ok := o.get("then"); ok && v != false {
				parts = append(parts, t)
			}
			changed = true
		case "then", "else":
			changed = true // without if they mean nothing; with it, see above
		case "dependentSchemas", "dependencies":
			do, ok := v.(*object)
			if !ok {
				return nil, false, schemaErr(path+"/"+k, "%s must be an object", k)
			}
			lists := &object{vals: map[string]any{}}
			for _, name := range do.keys {
				if _, isList := do.vals[name].([]any); isList && k == "dependencies" {
					lists.keys = append(lists.keys, name)
					lists.vals[name] = do.vals[name]
					continue
				}
				parts = append(parts, do.vals[name])
				changed = true
			}
			if len(lists.keys) > 0 {
				keep(k, lists)
			}
		case "not":
			part, err := notPart(v, path+"/not")
			if err != nil {
				return nil, false, err
			}
			parts = append(parts, part)
			changed = true
		case "allOf":
			list, ok := v.([]any)
			if !ok {
				return nil, false, schemaErr(path+"/allOf", "allOf must be a non-empty array")
			}
			parts = append(parts, list...)
		default:
			keep(k, v)
		}
	}
	if !changed {
		return o, false, nil
	}
	if len(parts) > 0 {
		keep("allOf", parts)
	}
	return n, true, nil
}

// allTypes are JSON schema's types; integer is within number.
var allTypes = []string{"null", "boolean", "number", "string", "array", "object"}

// notPart is a schema whose values none satisfy s (a not's schema), as
// far as one is plain to see: the other types, or an object without the
// first of the required names.
func notPart(s any, path string) (any, error) {
	o, ok := s.(*object)
	if s == true || (ok && len(constraining(o)) == 0) {
		return nil, schemaErr(path, "not of a schema that allows every value allows no value")
	}
	if s == false {
		return true, nil
	}
	if !ok {
		return nil, schemaErr(path, "not must be a schema")
	}
	switch other := constraining(o); {
	case len(other) == 1 && other[0] == "type":
		types, err := typesOf(o, path)
		if err != nil {
			return nil, err
		}
		var rest []any
		for _, t := range allTypes {
			// Not integer leaves the numbers that are not integers,
			// which no type names: no numbers are written.
			if !slices.Contains(types, t) && !(t == "number" && slices.Contains(types, "integer")) {
				rest = append(rest, t)
			}
		}
		if len(rest) == 0 {
			return nil, schemaErr(path, "not of every type allows no value")
		}
		return &object{keys: []string{"type"}, vals: map[string]any{"type": rest}}, nil
	case len(other) == 1 && other[0] == "required" || len(other) == 2 && slices.Contains(other, "required") && o.vals["type"] == "object":
		list, _ := o.vals["required"].([]any)
		if len(list) == 0 {
			return nil, schemaErr(path, "not of no required names allows no object")
		}
		name, ok := list[0].(string)
		if !ok {
			return nil, schemaErr(path+"/required", "required must be an array of strings")
		}
		// Values of other types satisfy not too, but an object is what
		// a schema with not required means.
		return &object{keys: []string{"properties"}, vals: map[string]any{
			"properties": &object{keys: []string{name}, vals: map[string]any{name: false}}}}, nil
	}
	return nil, schemaErr(path, "not is supported only of types or of required names")
}

// distribute compiles anyOf or oneOf beside other keywords as the
// alternatives of each branch together with them (allOf of the two): a
// value valid under one of those is valid under the whole. A branch that
// no value satisfies together with the rest is left out, and the schema
// refused only when every branch is (with the first branch's error).
// oneOf's branches, told apart already, stay apart once narrowed.
func (c *schemaCompiler) distribute(o *object, kw string, branches []any, path string) (*Expr, error) {
	rest := &object{vals: map[string]any{}}
	for _, k := range o.keys {
		if k != kw {
			rest.keys = append(rest.keys, k)
			rest.vals[k] = o.vals[k]
		}
	}
	rest.patterns = o.patterns
	var alts []*Expr
	var first error
	for i, br := range branches {
		bp := path + "/" + kw + "/" + strconv.Itoa(i)
		merged, err := c.mergeAllOf(rest, []any{br}, path)
		var e *Expr
		if err == nil {
			e, err = c.objectSchema(merged, bp)
		}
		if err != nil {
			if first == nil {
				first = err
			}
			continue
		}
		alts = append(alts, e)
	}
	if len(alts) == 0 {
		return nil, first
	}
	return Alt(alts...), nil
}

// literals is the expression of the values of an enum or a const that
// the schema's other keywords allow: those of its types, and those that
// the grammar of the rest of the schema matches as they are written (a
// value it cannot tell is left out; the rest is not checked if it has no
// grammar).
func (c *schemaCompiler) literals(vals []any, o *object, kw, path string) (*Expr, error) {
	types, err := typesOf(o, path)
	if err != nil {
		return nil, err
	}
	if _, explicit := o.get("type"); explicit && len(types) > 0 {
		vals = slices.DeleteFunc(slices.Clone(vals), func(v any) bool { return !hasType(v, types) })
	}
	if len(constraining(o, kw, "type", "enum", "const")) > 0 && len(vals) > 0 {
		rest := &object{vals: map[string]any{}}
		for _, k := range o.keys {
			if k != "enum" && k != "const" {
				rest.keys = append(rest.keys, k)
				rest.vals[k] = o.vals[k]
			}
		}
		rest.patterns = o.patterns
		if e, err := c.objectSchema(rest, path); err == nil {
			if g, err := Compile(e, c.b.rules); err == nil {
				vals = slices.DeleteFunc(vals, func(v any) bool { return !g.matches(jsonLiteral(v)) })
			}
		}
	}
	if len(vals) == 0 {
		return nil, schemaErr(path+"/"+kw, "no value of %s satisfies the schema's other keywords", kw)
	}
	alts := make([]*Expr, len(vals))
	for i, x := range vals {
		alts[i] = Lit(jsonLiteral(x))
	}
	return Alt(alts...), nil
}

// typesOf reads "type" (a name or a list), or infers it from the keywords
// that only apply to one type. None means any value.
func typesOf(o *object, path string) ([]string, error) {
	var types []string
	switch t := o.vals["type"].(type) {
	case nil:
		if _, ok := o.get("type"); ok {
			return nil, schemaErr(path+"/type", "type must be a string or an array of strings")
		}
		for _, k := range o.keys {
			if t, ok := typeKeywords[k]; ok && !slices.Contains(types, t) {
				types = append(types, t)
			}
		}
	case string:
		types = []string{t}
	case []any:
		for _, x := range t {
			s, ok := x.(string)
			if !ok {
				return nil, schemaErr(path+"/type", "type must be a string or an array of strings")
			}
			if !slices.Contains(types, s) {
				types = append(types, s)
			}
		}
		if len(types) == 0 {
			return nil, schemaErr(path+"/type", "an empty list of types allows no value")
		}
	default:
		return nil, schemaErr(path+"/type", "type must be a string or an array of strings")
	}
	// integer is a number: a list holding both needs only number.
	if slices.Contains(types, "number") {
		types = slices.DeleteFunc(types, func(s string) bool { return s == "integer" })
	}
	return types, nil
}

func (c *schemaCompiler) typed(o *object, t, path string) (*Expr, error) {
	switch t {
	case "null":
		return Lit("null"), nil
	case "boolean":
		return Alt(Lit("true"), Lit("false")), nil
	case "integer", "number":
		return c.number(o, t == "integer", path)
	case "string":
		return c.str(o, path)
	case "array":
		return c.array(o, path)
	case "object":
		return c.object(o, path)
	}
	return nil, schemaErr(path+"/type", "unknown type %q", t)
}

func (c *schemaCompiler) number(o *object, integer bool, path string) (*Expr, error) {
	var lo, hi bound
	read := func(kw string, b *bound, tighter func(a, b float64) bool) error {
		v, ok := o.get(kw)
		if !ok {
			return nil
		}
		x, ok := numberValue(v)
		if !ok {
			return schemaErr(path+"/"+kw, "%s must be a number", kw)
		}
		if !b.set || tighter(x, b.v) {
			*b = bound{set: true, v: x}
		}
		return nil
	}
	above := func(a, b float64) bool { return a > b }
	below := func(a, b float64) bool { return a < b }
	if err := read("minimum", &lo, above); err != nil {
		return nil, err
	}
	if err := read("maximum", &hi, below); err != nil {
		return nil, err
	}
	for _, ex := range []struct {
		kw     string
		b      *bound
		better func(a, b float64) bool
	}{{"exclusiveMinimum", &lo, above}, {"exclusiveMaximum", &hi, below}} {
		v, ok := o.get(ex.kw)
		if !ok {
			continue
		}
		if flag, isBool := v.(bool); isBool {
			// Draft 4: a flag on minimum or maximum.
			if ex.b.set {
				ex.b.exclusive = flag
			}
			continue
		}
		x, ok := numberValue(v)
		if !ok {
			return nil, schemaErr(path+"/"+ex.kw, "%s must be a number", ex.kw)
		}
		if !ex.b.set || ex.better(x, ex.b.v) || x == ex.b.v {
			*ex.b = bound{set: true, v: x, exclusive: true}
		}
	}
	if v, ok := o.get("multipleOf"); ok {
		m, ok := v.(json.Number)
		r, valid := new(big.Rat).SetString(string(m))
		if !ok || !valid || r.Sign() <= 0 {
			return nil, schemaErr(path+"/multipleOf", "multipleOf must be a number above 0")
		}
		e, err := c.multiples(r, lo, hi, integer)
		if err != nil {
			return nil, schemaErr(path, "%v", err)
		}
		return e, nil
	}
	if !lo.set && !hi.set {
		if integer {
			return Ref(ruleInt), nil
		}
		return Ref(ruleNumber), nil
	}
	var e *Expr
	if integer {
		e = boundedInteger(lo, hi)
	} else {
		e = boundedNumber(lo, hi)
	}
	if e == nil {
		return nil, schemaErr(path, "no %s lies within the bounds (or they exceed ±%g)", map[bool]string{true: "integer", false: "number"}[integer], float64(maxMagnitude))
	}
	return e, nil
}

// count reads a keyword holding a non-negative integer; -1 when absent.
func count(o *object, kw, path string) (int, error) {
	v, ok := o.get(kw)
	if !ok {
		return -1, nil
	}
	x, ok := numberValue(v)
	if !ok || x < 0 || x != math.Trunc(x) {
		return 0, schemaErr(path+"/"+kw, "%s must be a non-negative integer", kw)
	}
	return int(min(x, math.MaxInt32)), nil
}

func (c *schemaCompiler) str(o *object, path string) (*Expr, error) {
	minLen, err := count(o, "minLength", path)
	if err != nil {
		return nil, err
	}
	maxLen, err := count(o, "maxLength", path)
	if err != nil {
		return nil, err
	}
	lengths := minLen >= 0 || maxLen >= 0
	minLen = max(minLen, 0)
	if maxLen >= 0 && minLen > maxLen {
		return nil, schemaErr(path, "minLength %d exceeds maxLength %d", minLen, maxLen)
	}
	if minLen > MaxRepeat {
		return nil, schemaErr(path+"/minLength", "minLength above %d is not supported", MaxRepeat)
	}
	if maxLen > MaxRepeat {
		maxLen = MaxRepeat // shorter strings are valid too
	}
	pattern, hasPattern := o.vals["pattern"].(string)
	if _, ok := o.get("pattern"); ok && !hasPattern {
		return nil, schemaErr(path+"/pattern", "pattern must be a string")
	}
	var patterns []string
	if hasPattern {
		patterns = append(patterns, pattern)
	}
	patterns = append(patterns, o.patterns...)
	hasPattern = len(patterns) > 0
	format, err := formatOf(o, path)
	if err != nil {
		return nil, err
	}
	quoted := func(e *Expr) *Expr { return Seq(Lit(`"`), e, Lit(`"`)) }
	// Lengths that every string of the pattern or the format has anyway
	// need no more.
	within := func(lo, hi int) bool { return lo >= minLen && (maxLen < 0 || (hi >= 0 && hi <= maxLen)) }
	if lengths && len(patterns) == 1 && format == nil {
		if n, err := parseRegex(pattern, ecma, false); err == nil && within(n.lengths()) {
			lengths = false
		}
	}
	if lengths && !hasPattern && format != nil && within(exprRe(format).lengths()) {
		lengths = false
	}
	switch {
	case len(patterns) == 1 && format == nil && !lengths:
		// A pattern read as it always was, when it can be.
		if e, err := patternExpr(pattern); err == nil {
			return quoted(c.newRule(e)), nil
		}
	case !hasPattern && format != nil && !lengths:
		return quoted(format), nil
	case !hasPattern && format == nil:
		if !lengths {
			return Ref(ruleString), nil
		}
		return quoted(Repeat(Ref(ruleChar), minLen, maxLen)), nil
	}
	e, err := c.stringFA(patterns, format, minLen, maxLen, lengths, path)
	if err != nil {
		return nil, err
	}
	return quoted(e), nil
}

// stringFA is the expression of the contents of the strings that match
// the patterns (if any; several from allOf), have the format (if any), and
// have minLen to maxLen characters (if lengths): the intersection of their
// automata. The patterns are matched whole, as where one stands alone,
// unless no such string satisfies the rest (a pattern ^2024- and the
// format date): then they are found inside, as JSON schema reads them.
func (c *schemaCompiler) stringFA(patterns []string, format *Expr, minLen, maxLen int, lengths bool, path string) (*Expr, error) {
	hasPattern := len(patterns) > 0
	lim := &faBuild{}
	fail := func(err error, at string) error {
		if err == errFATooLarge {
			return schemaErr(at, "the strings allowed here make a language too large to write as a grammar (%v)", err)
		}
		return schemaErr(at, "%v", err)
	}
	var formatFA *fa
	if format != nil {
		var err error
		if formatFA, err = treeFA(exprRe(format), lim); err != nil {
			return nil, fail(err, path+"/format")
		}
	}
	// constrain is a with the format and the lengths, or nil if no text
	// is left.
	constrain := func(a *fa) (*fa, error) {
		var err error
		if formatFA != nil {
			if a == nil {
				a = formatFA
			} else if a, err = intersect(a, formatFA, lim); err != nil || a.empty() {
				return nil, err
			}
		}
		if lengths {
			hi := -1
			if maxLen >= 0 {
				hi = maxLen
			}
			if a, err = a.withLength(minLen, hi, lim); err != nil || a.empty() {
				return nil, err
			}
		}
		return a, nil
	}
	var a *fa
	if hasPattern {
		for _, search := range []bool{false, true} {
			var p *fa
			for _, pattern := range patterns {
				q, err := patternFA(pattern, search, lim)
				if err != nil {
					return nil, fail(err, path+"/pattern")
				}
				if !search && q.empty() {
					return nil, schemaErr(path+"/pattern", "the pattern %q matches no string", pattern)
				}
				if p == nil {
					p = q
				} else if p, err = intersect(p, q, lim); err != nil {
					return nil, fail(err, path)
				}
			}
			var err error
			if p.empty() {
				continue
			}
			if a, err = constrain(p); err != nil {
				return nil, fail(err, path)
			}
			if a != nil {
				break
			}
		}
	} else {
		var err error
		if a, err = constrain(nil); err != nil {
			return nil, fail(err, path)
		}
	}
	if a == nil {
		var what []string
		for _, w := range []struct {
			has  bool
			name string
		}{{hasPattern, "the patterns"}, {format != nil, "the format"}, {lengths, "minLength and maxLength"}} {
			if w.has {
				what = append(what, w.name)
			}
		}
		return nil, schemaErr(path, "no string satisfies %s together", strings.Join(what, " and "))
	}
	return a.expr(c.b.rules, c.ruleName, jsonCharExpr), nil
}

// assertedFormats are the formats JSON schema defines, and those other
// validators know (period, semver): where formats are asserted, a value
// must have one to be valid, so such a format that the compiler cannot
// write is refused. Any other format is an annotation, as the
// specification says of unknown formats (Pydantic's password, binary
// and ipvanyaddress, OpenAPI's int64 and float).
var assertedFormats = []string{"date-time", "date", "time", "duration", "email", "idn-email", "hostname",
	"idn-hostname", "ipv4", "ipv6", "uri", "uri-reference", "iri", "iri-reference", "uuid", "uri-template",
	"json-pointer", "relative-json-pointer", "regex", "period", "semver"}

// formatOf is the expression of the format of o's strings, or nil for
// none (or a format that asserts nothing).
func formatOf(o *object, path string) (*Expr, error) {
	f, ok := o.get("format")
	if !ok {
		return nil, nil
	}
	fs, ok := f.(string)
	if !ok {
		return nil, schemaErr(path+"/format", "format must be a string")
	}
	if e, ok := formats()[fs]; ok {
		return e, nil
	}
	if !slices.Contains(assertedFormats, fs) {
		return nil, nil
	}
	names := slices.Sorted(maps.Keys(formats()))
	return nil, schemaErr(path+"/format", "format %q is not supported (%s are)", fs, strings.Join(names, ", "))
}

// formats are the string formats written, each in a simple valid form:
// days up to the 28th, so that every date exists; IPv6 addresses in
// full, eight groups; URIs as http, https or ftp URLs of a host name, a
// path, a query and a fragment of unreserved characters (which are also
// IRIs and references of both). Every form is ASCII, and of a bounded
// length.
func formats() map[string]*Expr {
	d := Byte(Range('0', '9'))
	two := func(lo, hi string) *Expr { return sameLength(lo, hi) }
	date := Seq(Repeat(d, 4, 4), Lit("-"), two("01", "12"), Lit("-"), two("01", "28"))
	time := Seq(two("00", "23"), Lit(":"), two("00", "59"), Lit(":"), two("00", "59"),
		Opt(Seq(Lit("."), Repeat(d, 1, 6))), Alt(Lit("Z"), Seq(Byte(bytesOf("+-")), two("00", "23"), Lit(":"), two("00", "59"))))
	hex := Byte(hexDigits())
	alnum := Byte(Range('a', 'z'))
	alnum.set.AddRange('0', '9')
	alnum.set.AddRange('A', 'Z')
	label := Repeat(alnum, 1, 16)
	atomChars := alnum.set
	atomChars.AddRange('_', '_')
	atomChars.AddRange('+', '+')
	atomChars.AddRange('-', '-')
	// Four atoms of up to 12 keep an email's local part within 64 bytes.
	atom := Repeat(Byte(atomChars), 1, 12)
	octet := intRange(0, 255)
	email := Seq(atom, Repeat(Seq(Lit("."), atom), 0, 3), Lit("@"), label, Repeat(Seq(Lit("."), label), 1, 3))
	hostname := Seq(label, Repeat(Seq(Lit("."), label), 0, 3))
	// A duration: weeks, or years, months and days and a time of hours,
	// minutes and seconds, each part optional but not all.
	n := Repeat(d, 1, 4)
	unit := func(u string) *Expr { return Seq(n, Lit(u)) }
	someOf := func(a, b, c *Expr) *Expr {
		return Alt(Seq(a, Opt(b), Opt(c)), Seq(b, Opt(c)), c)
	}
	timePart := Seq(Lit("T"), someOf(unit("H"), unit("M"), unit("S")))
	duration := Seq(Lit("P"), Alt(unit("W"), Seq(someOf(unit("Y"), unit("M"), unit("D")), Opt(timePart)), timePart))
	group := Repeat(hex, 1, 4)
	ipv6 := Seq(group, Repeat(Seq(Lit(":"), group), 7, 7))
	unreserved := Range('a', 'z')
	unreserved.AddRange('A', 'Z')
	unreserved.AddRange('0', '9')
	for _, c := range []byte("-._~") {
		unreserved.AddRange(c, c)
	}
	word := Repeat(Byte(unreserved), 1, 16)
	uri := Seq(Alt(Lit("http"), Lit("https"), Lit("ftp")), Lit("://"), hostname,
		Repeat(Seq(Lit("/"), Repeat(Byte(unreserved), 0, 16)), 0, 6),
		Opt(Seq(Lit("?"), word, Lit("="), word, Repeat(Seq(Lit("&"), word, Lit("="), word), 0, 3))),
		Opt(Seq(Lit("#"), word)))
	return map[string]*Expr{
		"date":          date,
		"time":          time,
		"date-time":     Seq(date, Lit("T"), time),
		"duration":      duration,
		"uuid":          Seq(Repeat(hex, 8, 8), Lit("-"), Repeat(hex, 4, 4), Lit("-"), Repeat(hex, 4, 4), Lit("-"), Repeat(hex, 4, 4), Lit("-"), Repeat(hex, 12, 12)),
		"email":         email,
		"idn-email":     email,
		"ipv4":          Seq(octet, Lit("."), octet, Lit("."), octet, Lit("."), octet),
		"ipv6":          ipv6,
		"hostname":      hostname,
		"idn-hostname":  hostname,
		"uri":           uri,
		"uri-reference": uri,
		"iri":           uri,
		"iri-reference": uri,
	}
}

func (c *schemaCompiler) array(o *object, path string) (*Expr, error) {
	minItems, err := count(o, "minItems", path)
	if err != nil {
		return nil, err
	}
	maxItems, err := count(o, "maxItems", path)
	if err != nil {
		return nil, err
	}
	minItems = max(minItems, 0)
	if maxItems >= 0 && minItems > maxItems {
		return nil, schemaErr(path, "minItems %d exceeds maxItems %d", minItems, maxItems)
	}
	// Positional schemas (prefixItems, or draft 7's items list), then the
	// schema of the rest (items, or draft 7's additionalItems); nil rest:
	// no more items.
	var prefix []any
	var rest any = true
	restPath := path + "/items"
	if p, ok := o.get("prefixItems"); ok {
		if prefix, ok = p.([]any); !ok {
			return nil, schemaErr(path+"/prefixItems", "prefixItems must be an array")
		}
		if it, ok := o.get("items"); ok {
			rest = it
		} else if u, ok := o.get("unevaluatedItems"); ok {
			rest, restPath = u, path+"/unevaluatedItems"
		}
	} else if it, ok := o.get("items"); ok {
		if list, isList := it.([]any); isList {
			prefix = list
			rest, restPath = true, path+"/additionalItems"
			if ai, ok := o.get("additionalItems"); ok {
				rest = ai
			} else if u, ok := o.get("unevaluatedItems"); ok {
				rest, restPath = u, path+"/unevaluatedItems"
			}
		} else {
			rest = it
		}
	} else if u, ok := o.get("unevaluatedItems"); ok {
		// With no items keyword, no item is evaluated but by this one.
		rest, restPath = u, path+"/unevaluatedItems"
	}
	if ct, ok := o.get("contains"); ok {
		if o.vals["uniqueItems"] == true {
			return nil, schemaErr(path+"/contains", "contains with uniqueItems is not supported")
		}
		if prefix, minItems, err = containsItems(o, ct, prefix, rest, minItems, maxItems, path); err != nil {
			return nil, err
		}
	}
	// Items that must differ, more than one of them: unique.go.
	most := maxItems
	if rest == false && (most < 0 || most > len(prefix)) {
		most = len(prefix)
	}
	if o.vals["uniqueItems"] == true && (most < 0 || most > 1) {
		if len(prefix) > 0 {
			return nil, schemaErr(path+"/uniqueItems", "uniqueItems with prefixItems is not supported")
		}
		if minItems > MaxRepeat {
			return nil, schemaErr(path+"/minItems", "minItems above %d is not supported", MaxRepeat)
		}
		if maxItems > MaxRepeat {
			maxItems = MaxRepeat
		}
		return c.uniqueArray(rest, restPath, minItems, maxItems, path)
	}
	var restExpr *Expr
	if rest != false {
		e, err := c.schema(rest, restPath)
		if err != nil {
			return nil, err
		}
		restExpr = c.newRule(e)
	}
	n := len(prefix)
	if restExpr == nil {
		if minItems > n {
			return nil, schemaErr(path, "minItems %d needs more items than the %d allowed", minItems, n)
		}
		if maxItems < 0 || maxItems > n {
			maxItems = n
		}
	}
	if minItems > MaxRepeat {
		return nil, schemaErr(path+"/minItems", "minItems above %d is not supported", MaxRepeat)
	}
	if maxItems > MaxRepeat {
		maxItems = MaxRepeat
	}
	limit := n
	if maxItems >= 0 {
		limit = min(n, maxItems)
	}
	items := make([]*Expr, limit)
	for i := range items {
		e, err := c.schema(prefix[i], path+"/prefixItems/"+strconv.Itoa(i))
		if err != nil {
			return nil, err
		}
		items[i] = e
	}
	sep := Seq(Ref(ruleWS), Lit(","), Ref(ruleWS))
	// tail(i) is the items from index i on, each after a separator
	// (index 0 has none).
	var tail func(i int) *Expr
	tail = func(i int) *Expr {
		lead := Empty()
		if i > 0 {
			lead = sep
		}
		if maxItems >= 0 && i >= maxItems {
			return Empty()
		}
		if i >= len(items) {
			if restExpr == nil {
				return Empty()
			}
			lo := max(minItems-i, 0)
			hi := -1
			if maxItems >= 0 {
				hi = maxItems - i
			}
			if i == 0 {
				first := Seq(restExpr, Repeat(Seq(sep, restExpr), max(lo-1, 0), dec(hi)))
				if lo == 0 {
					return Opt(first)
				}
				return first
			}
			return Repeat(Seq(sep, restExpr), lo, hi)
		}
		e := Seq(lead, items[i], tail(i+1))
		if i >= minItems {
			return Opt(e)
		}
		return e
	}
	return Seq(Lit("["), Ref(ruleWS), tail(0), Ref(ruleWS), Lit("]")), nil
}

// containsItems meets contains (with minContains, 1 by default) by its
// first items: each of the first minContains positional schemas (or the
// schema of the rest) with contains beside it (allOf), and at least that
// many items. maxContains is refused unless no array of maxItems can pass
// it, as the items after would have to fail contains.
func containsItems(o *object, ct any, prefix []any, rest any, minItems, maxItems int, path string) ([]any, int, error) {
	k := 1
	if v, ok := o.get("minContains"); ok {
		x, ok := numberValue(v)
		if !ok || x < 0 || x != math.Trunc(x) || x > MaxRepeat {
			return nil, 0, schemaErr(path+"/minContains", "minContains must be a non-negative integer of at most %d", MaxRepeat)
		}
		k = int(x)
	}
	if v, ok := o.get("maxContains"); ok {
		x, ok := numberValue(v)
		if !ok || x < 0 {
			return nil, 0, schemaErr(path+"/maxContains", "maxContains must be a non-negative integer")
		}
		if maxItems < 0 || x < float64(maxItems) {
			return nil, 0, schemaErr(path+"/maxContains", "maxContains is supported only where maxItems is no more than it")
		}
	}
	if k == 0 {
		return prefix, minItems, nil
	}
	out := slices.Clone(prefix)
	for i := range k {
		base := rest
		if i < len(prefix) {
			base = prefix[i]
		} else if rest == false {
			return nil, 0, schemaErr(path, "contains needs %d items, more than the %d allowed", k, len(prefix))
		}
		var both any = &object{keys: []string{"allOf"}, vals: map[string]any{"allOf": []any{base, ct}}}
		switch {
		case base == true:
			both = ct
		case trivial(ct):
			both = base
		}
		if i < len(out) {
			out[i] = both
		} else {
			out = append(out, both)
		}
	}
	return out, max(minItems, k), nil
}

// dec is n-1, keeping -1 (unbounded) as it is.
func dec(n int) int {
	if n < 0 {
		return -1
	}
	return n - 1
}

func (c *schemaCompiler) object(o *object, path string) (*Expr, error) {
	props, _ := o.vals["properties"].(*object)
	if _, ok := o.get("properties"); ok && props == nil {
		return nil, schemaErr(path+"/properties", "properties must be an object")
	}
	if props == nil {
		props = &object{vals: map[string]any{}}
	}
	var required []string
	if v, ok := o.get("required"); ok {
		list, ok := v.([]any)
		if !ok {
			return nil, schemaErr(path+"/required", "required must be an array of strings")
		}
		for _, x := range list {
			s, ok := x.(string)
			if !ok {
				return nil, schemaErr(path+"/required", "required must be an array of strings")
			}
			if !slices.Contains(required, s) {
				required = append(required, s)
			}
		}
	}
	addl, hasAddl := o.get("additionalProperties")
	if !hasAddl {
		addl = true
		// The properties named here and in the parts merged into this
		// schema are evaluated; the others only by this.
		if u, ok := o.get("unevaluatedProperties"); ok {
			addl = u
		}
	}
	minProps, err := count(o, "minProperties", path)
	if err != nil {
		return nil, err
	}
	maxProps, err := count(o, "maxProperties", path)
	if err != nil {
		return nil, err
	}
	keys, err := c.objectKeys(o, path)
	if err != nil {
		return nil, err
	}
	// Required properties in the order of properties, then those only
	// named in required; then the optional ones. A named property the
	// keys' rules refuse is left out, or makes the schema unsatisfiable
	// if required.
	var req, opt []string
	for _, k := range props.keys {
		if err := keys.check(k, path); err != nil {
			return nil, err
		}
		switch {
		case !keys.allows(k):
			if slices.Contains(required, k) {
				return nil, schemaErr(path+"/propertyNames", "the required property %q is not a valid property name", k)
			}
		case slices.Contains(required, k):
			req = append(req, k)
		case props.vals[k] != false:
			opt = append(opt, k)
		}
	}
	// The schema of a property only named in required: that of the one
	// pattern it matches, else additionalProperties.
	otherSchema := func(k string) (any, string, error) {
		var found []int
		for i, pp := range keys.patterns {
			if pp.search.matches(k) {
				found = append(found, i)
			}
		}
		switch len(found) {
		case 0:
			return addl, path + "/additionalProperties", nil
		case 1:
			pp := keys.patterns[found[0]]
			return pp.schema, pp.path, nil
		}
		return nil, "", schemaErr(path+"/patternProperties", "the required property %q matches several of patternProperties, which is not supported", k)
	}
	for _, k := range required {
		if _, ok := props.get(k); !ok {
			if !keys.allows(k) {
				return nil, schemaErr(path+"/propertyNames", "the required property %q is not a valid property name", k)
			}
			if ps, _, err := otherSchema(k); err != nil {
				return nil, err
			} else if ps == false {
				return nil, schemaErr(path+"/required", "%q is required but additionalProperties is false and properties does not name it", k)
			}
			req = append(req, k)
		}
	}
	if req, opt, err = dependencies(o, props, addl, keys, req, opt, path); err != nil {
		return nil, err
	}
	if maxProps >= 0 && len(req) > maxProps {
		return nil, schemaErr(path, "%d properties are required but maxProperties is %d", len(req), maxProps)
	}
	member := func(k string) (*Expr, error) {
		ps, ok := props.get(k)
		p := path + "/properties/" + escapePointer(k)
		if !ok {
			var err error
			if ps, p, err = otherSchema(k); err != nil {
				return nil, err
			}
		}
		v, err := c.schema(ps, p)
		if err != nil {
			return nil, err
		}
		return Seq(Lit(quoteJSON(k)), Ref(ruleWS), Lit(":"), Ref(ruleWS), v), nil
	}
	sep := Seq(Ref(ruleWS), Lit(","), Ref(ruleWS))
	var body []*Expr
	for i, k := range req {
		m, err := member(k)
		if err != nil {
			return nil, err
		}
		if i > 0 {
			body = append(body, sep)
		}
		body = append(body, m)
	}
	wrap := func(body ...*Expr) *Expr {
		return Seq(Lit("{"), Ref(ruleWS), Seq(body...), Ref(ruleWS), Lit("}"))
	}
	// minProperties and maxProperties count the members besides the
	// required ones.
	moreMin, moreMax := max(minProps-len(req), 0), -1
	if maxProps >= 0 {
		moreMax = maxProps - len(req)
	}
	// An object with no properties named takes any members of the
	// additionalProperties schema, or of patternProperties (a map); with
	// properties named, the output keeps to them, which is valid whatever
	// additionalProperties says.
	if len(props.keys) == 0 {
		more, err := c.mapMembers(keys, addl, req, moreMin, moreMax, len(req) > 0, path)
		if err != nil {
			return nil, err
		}
		return wrap(append(body, more)...), nil
	}
	if moreMin > len(opt) {
		return nil, schemaErr(path, "minProperties %d needs more properties than are named", minProps)
	}
	if moreMin > 0 || (moreMax >= 0 && moreMax < len(opt)) {
		// Counted: the optional properties in order, each at most once.
		items := make([]*Expr, len(opt))
		for i, k := range opt {
			m, err := member(k)
			if err != nil {
				return nil, err
			}
			items[i] = c.newRule(m)
		}
		e, err := c.inOrder(items, moreMin, moreMax, sep, len(req) == 0, path)
		if err != nil {
			return nil, err
		}
		return wrap(append(body, e)...), nil
	}
	// Optional properties in order, any subset: rest(i) ::= sep m_i
	// rest(i+1) | rest(i+1); with nothing required, the first present one
	// has no separator: first(i) ::= m_i rest(i+1) | first(i+1).
	rest := make([]*Expr, len(opt)+1)
	first := make([]*Expr, len(opt)+1)
	rest[len(opt)], first[len(opt)] = Empty(), Empty()
	for i := len(opt) - 1; i >= 0; i-- {
		m, err := member(opt[i])
		if err != nil {
			return nil, err
		}
		m = c.newRule(m)
		rest[i] = c.newRule(Alt(Seq(sep, m, rest[i+1]), rest[i+1]))
		first[i] = c.newRule(Alt(Seq(m, rest[i+1]), first[i+1]))
	}
	if len(req) > 0 {
		body = append(body, rest[0])
	} else {
		body = append(body, first[0])
	}
	return wrap(body...), nil
}

// dependencies applies dependentRequired (and draft 7's dependencies
// with lists): a property present requires others. Those of a required
// property become required; those of an optional one too (written
// always, they are there whenever it is), unless one of them cannot be
// written: then the optional property is left out.
func dependencies(o *object, props *object, addl any, keys *keyRules, req, opt []string, path string) ([]string, []string, error) {
	deps := map[string][]string{}
	for _, kw := range []string{"dependentRequired", "dependencies"} {
		v, ok := o.get(kw)
		if !ok {
			continue
		}
		do, ok := v.(*object)
		if !ok {
			return nil, nil, schemaErr(path+"/"+kw, "%s must be an object", kw)
		}
		for _, k := range do.keys {
			list, ok := do.vals[k].([]any)
			if !ok {
				return nil, nil, schemaErr(path+"/"+kw+"/"+escapePointer(k), "%s with a schema is not supported (a list of names is)", kw)
			}
			for _, x := range list {
				name, ok := x.(string)
				if !ok {
					return nil, nil, schemaErr(path+"/"+kw+"/"+escapePointer(k), "%s must list names", kw)
				}
				deps[k] = append(deps[k], name)
			}
		}
	}
	if len(deps) == 0 {
		return req, opt, nil
	}
	writable := func(k string) bool {
		if !keys.allows(k) {
			return false
		}
		if ps, ok := props.get(k); ok {
			return ps != false
		}
		return addl != false && len(props.keys) == 0
	}
	for changed := true; changed; {
		changed = false
		for _, k := range append(slices.Clone(req), opt...) {
			isReq := slices.Contains(req, k)
			for _, d := range deps[k] {
				if slices.Contains(req, d) {
					continue
				}
				if !writable(d) {
					if isReq {
						return nil, nil, schemaErr(path, "%q is required and requires %q, which cannot be written", k, d)
					}
					opt = slices.DeleteFunc(opt, func(x string) bool { return x == k })
					changed = true
					break
				}
				req = append(req, d)
				opt = slices.DeleteFunc(opt, func(x string) bool { return x == d })
				changed = true
			}
		}
	}
	return req, opt, nil
}

// escapePointer escapes a key for a JSON pointer.
func escapePointer(k string) string {
	return strings.ReplaceAll(strings.ReplaceAll(k, "~", "~0"), "/", "~1")
}

// localRefs rewrites the references of a document that point into it by
// other means than a JSON pointer as JSON pointers: those by the
// document's own $id (absolute, or its last path segment), and those by
// an anchor ($anchor, or draft 6 and 7's "$id": "#name"). The $id of a
// schema inside the document is not a new base: references are read
// against the document's.
func localRefs(doc any) {
	root, _ := doc.(*object)
	if root == nil {
		return
	}
	base, _ := root.vals["$id"].(string)
	if base == "" {
		base, _ = root.vals["id"].(string) // draft 4
	}
	base = strings.TrimSuffix(base, "#")
	anchors := map[string]string{}
	var refs []*object
	var walk func(v any, ptr string, depth int)
	walk = func(v any, ptr string, depth int) {
		if depth > maxNesting {
			return
		}
		switch x := v.(type) {
		case *object:
			if a, ok := x.vals["$anchor"].(string); ok {
				anchors[a] = ptr
			}
			if id, ok := x.vals["$id"].(string); ok && strings.HasPrefix(id, "#") && ptr != "" {
				anchors[id[1:]] = ptr
			}
			if _, ok := x.vals["$ref"].(string); ok {
				refs = append(refs, x)
			}
			for _, k := range x.keys {
				walk(x.vals[k], ptr+"/"+escapePointer(k), depth+1)
			}
		case []any:
			for i, e := range x {
				walk(e, ptr+"/"+strconv.Itoa(i), depth+1)
			}
		}
	}
	walk(doc, "", 0)
	for _, o := range refs {
		ref := o.vals["$ref"].(string)
		uri, frag, _ := strings.Cut(ref, "#")
		if uri != "" && base != "" && (uri == base || strings.HasSuffix(base, "/"+uri)) {
			uri = ""
		}
		if uri != "" {
			continue
		}
		if ptr, ok := anchors[frag]; ok && frag != "" && !strings.HasPrefix(frag, "/") {
			frag = ptr
		}
		o.vals["$ref"] = "#" + frag
	}
}

// ref compiles a reference to a schema of the same document into a rule
// of its own, once, so that recursive schemas make recursive rules.
func (c *schemaCompiler) ref(ref, path string) (*Expr, error) {
	if !strings.HasPrefix(ref, "#") {
		return nil, schemaErr(path+"/$ref", "only references within the schema (#...) are supported, not %q", ref)
	}
	ptr := ref[1:]
	if name, ok := c.refs[ptr]; ok {
		return Ref(name), nil
	}
	target, err := c.resolve(ptr)
	if err != nil {
		return nil, schemaErr(path+"/$ref", "%v", err)
	}
	c.n++
	name := c.prefix + "ref" + strconv.Itoa(c.n)
	c.refs[ptr] = name
	c.b.rules[name] = Empty() // defined below; the name must exist for recursion
	e, err := c.schema(target, ptr)
	if err != nil {
		return nil, err
	}
	c.b.rules[name] = e
	return Ref(name), nil
}

// resolve follows a JSON pointer ("" is the whole document).
func (c *schemaCompiler) resolve(ptr string) (any, error) {
	v := c.doc
	if ptr == "" {
		return v, nil
	}
	if !strings.HasPrefix(ptr, "/") {
		return nil, fmt.Errorf("the reference #%s is not a JSON pointer", ptr)
	}
	for _, part := range strings.Split(ptr[1:], "/") {
		part = strings.ReplaceAll(strings.ReplaceAll(part, "~1", "/"), "~0", "~")
		switch x := v.(type) {
		case *object:
			next, ok := x.get(part)
			if !ok {
				return nil, fmt.Errorf("the reference #%s names nothing", ptr)
			}
			v = next
		case []any:
			i, err := strconv.Atoi(part)
			if err != nil || i < 0 || i >= len(x) {
				return nil, fmt.Errorf("the reference #%s names nothing", ptr)
			}
			v = x[i]
		default:
			return nil, fmt.Errorf("the reference #%s names nothing", ptr)
		}
	}
	return v, nil
}

// mergeAllOf turns a schema with allOf into one without: a single branch
// with nothing else beside it is that branch; several branches (and the
// schema's own keywords) that all describe objects merge their
// properties, required lists and additionalProperties.
func (c *schemaCompiler) mergeAllOf(o *object, v any, path string) (*object, error) {
	branches, ok := v.([]any)
	if !ok || len(branches) == 0 {
		return nil, schemaErr(path+"/allOf", "allOf must be a non-empty array")
	}
	rest := &object{vals: map[string]any{}}
	for _, k := range o.keys {
		if k != "allOf" {
			rest.keys = append(rest.keys, k)
			rest.vals[k] = o.vals[k]
		}
	}
	if len(branches) == 1 && len(constraining(rest)) == 0 {
		if b, ok := branches[0].(*object); ok {
			return b, nil
		}
		return nil, schemaErr(path+"/allOf/0", "allOf of a boolean schema is not supported")
	}
	// The parts, their references followed, and the parts of their own
	// allOf (and $ref beside other keywords) made parts too.
	queue := append([]any{rest}, branches...)
	queuePaths := []string{path}
	for i := range branches {
		queuePaths = append(queuePaths, path+"/allOf/"+strconv.Itoa(i))
	}
	var parts []any
	var paths []string
	objects := false
	for n := 0; n < len(queue); n++ {
		p, bp := queue[n], queuePaths[n]
		if len(queue) > maxNesting*16 {
			return nil, schemaErr(bp, "allOf nested too deep")
		}
		for depth := 0; ; depth++ {
			po, ok := p.(*object)
			if !ok {
				if p == true {
					break
				}
				return nil, schemaErr(bp, "allOf of schemas that are not objects is not supported")
			}
			r, isRef := po.get("$ref")
			rs, _ := r.(string)
			if !isRef || !strings.HasPrefix(rs, "#") || depth > maxNesting {
				break
			}
			if other := constraining(po, "$ref"); len(other) > 0 {
				// The reference and the rest, each a part.
				others := &object{vals: map[string]any{}, patterns: po.patterns}
				for _, k := range po.keys {
					if k != "$ref" {
						others.keys = append(others.keys, k)
						others.vals[k] = po.vals[k]
					}
				}
				queue = append(queue, others)
				queuePaths = append(queuePaths, bp)
			}
			target, err := c.resolve(rs[1:])
			if err != nil {
				return nil, schemaErr(bp+"/$ref", "%v", err)
			}
			p = target
		}
		po, ok := p.(*object)
		if !ok {
			continue // true: no constraint
		}
		if inner, ok := po.vals["allOf"].([]any); ok {
			for k, x := range inner {
				queue = append(queue, x)
				queuePaths = append(queuePaths, bp+"/allOf/"+strconv.Itoa(k))
			}
			stripped := &object{vals: map[string]any{}, patterns: po.patterns}
			for _, k := range po.keys {
				if k != "allOf" {
					stripped.keys = append(stripped.keys, k)
					stripped.vals[k] = po.vals[k]
				}
			}
			po = stripped
		}
		parts, paths = append(parts, po), append(paths, bp)
		for _, k := range constraining(po) {
			if typeKeywords[k] == "object" || (k == "type" && po.vals[k] == "object") {
				objects = true
			}
		}
	}
	if !objects {
		return mergeScalars(parts, paths)
	}
	merged := &object{vals: map[string]any{"type": "object"}, keys: []string{"type"}}
	props := &object{vals: map[string]any{}}
	var required []any
	// closed are the property names of the parts that allow no others
	// (additionalProperties false: it sees only its own part's
	// properties, so the others' must be left out).
	var closed [][]string
	for i, p := range parts {
		bp := paths[i]
		po := p.(*object)
		var own []string
		if pp, ok := po.vals["properties"].(*object); ok {
			own = pp.keys
		}
		for _, k := range constraining(po) {
			switch k {
			case "type":
				if ts, _ := typesOf(po, bp); !slices.Contains(ts, "object") {
					return nil, schemaErr(bp+"/type", "allOf of schemas that are not all objects is not supported")
				}
			case "properties":
				pp, ok := po.vals[k].(*object)
				if !ok {
					return nil, schemaErr(bp+"/properties", "properties must be an object")
				}
				for _, name := range pp.keys {
					if old, dup := props.vals[name]; dup {
						// Both schemas apply.
						switch {
						case old == false || pp.vals[name] == false:
							props.vals[name] = false
						case trivial(old):
							props.vals[name] = pp.vals[name]
						case !trivial(pp.vals[name]):
							props.vals[name] = &object{keys: []string{"allOf"}, vals: map[string]any{"allOf": []any{old, pp.vals[name]}}}
						}
						continue
					}
					props.keys = append(props.keys, name)
					props.vals[name] = pp.vals[name]
				}
			case "required":
				list, ok := po.vals[k].([]any)
				if !ok {
					return nil, schemaErr(bp+"/required", "required must be an array of strings")
				}
				required = append(required, list...)
			case "additionalProperties":
				switch a := po.vals[k]; {
				case a == false:
					closed = append(closed, own)
				case !trivial(a):
					return nil, schemaErr(bp+"/additionalProperties", "additionalProperties with a schema inside allOf is not supported")
				}
			case "unevaluatedProperties":
				// Beside allOf it sees the properties of every part; in
				// a part, those of that part alone.
				switch a := po.vals[k]; {
				case i == 0:
					merged.keys = append(merged.keys, k)
					merged.vals[k] = a
				case a == false:
					closed = append(closed, own)
				case !trivial(a):
					return nil, schemaErr(bp+"/unevaluatedProperties", "unevaluatedProperties with a schema inside allOf is not supported")
				}
			default:
				return nil, schemaErr(bp+"/"+k, "%s inside allOf is not supported", k)
			}
		}
	}
	if len(closed) > 0 {
		allowed := func(name string) bool {
			for _, own := range closed {
				if !slices.Contains(own, name) {
					return false
				}
			}
			return true
		}
		for _, r := range required {
			if name, ok := r.(string); ok && !allowed(name) {
				return nil, schemaErr(path, "%q is required, but a branch of allOf with additionalProperties false does not name it", name)
			}
		}
		props.keys = slices.DeleteFunc(props.keys, func(name string) bool { return !allowed(name) })
		merged.keys = append(merged.keys, "additionalProperties")
		merged.vals["additionalProperties"] = false
	}
	merged.keys = append(merged.keys, "properties", "required")
	merged.vals["properties"], merged.vals["required"] = props, required
	return merged, nil
}

// mergeScalars merges the parts of an allOf that describe no objects
// into one schema: the types they share, the tighter of their bounds, all
// their patterns, their one format, enum or const.
func mergeScalars(parts []any, paths []string) (*object, error) {
	merged := &object{vals: map[string]any{}}
	set := func(k string, v any) {
		if _, ok := merged.vals[k]; !ok {
			merged.keys = append(merged.keys, k)
		}
		merged.vals[k] = v
	}
	var types []string
	typed := false
	for i, p := range parts {
		po := p.(*object)
		bp := paths[i]
		for _, k := range constraining(po) {
			v := po.vals[k]
			old, had := merged.vals[k]
			switch k {
			case "type":
				ts, err := typesOf(&object{keys: []string{"type"}, vals: map[string]any{"type": v}}, bp)
				if err != nil {
					return nil, err
				}
				if !typed {
					types, typed = ts, true
					continue
				}
				// integer within number is integer.
				var both []string
				for _, t := range types {
					if slices.Contains(ts, t) || (t == "integer" && slices.Contains(ts, "number")) {
						both = append(both, t)
					} else if t == "number" && slices.Contains(ts, "integer") {
						both = append(both, "integer")
					}
				}
				types = both
			case "pattern":
				ps, ok := v.(string)
				if !ok {
					return nil, schemaErr(bp+"/pattern", "pattern must be a string")
				}
				if !had {
					set(k, ps)
				} else if ps != old {
					merged.patterns = append(merged.patterns, ps)
				}
			case "minLength", "minimum", "exclusiveMinimum", "maxLength", "maximum", "exclusiveMaximum":
				x, ok := numberValue(v)
				if !ok {
					return nil, schemaErr(bp+"/"+k, "%s must be a number", k)
				}
				if had {
					y, _ := numberValue(old)
					if (strings.HasPrefix(k, "max") || k == "exclusiveMaximum") == (y < x) {
						continue // the one set is tighter
					}
				}
				set(k, v)
			case "format", "enum", "const", "multipleOf":
				if had && canonical(old) != canonical(v) {
					return nil, schemaErr(bp+"/"+k, "allOf with two different %s is not supported", k)
				}
				set(k, v)
			default:
				return nil, schemaErr(bp+"/"+k, "%s inside allOf is not supported", k)
			}
		}
	}
	if typed {
		if len(types) == 0 {
			return nil, schemaErr(paths[0], "the branches of allOf share no type: no value satisfies them all")
		}
		list := make([]any, len(types))
		for i, t := range types {
			list[i] = t
		}
		set("type", list)
	}
	return merged, nil
}

// JSON types as bits, for telling whether oneOf's branches overlap;
// integer counts as number.
const (
	tNull = 1 << iota
	tBool
	tNumber
	tString
	tArray
	tObject
	tAny = tNull | tBool | tNumber | tString | tArray | tObject
)

var typeBits = map[string]int{"null": tNull, "boolean": tBool, "integer": tNumber, "number": tNumber,
	"string": tString, "array": tArray, "object": tObject}

// typeMask is the JSON types values of schema s can have, as far as a
// quick look tells (tAny when it cannot).
func (c *schemaCompiler) typeMask(s any, depth int) int {
	o, ok := s.(*object)
	if !ok || depth > maxNesting {
		return tAny
	}
	if r, ok := o.get("$ref"); ok {
		if rs, ok := r.(string); ok && strings.HasPrefix(rs, "#") {
			if t, err := c.resolve(rs[1:]); err == nil {
				return c.typeMask(t, depth+1)
			}
		}
		return tAny
	}
	valueMask := func(v any) int {
		switch v.(type) {
		case nil:
			return tNull
		case bool:
			return tBool
		case json.Number:
			return tNumber
		case string:
			return tString
		case []any:
			return tArray
		}
		return tObject
	}
	if v, ok := o.get("const"); ok {
		return valueMask(v)
	}
	if v, ok := o.get("enum"); ok {
		m := 0
		if list, ok := v.([]any); ok {
			for _, x := range list {
				m |= valueMask(x)
			}
		}
		return m
	}
	for _, kw := range []string{"anyOf", "oneOf"} {
		if v, ok := o.get(kw); ok {
			m := 0
			list, _ := v.([]any)
			for _, b := range list {
				m |= c.typeMask(b, depth+1)
			}
			return m
		}
	}
	types, err := typesOf(o, "")
	if err != nil || len(types) == 0 {
		return tAny
	}
	m := 0
	for _, t := range types {
		m |= typeBits[t]
	}
	return m
}

// checkExclusive accepts oneOf branches that no value can match twice:
// their types do not overlap, or they are objects told apart by a
// property every branch requires with a constant (const, or an enum of
// one) of its own.
func (c *schemaCompiler) checkExclusive(branches []any, path string) error {
	masks := make([]int, len(branches))
	disjoint := true
	for i, b := range branches {
		masks[i] = c.typeMask(b, 0)
		for j := range i {
			if masks[i]&masks[j] != 0 {
				disjoint = false
			}
		}
	}
	if disjoint || c.discriminated(branches) {
		return nil
	}
	return schemaErr(path, "oneOf whose branches can match the same value is not supported; use anyOf")
}

// keptApart makes oneOf's branches of objects exclusive where each other
// branch requires a name that the branch does not: the branch is written
// without those properties (allOf with them false), so that its objects
// fail every other branch. Known required names are those of the oneOf's
// schema and of each branch itself (through references); ok is false
// when the branches may be other than objects, or some branch requires
// nothing that another does not.
func (c *schemaCompiler) keptApart(o *object, branches []any) (apart []any, ok bool) {
	requiredOf := func(x *object) []string {
		list, _ := x.vals["required"].([]any)
		var out []string
		for _, r := range list {
			if name, ok := r.(string); ok {
				out = append(out, name)
			}
		}
		return out
	}
	objects := o.vals["type"] == "object"
	base := requiredOf(o)
	reqs := make([][]string, len(branches))
	for i, b := range branches {
		bo, isObj := b.(*object)
		for depth := 0; isObj && depth < maxNesting; depth++ {
			r, isRef := bo.get("$ref")
			rs, _ := r.(string)
			if !isRef || !strings.HasPrefix(rs, "#") {
				break
			}
			t, err := c.resolve(rs[1:])
			if err != nil {
				return nil, false
			}
			bo, isObj = t.(*object)
		}
		if !isObj || (!objects && c.typeMask(bo, 0) != tObject) {
			return nil, false
		}
		reqs[i] = append(slices.Clone(base), requiredOf(bo)...)
	}
	for i, b := range branches {
		without := &object{vals: map[string]any{}}
		for j := range branches {
			if j == i {
				continue
			}
			k := slices.IndexFunc(reqs[j], func(name string) bool { return !slices.Contains(reqs[i], name) })
			if k < 0 {
				return nil, false
			}
			if name := reqs[j][k]; !slices.Contains(without.keys, name) {
				without.keys = append(without.keys, name)
				without.vals[name] = false
			}
		}
		apart = append(apart, &object{keys: []string{"allOf"}, vals: map[string]any{"allOf": []any{b,
			&object{keys: []string{"properties"}, vals: map[string]any{"properties": without}}}}})
	}
	return apart, true
}

func (c *schemaCompiler) discriminated(branches []any) bool {
	var objs []*object
	for _, b := range branches {
		o, ok := b.(*object)
		for depth := 0; ok && depth < maxNesting; depth++ {
			r, isRef := o.get("$ref")
			rs, _ := r.(string)
			if !isRef || !strings.HasPrefix(rs, "#") {
				break
			}
			t, err := c.resolve(rs[1:])
			if err != nil {
				return false
			}
			o, ok = t.(*object)
		}
		if !ok {
			return false
		}
		objs = append(objs, o)
	}
	props, _ := objs[0].vals["properties"].(*object)
	if props == nil {
		return false
	}
	constOf := func(o *object, key string) (string, bool) {
		req, _ := o.vals["required"].([]any)
		if !slices.Contains(req, any(key)) {
			return "", false
		}
		ps, _ := o.vals["properties"].(*object)
		if ps == nil {
			return "", false
		}
		p, _ := ps.vals[key].(*object)
		if p == nil {
			return "", false
		}
		if v, ok := p.get("const"); ok {
			return jsonLiteral(v), true
		}
		if e, ok := p.vals["enum"].([]any); ok && len(e) == 1 {
			return jsonLiteral(e[0]), true
		}
		return "", false
	}
	for _, key := range props.keys {
		seen := map[string]bool{}
		ok := true
		for _, o := range objs {
			v, has := constOf(o, key)
			if !has || seen[v] {
				ok = false
				break
			}
			seen[v] = true
		}
		if ok {
			return true
		}
	}
	return false
}
