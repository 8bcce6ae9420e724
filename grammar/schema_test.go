package grammar

import (
	"encoding/json"
	"errors"
	"math/big"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"

	"github.com/ruvllm/ruvllm/internal/schematest"
)

// testSchemas cover every supported keyword; valid are outputs the
// grammar must accept (in its property order and whitespace).
var testSchemas = []struct {
	name   string
	schema string
	valid  []string
}{
	{"person", `{"type":"object","properties":{
		"name":{"type":"string","maxLength":20},"age":{"type":"integer","minimum":0,"maximum":150},
		"email":{"type":"string","format":"email"},"tags":{"type":"array","items":{"type":"string"},"maxItems":3},
		"address":{"type":"object","properties":{"city":{"type":"string"},"zip":{"type":"string","pattern":"^\\d{5}$"}},
			"required":["city"],"additionalProperties":false}},
		"required":["name","age"],"additionalProperties":false}`,
		[]string{`{"name": "Ann", "age": 31}`, `{"name":"Bo","age":0,"tags":["a","b"],"address":{"city":"Oslo","zip":"01234"}}`,
			"{\n  \"name\": \"Al\",\n  \"age\": 150\n}"}},
	{"enum const", `{"type":"object","properties":{
		"color":{"enum":["red","green",null,3,{"a":[1,"x"]}]},"kind":{"const":"fixed \"q\"\n"},
		"note":{"type":["string","null"]},"either":{"anyOf":[{"type":"boolean"},{"type":"integer","maximum":-1}]}},
		"required":["color","kind","note","either"]}`,
		[]string{`{"color": "red", "kind": "fixed \"q\"\n", "note": null, "either": true}`,
			`{"color": {"a": [1, "x"]}, "kind": "fixed \"q\"\n", "note": "n", "either": -7}`}},
	{"numbers", `{"type":"array","prefixItems":[
		{"type":"number","minimum":0.5,"maximum":2.7},{"type":"number","exclusiveMinimum":0},
		{"type":"integer","minimum":-50,"maximum":1234},{"type":"number","maximum":-3.2},
		{"type":"number","minimum":0.2,"maximum":0.7},{"type":"integer","exclusiveMinimum":7,"exclusiveMaximum":9},
		{"type":"number","minimum":-2.5,"exclusiveMaximum":-1},{"type":"number"},{"type":"integer"}],
		"items":false,"minItems":9}`,
		[]string{`[1.25, 0.5, -50, -4, 0.45, 8, -2, 1e5, -3]`, `[2.7, 0.0001, 1234, -3.21, 0.2, 8, -1.5, 0.5, 0]`,
			`[0.51, 7, 0, -3.2, 0.7000, 8, -2.5, -0.5, 12]`}},
	{"strings", `{"type":"array","prefixItems":[
		{"type":"string","pattern":"^[A-Z]{2}-\\d{3,5}$"},{"type":"string","pattern":"(café|日本)+"},
		{"type":"string","minLength":3,"maxLength":5},{"type":"string","format":"date"},{"type":"string","format":"time"},
		{"type":"string","format":"date-time"},{"type":"string","format":"uuid"},{"type":"string","format":"ipv4"},
		{"type":"string","format":"hostname"},{"type":"string","pattern":"^[^a-z\"]?x\\.y[\\s\\w]*$"},
		{"type":"string","pattern":"^(?:a|b)(?<n>c)?é\\x41.$"}],"items":false,"minItems":11}`,
		[]string{`["AB-123", "café日本", "héllo", "2024-02-28", "23:59:59Z", "2024-01-01T00:00:00+01:00",
			"123e4567-e89b-12d3-a456-426614174000", "192.168.0.1", "example.com", "Xx.y a_1", "bcéAz"]`}},
	{"arrays", `{"type":"object","properties":{
		"pair":{"type":"array","prefixItems":[{"type":"string"},{"type":"integer"}],"items":false},
		"flags":{"type":"array","items":{"type":"boolean"},"minItems":2,"maxItems":4},
		"grid":{"type":"array","items":{"type":"array","items":{"type":"integer"},"maxItems":3},"maxItems":3}},
		"required":["pair","flags","grid"]}`,
		[]string{`{"pair": ["a", 1], "flags": [true, false], "grid": [[1, 2], []]}`,
			`{"pair": [], "flags": [true, true, false, false], "grid": []}`}},
	{"draft 7 tuple", `{"$schema":"http://json-schema.org/draft-07/schema#","type":"array","items":[{"type":"null"},{"type":"integer"}],
		"additionalItems":{"type":"string"},"minItems":1}`, []string{`[null]`, `[null, 1, "x", "y"]`}},
	{"recursion", `{"$defs":{"node":{"type":"object","properties":{"value":{"type":"integer"},
		"children":{"type":"array","items":{"$ref":"#/$defs/node"},"maxItems":2}},"required":["value"],
		"additionalProperties":false}},"$ref":"#/$defs/node"}`,
		[]string{`{"value": 1, "children": [{"value": 2}, {"value": 3, "children": []}]}`}},
	{"root recursion", `{"type":"object","properties":{"next":{"$ref":"#"}},"additionalProperties":false}`,
		[]string{`{}`, `{"next": {"next": {}}}`}},
	{"allOf", `{"allOf":[{"$ref":"#/definitions/base"},{"type":"object","properties":{"b":{"type":"integer"}},"required":["b"]}],
		"definitions":{"base":{"type":"object","properties":{"a":{"type":"string"}},"required":["a"]}}}`,
		[]string{`{"a": "x", "b": 1}`}},
	{"oneOf", `{"type":"object","properties":{
		"v":{"oneOf":[{"type":"string"},{"type":"number"},{"type":"null"}]},
		"shape":{"oneOf":[
			{"type":"object","properties":{"kind":{"const":"circle"},"r":{"type":"number"}},"required":["kind","r"]},
			{"type":"object","properties":{"kind":{"enum":["square"]},"side":{"type":"number"}},"required":["kind","side"]}]}},
		"required":["v","shape"]}`,
		[]string{`{"v": 1.5, "shape": {"kind": "circle", "r": 2}}`, `{"v": null, "shape": {"kind": "square", "side": 1}}`}},
	{"map", `{"type":"object","additionalProperties":{"type":"integer"},"required":["must"]}`,
		[]string{`{"must": 1}`, `{"must": 1, "x": 2, "y\"": -3}`}},
	{"any", `{}`, []string{`{"a": [1, "b", null, true, {"c": 2.5e10}]}`, `"x"`, `3`}},
	{"true", `true`, []string{`[]`}},
	{"types", `{"type":["string","integer","null"],"maxLength":2,"minimum":3}`, []string{`"ab"`, `3`, `null`}},
	{"keys", `{"type":"object","properties":{"a \"b\"":{"type":"boolean"},"日本":{"type":"null"},"c/~d":{"const":1}},
		"required":["a \"b\"","日本","c/~d"]}`, []string{`{"a \"b\"": true, "日本": null, "c/~d": 1}`}},
	{"draft 4", `{"$schema":"http://json-schema.org/draft-04/schema#","type":"number","minimum":1,"exclusiveMinimum":true,"maximum":2}`,
		[]string{`2`, `1.5`}},
	{"empty object", `{"type":"object","properties":{},"additionalProperties":false}`, []string{`{}`}},
}

// testVocabulary is every single byte, JSON-ish pieces, and pieces that
// hold parts of multi-byte characters, so that walks can write any valid
// output and meet characters split across tokens.
func testVocabulary(r *rand.Rand) []string {
	var pieces []string
	for b := range 256 {
		pieces = append(pieces, string([]byte{byte(b)}))
	}
	pieces = append(pieces, []string{`{"`, `":`, `": `, `",`, `", "`, `"}`, `}`, `]}`, `[{`, `true`, `false`, `null`, `\n  `, `\"`,
		`\u00`, `name`, `age`, `value`, `children`, `12`, `0.5`, `-1`, `e+`, `AB-`, `café`, `日本`, `日`, "\xE6\x97", "\xA5",
		"\xC3", "\xA9x", `2024-`, `T00:`, `:00Z`, `-4`, `.1`, `"a`, `b"`, `": {"`, `kind`, `circle`, `square`}...)
	for range 200 {
		var b strings.Builder
		for range 2 + r.IntN(4) {
			b.WriteByte(` "{}[],:-.0123456789abcdeflnrstuxyzAEZ\`[r.IntN(39)])
		}
		pieces = append(pieces, b.String())
	}
	return pieces
}

// walk draws tokens among those allowed, uniformly (as a random model
// would), within budget tokens, and returns the output.
func walk(t *testing.T, r *rand.Rand, g *Grammar, v *Vocabulary, pieces []string, budget int) (string, bool) {
	t.Helper()
	m := NewMatcher(g, v)
	mask := make([]uint64, v.MaskWords())
	var out strings.Builder
	allowed := make([]int32, 0, len(pieces))
	for left := budget; left > 0 && !m.Complete(); left-- {
		if !m.Mask(mask, left) {
			t.Fatalf("nothing allowed after %q", out.String())
		}
		allowed = allowed[:0]
		for id := range v.size {
			if mask[id>>6]&(1<<(id&63)) != 0 {
				allowed = append(allowed, int32(id))
			}
		}
		id := allowed[r.IntN(len(allowed))]
		if v.isEOG[id] {
			break
		}
		m.Accept(id)
		out.WriteString(pieces[id])
	}
	return out.String(), m.Matched()
}

// TestSchemaOutputsValidate compiles each schema and checks that the
// outputs of random walks through it are valid under a JSON-schema
// validator, and that the valid examples are matched.
func TestSchemaOutputsValidate(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	pieces := testVocabulary(r)
	eog := int32(len(pieces))
	v := NewVocabulary(append(pieces, ""), []int32{eog})
	pieces = append(pieces, "")
	for _, tc := range testSchemas {
		t.Run(tc.name, func(t *testing.T) {
			g, err := JSONSchema([]byte(tc.schema))
			if err != nil {
				t.Fatal(err)
			}
			val := schematest.Compile(t, tc.schema)
			for _, ex := range tc.valid {
				schematest.Check(t, val, ex)
				if m := NewMatcher(g, v); !m.AcceptBytes(ex) || !m.Matched() {
					t.Errorf("the grammar does not match %q", ex)
				}
			}
			for i := range 60 {
				out, whole := walk(t, r, g, v, pieces, 150+i*5)
				if !whole {
					t.Fatalf("walk %d ended before a whole match: %q", i, out)
				}
				schematest.Check(t, val, out)
			}
		})
	}
}

func TestJSONObjectGrammar(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	pieces := testVocabulary(r)
	v := NewVocabulary(pieces, nil)
	g := JSONObject()
	for range 100 {
		out, whole := walk(t, r, g, v, pieces, 100)
		var obj map[string]any
		if !whole || json.Unmarshal([]byte(out), &obj) != nil || obj == nil {
			t.Fatalf("%q is not a JSON object", out)
		}
	}
}

func TestSchemaErrors(t *testing.T) {
	tests := []struct{ name, schema, path string }{
		{"not JSON", `{"type":`, ""},
		{"not of a pattern", `{"not":{"type":"string","pattern":"a"}}`, "/not"},
		{"not of anything", `{"type":"object","properties":{"a":{"not":{}}}}`, "/properties/a/not"},
		{"maxContains", `{"type":"array","contains":{"type":"string"},"maxContains":2}`, "/maxContains"},
		{"propertyNames and patternProperties", `{"patternProperties":{"^a":{}},"propertyNames":{"maxLength":3}}`, ""},
		{"named property matching a pattern", `{"properties":{"ab":{"type":"string"}},"patternProperties":{"^a":{"type":"integer"}}}`, "/patternProperties/^a"},
		{"minProperties of free keys", `{"type":"object","minProperties":2}`, "/minProperties"},
		{"required key not a property name", `{"type":"object","required":["A"],"propertyNames":{"pattern":"^[a-z]+$"}}`, "/propertyNames"},
		{"uniqueItems of many items", `{"type":"array","items":{"type":"integer"},"uniqueItems":true,"minItems":2}`, "/uniqueItems"},
		{"uniqueItems beyond the values", `{"type":"array","items":{"enum":[1,2]},"uniqueItems":true,"minItems":3}`, ""},
		{"uniqueItems with prefixItems", `{"type":"array","prefixItems":[{}],"uniqueItems":true}`, "/uniqueItems"},
		{"multipleOf zero", `{"type":"number","multipleOf":0}`, "/multipleOf"},
		{"multipleOf too large", `{"type":"integer","multipleOf":1000003}`, ""},
		{"no multiple within", `{"type":"integer","multipleOf":10,"minimum":1,"maximum":9}`, ""},
		{"unsupported format", `{"type":"string","format":"uri-template"}`, "/format"},
		{"external ref", `{"$ref":"other.json#/a"}`, "/$ref"},
		{"missing ref", `{"$ref":"#/$defs/none"}`, "/$ref"},
		{"lookahead", `{"type":"string","pattern":"a(?=b)"}`, "/pattern"},
		{"backreference", `{"type":"string","pattern":"(a)\\1"}`, "/pattern"},
		{"anchor inside", `{"type":"string","pattern":"a^b"}`, "/pattern"},
		{"overlapping oneOf", `{"oneOf":[{"type":"integer"},{"type":"number"}]}`, "/oneOf"},
		{"false", `false`, ""},
		{"required false property", `{"type":"object","properties":{"a":false},"required":["a"]}`, "/properties/a"},
		{"lengths crossed", `{"type":"string","minLength":5,"maxLength":2}`, ""},
		{"items crossed", `{"type":"array","minItems":5,"maxItems":2}`, ""},
		{"no integer between", `{"type":"integer","minimum":1.2,"maximum":1.8}`, ""},
		{"pattern beyond lengths", `{"type":"string","pattern":"^a{4}$","maxLength":3}`, ""},
		{"lookbehind", `{"type":"string","pattern":"(?<=a)b"}`, "/pattern"},
		{"lookahead in a loop", `{"type":"string","pattern":"^((?=a)[ab])*$"}`, "/pattern"},
		{"pattern and format apart", `{"type":"string","pattern":"^x","format":"date"}`, ""},
		{"pattern too large with lengths", `{"type":"string","pattern":"^(a|bcdefghijklmnopqrstu)*$","maxLength":3000}`, ""},
		{"ref beside a different type", `{"$ref":"#/$defs/a","type":"integer","$defs":{"a":{"type":"string"}}}`, ""},
		{"allOf closed to a required property", `{"allOf":[{"type":"object","properties":{"a":{}},"additionalProperties":false},{"required":["b"]}]}`, ""},
		{"dependentSchemas of a string", `{"type":"object","properties":{"a":{}},"dependentSchemas":{"a":{"type":"string"}}}`, "/allOf/0/type"},
		{"dependency that cannot be written", `{"type":"object","properties":{"a":{}},"required":["a"],"additionalProperties":false,"dependentRequired":{"a":["b"]}}`, ""},
		{"allOf of two formats", `{"allOf":[{"format":"date"},{"format":"email"}]}`, "/allOf/1/format"},
		{"enum against its type", `{"type":"string","enum":[1,true]}`, "/enum"},
		{"const against its pattern", `{"const":"abc","pattern":"^x"}`, "/const"},
		{"ref cycle", `{"$defs":{"a":{"$ref":"#/$defs/b"},"b":{"$ref":"#/$defs/a"}},"$ref":"#/$defs/a"}`, ""},
		{"bad type", `{"type":"text"}`, "/type"},
		{"bad required", `{"type":"object","required":"a"}`, "/required"},
		{"tuple too short", `{"prefixItems":[{}],"items":false,"minItems":2}`, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := JSONSchema([]byte(tc.schema))
			var se *SchemaError
			if !errors.As(err, &se) {
				t.Fatalf("JSONSchema: %v, want a SchemaError", err)
			}
			if se.Path != tc.path {
				t.Errorf("path %q, want %q (%v)", se.Path, tc.path, err)
			}
		})
	}
}

// TestIntegerRanges checks natRange against every number of small ranges.
func TestIntegerRanges(t *testing.T) {
	v := NewVocabulary([]string{"x"}, nil)
	for _, rg := range [][2]int64{{0, 0}, {0, 9}, {3, 7}, {5, 123}, {10, 99}, {19, 1001}, {-50, 1234}, {-1234, -5}, {-7, 0}, {998, 1003}} {
		g, err := Compile(intRange(rg[0], rg[1]), nil)
		if err != nil {
			t.Fatal(err)
		}
		for n := rg[0] - 30; n <= rg[1]+30; n++ {
			want := n >= rg[0] && n <= rg[1]
			s := strings.TrimSpace(string(must(json.Marshal(n))))
			m := NewMatcher(g, v)
			if got := m.AcceptBytes(s) && m.Matched(); got != want {
				t.Errorf("range %v: %s matched %v", rg, s, got)
			}
		}
		for _, s := range []string{"007", "-0", "00", "+1"} {
			if m := NewMatcher(g, v); m.AcceptBytes(s) && m.Matched() {
				t.Errorf("range %v matches %q", rg, s)
			}
		}
	}
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

// TestBoundedNumbers compares the number grammar under random bounds with
// exact decimal comparison on random decimals.
func TestBoundedNumbers(t *testing.T) {
	r := rand.New(rand.NewPCG(9, 10))
	v := NewVocabulary([]string{"x"}, nil)
	values := []string{"-12.5", "-3", "-2.75", "-1", "-0.5", "-0.25", "0", "0.05", "0.2", "0.5", "0.7", "1", "1.5", "2.7", "3", "10", "10.01"}
	randomDecimal := func() string {
		s := strconv.Itoa(r.IntN(30))
		if r.IntN(3) > 0 {
			s += "." + strconv.Itoa(r.IntN(1000))
			if r.IntN(4) == 0 {
				s += "0"
			}
		}
		if r.IntN(2) == 0 && s != "0" {
			s = "-" + s
		}
		return s
	}
	for range 150 {
		var lo, hi bound
		var los, his string
		if r.IntN(5) > 0 {
			los = values[r.IntN(len(values))]
			x, _ := strconv.ParseFloat(los, 64)
			lo = bound{set: true, v: x, exclusive: r.IntN(2) == 0}
		}
		if r.IntN(5) > 0 {
			his = values[r.IntN(len(values))]
			x, _ := strconv.ParseFloat(his, 64)
			hi = bound{set: true, v: x, exclusive: r.IntN(2) == 0}
		}
		for _, integer := range []bool{false, true} {
			var e *Expr
			if integer {
				e = boundedInteger(lo, hi)
			} else {
				e = boundedNumber(lo, hi)
			}
			if e == nil {
				continue
			}
			g, err := Compile(e, nil)
			if err != nil {
				t.Fatal(err)
			}
			m := NewMatcher(g, v) // one automaton for every string
			for range 400 {
				s := randomDecimal()
				x, _ := new(big.Rat).SetString(s)
				want := !integer || !strings.Contains(s, ".") // integers are written without a point
				if lo.set {
					l, _ := new(big.Rat).SetString(los)
					c := x.Cmp(l)
					want = want && (c > 0 || (c == 0 && !lo.exclusive))
				}
				if hi.set {
					h, _ := new(big.Rat).SetString(his)
					c := x.Cmp(h)
					want = want && (c < 0 || (c == 0 && !hi.exclusive))
				}
				m.cur = m.a.start()
				if got := m.AcceptBytes(s) && m.Matched(); got != want {
					t.Fatalf("bounds %s(%v) %s(%v) integer %v: %s matched %v", los, lo.exclusive, his, hi.exclusive, integer, s, got)
				}
			}
		}
	}
}
