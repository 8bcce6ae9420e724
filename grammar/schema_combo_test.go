package grammar

import (
	"errors"
	"math/big"
	"math/rand/v2"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/ruvllm/ruvllm/internal/schematest"
	"github.com/santhosh-tekuri/jsonschema/v6"
)

// comboSchemas are schemas as generators write them (Pydantic v2's
// model_json_schema, zod-to-json-schema, typescript-json-schema) with
// keyword combinations that need more than one keyword's grammar: valid
// are outputs the grammar must accept, invalid ones it must refuse (all
// checked against the validator first).
var comboSchemas = []struct {
	name           string
	schema         string
	valid, invalid []string
}{
	{"constr pattern and lengths (Pydantic)", `{"maxLength":12,"minLength":5,"pattern":"^[A-Z]{3}-\\d+$","title":"Code","type":"string"}`,
		[]string{`"ABC-1"`, `"XYZ-12345678"`}, []string{`"ABC-"`, `"ABC-123456789"`, `"AB-12"`}},
	{"zod string min max regex", `{"$schema":"http://json-schema.org/draft-07/schema#","type":"object","properties":{
		"slug":{"type":"string","minLength":3,"maxLength":8,"pattern":"^[a-z0-9]+(?:-[a-z0-9]+)*$"},
		"word":{"type":"string","minLength":2,"pattern":"^[a-z]+$"},
		"short":{"type":"string","maxLength":3,"pattern":"x"}},
		"required":["slug","word","short"],"additionalProperties":false}`,
		[]string{`{"slug": "ab-c", "word": "hello", "short": "x"}`, `{"slug": "abcdefgh", "word": "ab", "short": "x"}`},
		[]string{`{"slug": "ab", "word": "hello", "short": "x"}`, `{"slug": "abc-", "word": "hello", "short": "x"}`,
			`{"slug": "abc", "word": "a", "short": "x"}`}},
	{"exact length (zod length)", `{"type":"string","minLength":4,"maxLength":4,"pattern":"^(ab|c)*$"}`,
		[]string{`"abab"`, `"cabc"`, `"cccc"`}, []string{`"ccc"`, `"ccccc"`, `"abcab"`}},
	{"lengths count characters", `{"type":"string","minLength":2,"maxLength":3,"pattern":"^[é日\"\\\\a]+$"}`,
		[]string{`"éé"`, `"日日日"`, `"a\"\\"`, `"\"\""`}, []string{`"日"`, `"éééé"`, `"a\"\\a"`}},
	{"length bound redundant", `{"type":"string","maxLength":10,"pattern":"^\\d{5}$"}`, []string{`"01234"`}, []string{`"0123"`}},
	{"unanchored pattern with length", `{"type":"string","minLength":1,"maxLength":6,"pattern":"[0-9]+"}`,
		[]string{`"123456"`}, []string{`"1234567"`}},
	{"format and lengths", `{"type":"array","prefixItems":[
		{"type":"string","format":"email","maxLength":20},{"type":"string","format":"date","minLength":10},
		{"type":"string","format":"hostname","minLength":8,"maxLength":9}],"items":false,"minItems":3}`,
		[]string{`["a@b.co", "2024-01-02", "abcd.efg"]`}, []string{`["abcdefghijkl@example.com", "2024-01-02", "abcd.efg"]`,
			`["a@b.co", "2024-01-02", "ab.cd"]`}},
	{"HttpUrl (Pydantic)", `{"type":"object","properties":{"url":{"format":"uri","maxLength":2083,"minLength":1,"title":"Url","type":"string"},
		"short":{"format":"uri","maxLength":24,"type":"string"}},"required":["url","short"]}`,
		[]string{`{"url": "https://example.com/a/b?x=1#top", "short": "http://a.b/c"}`}, nil},
	{"formats", `{"type":"array","prefixItems":[{"type":"string","format":"duration"},{"type":"string","format":"ipv6"},
		{"type":"string","format":"uri-reference"},{"type":"string","format":"password","maxLength":4},
		{"type":"string","format":"binary"},{"type":"integer","format":"int64"}],"items":false,"minItems":6}`,
		[]string{`["P1DT2H", "2001:db8:0:0:0:0:2:1", "ftp://x.y", "pw", "\u0000", 7]`, `["P3W", "0:0:0:0:0:0:0:1", "http://a", "", "", 0]`},
		[]string{`["P", "::1", "http://a", "", "", 0]`}},
	{"pattern and format", `{"type":"string","format":"date","pattern":"^2024-"}`, []string{`"2024-02-03"`}, []string{`"2023-02-03"`}},
	{"Decimal (Pydantic)", `{"anyOf":[{"type":"number"},{"pattern":"^(?!^[-+.]*$)[+-]?0*\\d*\\.?\\d*$","type":"string"}],"title":"Price"}`,
		[]string{`"1.5"`, `"-0012."`, `".5"`, `3.25`}, []string{`"-."`, `""`, `"+"`, `"1.2.3"`}},
	// The first alternative, not anchored at the end, matches the start
	// of any string: the validator takes any string but those of -+.
	// alone; the grammar writes the whole matches.
	{"condecimal (Pydantic)", `{"anyOf":[{"type":"number"},{"pattern":"^(?!^[-+.]*$)[+-]?0*(?:\\d{0,4}|(?=[\\d.]{1,7}0*$)\\d{0,4}\\.\\d{0,2}0*$)","type":"string"}],"title":"Price2"}`,
		[]string{`"1234.56"`, `"-12.5000"`, `"7"`, `"+.5"`}, []string{`"."`, `"+-"`}},
	{"lookahead for a required character", `{"type":"string","pattern":"^(?=.*\\d)(?=.*[A-Z])[A-Za-z\\d]{6,10}$"}`,
		[]string{`"abcD12"`, `"A1bcdefghi"`}, []string{`"abcdef"`, `"abcde1"`, `"A1b"`}},
	{"startsWith and a format (zod)", `{"type":"string","format":"uri","pattern":"^https:\\/\\/","maxLength":30}`,
		[]string{`"https://a.b/c"`}, []string{`"http://a.b/c"`}},
	{"conint multiple_of (Pydantic)", `{"maximum":1000,"minimum":0,"multipleOf":5,"title":"Qty","type":"integer"}`,
		[]string{`0`, `5`, `1000`, `995`}, []string{`3`, `1005`, `-5`}},
	{"multipleOf without bounds", `{"type":"integer","multipleOf":7}`,
		[]string{`0`, `-14`, `700000000000007`, `-0`}, []string{`15`, `7.5`}},
	{"confloat multiple_of (Pydantic)", `{"multipleOf":0.5,"title":"Step","type":"number"}`,
		[]string{`2.5`, `-3`, `0.5`, `10`}, []string{`0.25`, `1.3`}},
	{"prices", `{"type":"object","properties":{"price":{"type":"number","multipleOf":0.01,"minimum":0},
		"rate":{"type":"number","multipleOf":0.25,"exclusiveMinimum":0,"maximum":100000}},"required":["price","rate"]}`,
		[]string{`{"price": 19.99, "rate": 0.25}`, `{"price": 0.1, "rate": 99999.75}`, `{"price": 5, "rate": 3}`},
		[]string{`{"price": 0.001, "rate": 1}`, `{"price": 1, "rate": 0}`}},
	{"integer multiple of a fraction", `{"type":"integer","multipleOf":2.5,"minimum":-1e12}`,
		[]string{`5`, `-10`, `0`}, []string{`2`, `2.5`}},
	{"multipleOf with a wide range (zod int positive multipleOf)", `{"type":"integer","exclusiveMinimum":0,"maximum":1000000000,"multipleOf":3}`,
		[]string{`3`, `999999999`}, []string{`0`, `4`, `1000000002`}},
	{"set[str] (Pydantic)", `{"items":{"type":"string"},"title":"S","type":"array","uniqueItems":true}`,
		[]string{`[]`, `["apple", "banana", "cherry"]`, `["", "a", "b\"c"]`}, []string{`["a", "a"]`}},
	{"unique strings with bounds", `{"type":"array","items":{"type":"string","minLength":2,"maxLength":4},"uniqueItems":true,"minItems":2,"maxItems":3}`,
		[]string{`["ab", "cd"]`, `["ab", "cd", "efgh"]`}, []string{`["ab"]`, `["ab", "cd", "ef", "gh"]`, `["a", "cd"]`}},
	{"frozenset[Enum] (Pydantic)", `{"$defs":{"Color":{"enum":["red","green","blue"],"title":"Color","type":"string"}},
		"items":{"$ref":"#/$defs/Color"},"type":"array","uniqueItems":true}`,
		[]string{`[]`, `["green", "red"]`, `["blue", "green", "red"]`}, []string{`["red", "red"]`, `["red", "green", "red"]`}},
	{"unique literals, all of them", `{"type":"array","items":{"enum":["a","b","c",1,1.0,true]},"uniqueItems":true,"minItems":4}`,
		[]string{`["c", true, "a", 1]`}, []string{`["a", "b", 1, 1.0]`, `["a", "b", "c"]`}},
	{"unique booleans", `{"type":"array","items":{"type":"boolean"},"uniqueItems":true}`,
		[]string{`[true, false]`, `[false]`}, []string{`[true, true]`}},
	{"many unique values, in order", `{"type":"array","items":{"type":"integer","enum":[1,2,3,4,5,6,7,8,9,10,11,12,"x"]},"uniqueItems":true,"minItems":2,"maxItems":3}`,
		[]string{`[1, 12]`, `[3, 4, 5]`}, []string{`[1, 1]`, `[1, "x"]`, `[1, 2, 3, 4]`}},
	{"unique anything else: one item", `{"type":"array","items":{"type":"integer"},"uniqueItems":true,"minItems":1}`,
		[]string{`[5]`}, []string{`[]`, `[5, 5]`}},
	{"dict[Literal, int] (Pydantic)", `{"additionalProperties":{"type":"integer"},"propertyNames":{"enum":["x","y"]},"title":"Ml","type":"object"}`,
		[]string{`{}`, `{"x": 1}`, `{"y": 2, "x": 1}`}, []string{`{"z": 1}`, `{"x": "a"}`}},
	{"dict[constr(pattern), float] (Pydantic)", `{"patternProperties":{"^[a-z]+$":{"type":"number"}},"title":"Mk","type":"object"}`,
		[]string{`{}`, `{"abc": 1.5}`, `{"a": 1, "b": 2}`}, []string{`{"abc": "x"}`}},
	{"propertyNames with a pattern and a length", `{"type":"object","propertyNames":{"pattern":"^[a-z_]+$","maxLength":5},
		"additionalProperties":{"type":"string"},"required":["id"]}`,
		[]string{`{"id": "1"}`, `{"id": "1", "a_b": "x"}`}, []string{`{"id": "1", "abcdef": "x"}`, `{"id": "1", "A": "x"}`}},
	{"minProperties and maxProperties of a map", `{"type":"object","additionalProperties":{"type":"integer"},"minProperties":1,"maxProperties":3}`,
		[]string{`{"a": 1}`, `{"a": 1, "b": 2, "c": 3}`}, []string{`{}`, `{"a": 1, "b": 2, "c": 3, "d": 4}`}},
	{"minProperties and maxProperties of named properties", `{"type":"object","properties":{"a":{"type":"integer"},
		"b":{"type":"integer"},"c":{"type":"integer"}},"required":["a"],"maxProperties":2,"minProperties":2}`,
		[]string{`{"a": 1, "b": 2}`, `{"a": 1, "c": 3}`}, []string{`{"a": 1}`, `{"a": 1, "b": 2, "c": 3}`}},
	{"two patterns", `{"type":"object","patternProperties":{"^a":{"type":"integer"},"b$":{"type":"string"}},"additionalProperties":false}`,
		[]string{`{"ax": 1, "xb": "s"}`, `{"a": 2}`}, []string{`{"ab": 1}`, `{"ab": "s"}`}},
	{"named properties beside a pattern", `{"type":"object","properties":{"id":{"type":"integer"}},"patternProperties":{"^x-":{}},
		"required":["id","x-a"]}`, []string{`{"id": 1, "x-a": [true]}`}, nil},
	{"ref beside constraints", `{"$ref":"#/$defs/a","maxLength":2,"$defs":{"a":{"type":"string"}}}`,
		[]string{`"ab"`}, []string{`"abc"`, `1`}},
	{"ref beside an object's keywords (OpenAPI)", `{"$defs":{"Base":{"type":"object","properties":{"id":{"type":"integer"},"tag":{"type":"string"}},"required":["id"]}},
		"$ref":"#/$defs/Base","properties":{"id":{"minimum":1},"name":{"type":"string"}},"required":["name"]}`,
		[]string{`{"id": 1, "name": "x"}`, `{"id": 2, "name": "x", "tag": "t"}`}, []string{`{"id": 1}`, `{"id": 0, "name": "x"}`}},
	{"allOf with additionalProperties false", `{"allOf":[{"type":"object","properties":{"a":{"type":"integer"},"b":{"type":"integer"}},"additionalProperties":false},
		{"type":"object","properties":{"b":{"minimum":5},"c":{"type":"string"}}}],"required":["b"]}`,
		[]string{`{"b": 5, "a": 1}`, `{"b": 6}`}, []string{`{"b": 5, "c": "x"}`, `{"b": 4}`}},
	{"several regexes (zod)", `{"type":"string","minLength":3,"allOf":[{"pattern":"^[a-z]"},{"pattern":"\\d$"},{"pattern":"^[a-z0-9]+$"}]}`,
		[]string{`"ab1"`, `"x2y3"`}, []string{`"1b1"`, `"ab"`, `"a1"`}},
	{"allOf of numbers", `{"allOf":[{"type":"number","minimum":0},{"type":"integer","maximum":10},{"exclusiveMaximum":8}]}`,
		[]string{`0`, `7`}, []string{`8`, `-1`, `2.5`}},
	{"enum filtered by its siblings", `{"type":"object","properties":{"a":{"type":"string","enum":["x","yy",3,null]},
		"b":{"enum":["red","green","blue"],"maxLength":4},"c":{"const":5,"minimum":1}},"required":["a","b","c"]}`,
		[]string{`{"a": "yy", "b": "red", "c": 5}`}, []string{`{"a": 3, "b": "red", "c": 5}`, `{"a": "x", "b": "green", "c": 5}`}},
	{"anyOf beside an object's keywords", `{"type":"object","properties":{"a":{"type":"string"},"b":{"type":"string"}},
		"anyOf":[{"required":["a"]},{"required":["b"]}]}`, []string{`{"a": "x"}`, `{"b": "y"}`, `{"a": "x", "b": "y"}`}, []string{`{}`}},
	{"anyOf beside a string's keywords", `{"type":"string","maxLength":5,"anyOf":[{"format":"ipv4"},{"pattern":"^x+$"}]}`,
		[]string{`"xx"`}, []string{`"1.2.3.4"`, `"xxxxxx"`}},
	{"ip (zod)", `{"type":"string","anyOf":[{"format":"ipv4"},{"format":"ipv6"}]}`, []string{`"10.0.0.1"`, `"1:2:3:4:5:6:7:8"`}, []string{`"x"`}},
	{"dependentRequired", `{"type":"object","properties":{"card":{"type":"string"},"billing":{"type":"string"},"name":{"type":"string"}},
		"dependentRequired":{"card":["billing"]}}`, []string{`{"billing": "x", "card": "1"}`, `{"billing": "x", "name": "n"}`}, []string{`{"card": "1"}`}},
	{"dependencies (draft 7)", `{"$schema":"http://json-schema.org/draft-07/schema#","type":"object","properties":{"a":{"type":"integer"},"b":{"type":"integer"}},
		"required":["a"],"dependencies":{"a":["b"]}}`, []string{`{"a": 1, "b": 2}`}, []string{`{"a": 1}`}},
	{"unevaluatedProperties", `{"type":"object","allOf":[{"properties":{"a":{"type":"integer"}},"required":["a"]}],
		"properties":{"b":{"type":"string"}},"unevaluatedProperties":false}`, []string{`{"a": 1, "b": "x"}`, `{"a": 1}`}, []string{`{"a": 1, "c": 2}`}},
	{"unevaluatedProperties of a map", `{"type":"object","unevaluatedProperties":{"type":"boolean"}}`, []string{`{"x": true}`}, []string{`{"x": 1}`}},
	{"unevaluatedItems", `{"type":"array","prefixItems":[{"type":"string"}],"unevaluatedItems":{"type":"integer"}}`,
		[]string{`["a", 1, 2]`, `[]`}, []string{`["a", "b"]`}},
	{"if then else", `{"type":"object","properties":{"country":{"enum":["US","CA"]},"zip":{"type":"string"}},"required":["country","zip"],
		"if":{"properties":{"country":{"const":"US"}}},"then":{"properties":{"zip":{"pattern":"^\\d{5}$"}}},
		"else":{"properties":{"zip":{"pattern":"^[A-Z]\\d[A-Z] \\d[A-Z]\\d$"}}}}`,
		[]string{`{"country": "US", "zip": "12345"}`}, []string{`{"country": "US", "zip": "K1A 0B1"}`}},
	{"if false", `{"type":"string","if":false,"then":{"maxLength":1},"else":{"minLength":2}}`, []string{`"ab"`}, []string{`"a"`}},
	{"not a type", `{"not":{"type":"null"}}`, []string{`1`, `"x"`, `[]`}, []string{`null`}},
	{"not of required names", `{"type":"object","properties":{"a":{"type":"integer"},"b":{"type":"integer"}},"not":{"required":["a","b"]}}`,
		[]string{`{"b": 1}`, `{}`}, []string{`{"a": 1, "b": 2}`}},
	{"dependentSchemas", `{"type":"object","properties":{"card":{"type":"string"},"cvv":{"type":"string"}},"dependentSchemas":{"card":{"required":["cvv"]}}}`,
		[]string{`{"cvv": "123", "card": "x"}`, `{"cvv": "1"}`}, []string{`{"card": "x"}`}},
	{"contains", `{"type":"array","items":{"type":"integer"},"contains":{"minimum":10},"minContains":2}`,
		[]string{`[10, 11]`, `[12, 10, 3]`}, []string{`[1, 12]`, `[]`, `[10]`}},
	{"contains of anything", `{"type":"array","contains":{"type":"string"}}`, []string{`["x", 1]`}, []string{`[1]`}},
	{"unknown keywords beside references", `{"id":"http://x.org/s.json","$defs":{"a":{"type":"integer","nullable":true}},
		"type":"object","properties":{"v":{"$ref":"#/$defs/a","x-order":1,"nullable":true}},"required":["v"]}`,
		[]string{`{"v": 3}`}, []string{`{"v": null}`}},
	{"references by anchor and by $id", `{"$id":"http://example.com/root.json","type":"array","prefixItems":[
		{"$ref":"#item"},{"$ref":"http://example.com/root.json#/$defs/b"},{"$ref":"root.json#/$defs/b"}],"items":false,"minItems":3,
		"$defs":{"a":{"$anchor":"item","type":"string","maxLength":2},"b":{"type":"boolean"}}}`,
		[]string{`["ab", true, false]`}, []string{`["abc", true, false]`}},
	{"unique strings, many allowed", `{"type":"array","items":{"type":"string"},"uniqueItems":true,"maxItems":1000}`,
		[]string{`["a", "b"]`}, []string{`["a", "a"]`}},
	{"allOf of a property with true", `{"allOf":[{"properties":{"a":true}},{"properties":{"a":{"type":"integer"}}}],"required":["a"]}`,
		[]string{`{"a": 1}`}, []string{`{"a": "x"}`}},
	{"oneOf by required names", `{"type":"object","properties":{"email":{"type":"string"},"phone":{"type":"string"},"name":{"type":"string"}},
		"oneOf":[{"required":["email"]},{"required":["phone"]}]}`,
		[]string{`{"email": "a", "name": "n"}`, `{"phone": "1"}`}, []string{`{"email": "a", "phone": "1"}`, `{}`}},
	{"oneOf of objects told apart by what they require", `{"$defs":{"A":{"type":"object","properties":{"a":{"type":"integer"},"shared":{"type":"string"}},"required":["a"]},
		"B":{"type":"object","properties":{"b":{"type":"integer"},"shared":{"type":"string"}},"required":["b"]}},
		"oneOf":[{"$ref":"#/$defs/A"},{"$ref":"#/$defs/B"}]}`,
		[]string{`{"a": 1, "shared": "s"}`, `{"b": 2}`}, []string{`{"a": 1, "b": 2}`}},
	{"anchors inside groups", `{"type":"string","pattern":"^(?:a$|b)c?"}`, []string{`"a"`, `"bc"`, `"b"`}, []string{`"ac"`}},
}

// comboChecks are, for the schemas whose patterns the validator cannot
// read (its regular expressions are RE2's, without lookaheads), schemas
// that mean the same, which the outputs are validated against.
var comboChecks = map[string]string{
	"Decimal (Pydantic)":                 `{"anyOf":[{"type":"number"},{"type":"string","pattern":"^[+-]?0*\\d*\\.?\\d*$","not":{"pattern":"^[-+.]*$"}}]}`,
	"condecimal (Pydantic)":              `{"anyOf":[{"type":"number"},{"type":"string","not":{"pattern":"^[-+.]*$"}}]}`,
	"lookahead for a required character": `{"type":"string","allOf":[{"pattern":"^[A-Za-z\\d]{6,10}$"},{"pattern":"\\d"},{"pattern":"[A-Z]"}]}`,
}

func TestComboSchemas(t *testing.T) {
	r := rand.New(rand.NewPCG(11, 12))
	pieces := testVocabulary(r)
	eog := int32(len(pieces))
	v := NewVocabulary(append(pieces, ""), []int32{eog})
	pieces = append(pieces, "")
	for _, tc := range comboSchemas {
		t.Run(tc.name, func(t *testing.T) {
			g, err := JSONSchema([]byte(tc.schema))
			if err != nil {
				t.Fatal(err)
			}
			check := tc.schema
			if c, ok := comboChecks[tc.name]; ok {
				check = c
			}
			val := schematest.Compile(t, check)
			for _, ex := range tc.valid {
				schematest.Check(t, val, ex)
				if m := NewMatcher(g, v); !m.AcceptBytes(ex) || !m.Matched() {
					t.Errorf("the grammar does not match %q", ex)
				}
			}
			for _, ex := range tc.invalid {
				if valid(t, val, ex) {
					t.Fatalf("%q is valid: not a test of refusal", ex)
				}
				if m := NewMatcher(g, v); m.AcceptBytes(ex) && m.Matched() {
					t.Errorf("the grammar matches %q", ex)
				}
			}
			for i := range 40 {
				out, whole := walk(t, r, g, v, pieces, 120+i*5)
				if !whole {
					t.Fatalf("walk %d ended before a whole match: %q", i, out)
				}
				schematest.Check(t, val, out)
			}
		})
	}
}

// TestLengthAutomaton checks patterns with length bounds against Go's
// regexp (the same language for these patterns, matched whole) on every string of a
// small alphabet up to a length, both ways.
func TestLengthAutomaton(t *testing.T) {
	v := NewVocabulary([]string{"x"}, nil)
	patterns := []string{`^[ab]+$`, `^(ab|b)*a?$`, `^a(b|ba)*$`, `^(a|b{2,3})*$`, `^[^a]*a[^a]*$`, `^(?:ab?){1,3}c?$`, `^c|ab*$`}
	bounds := [][2]int{{0, 3}, {2, 2}, {1, 5}, {3, -1}, {0, 0}, {4, 6}}
	var texts []string
	var gen func(s string)
	gen = func(s string) {
		texts = append(texts, s)
		if len(s) < 7 {
			for _, c := range "abc" {
				gen(s + string(c))
			}
		}
	}
	gen("")
	for _, p := range patterns {
		re := regexp.MustCompile(`^(?:` + p + `)$`) // whole matches
		for _, b := range bounds {
			schema := `{"type":"string","pattern":` + quoteJSON(p) + `,"minLength":` + itoa(b[0])
			if b[1] >= 0 {
				schema += `,"maxLength":` + itoa(b[1])
			}
			schema += "}"
			g, err := JSONSchema([]byte(schema))
			if err != nil {
				if strings.Contains(err.Error(), "no string") {
					continue
				}
				t.Fatalf("%s: %v", schema, err)
			}
			m := NewMatcher(g, v)
			for _, s := range texts {
				n := utf8.RuneCountInString(s)
				want := re.MatchString(s) && n >= b[0] && (b[1] < 0 || n <= b[1])
				m.cur = m.a.start()
				if got := m.AcceptBytes(`"`+s+`"`) && m.Matched(); got != want {
					t.Errorf("%s: %q matched %v", schema, s, got)
				}
			}
		}
	}
}

func itoa(n int) string { return strconv.Itoa(n) }

// valid reports whether out is valid under s.
func valid(t *testing.T, s *jsonschema.Schema, out string) bool {
	t.Helper()
	inst, err := jsonschema.UnmarshalJSON(strings.NewReader(out))
	if err != nil {
		return false
	}
	return s.Validate(inst) == nil
}

// TestMultiples compares multipleOf's grammar, with and without bounds,
// with exact arithmetic on every multiple of 0.01 in a range, written
// as JSON writes them.
func TestMultiples(t *testing.T) {
	v := NewVocabulary([]string{"x"}, nil)
	for _, m := range []string{"7", "0.25", "0.01", "2.5", "0.3"} {
		for _, bounds := range []string{``, `,"minimum":-50,"maximum":50`, `,"exclusiveMinimum":0,"maximum":1000`, `,"minimum":-3.5`} {
			for _, typ := range []string{"integer", "number"} {
				schema := `{"type":"` + typ + `","multipleOf":` + m + bounds + `}`
				g, err := JSONSchema([]byte(schema))
				if err != nil {
					t.Fatalf("%s: %v", schema, err)
				}
				val := schematest.Compile(t, schema)
				mat := NewMatcher(g, v)
				for k := -1500; k <= 1500; k += 1 + k&3 {
					s := decimalString(big.NewRat(int64(k), 100), 2)
					want := valid(t, val, s)
					mat.cur = mat.a.start()
					if got := mat.AcceptBytes(s) && mat.Matched(); got != want {
						t.Fatalf("%s: %s matched %v", schema, s, got)
					}
				}
			}
		}
	}
}

// generatorModels are whole models as the generators write them: a
// Pydantic v2 model of every common field type (model_json_schema of
// Pydantic 2.13, less the Decimal fields, whose lookahead patterns the
// validator cannot read: see comboSchemas) and a zod object
// (zod-to-json-schema 3, less z.string().emoji(), whose \p{...} classes
// are not supported).
var generatorModels = []struct{ name, schema string }{
	{"Pydantic", `{"$defs":{"Cat":{"properties":{"pet_type":{"const":"cat","title":"Pet Type","type":"string"},"meows":{"title":"Meows","type":"integer"}},"required":["pet_type","meows"],"title":"Cat","type":"object"},"Color":{"enum":["red","green"],"title":"Color","type":"string"},"Dog":{"properties":{"pet_type":{"const":"dog","title":"Pet Type","type":"string"},"barks":{"title":"Barks","type":"number"}},"required":["pet_type","barks"],"title":"Dog","type":"object"}},"properties":{"code":{"maxLength":12,"minLength":5,"pattern":"^[A-Z]{3}-\\d+$","title":"Code","type":"string"},"name":{"description":"d","examples":["x"],"maxLength":50,"minLength":1,"title":"Name","type":"string"},"qty":{"maximum":1000,"minimum":0,"multipleOf":5,"title":"Qty","type":"integer"},"pos":{"exclusiveMinimum":0,"title":"Pos","type":"integer"},"ratio":{"exclusiveMaximum":1,"exclusiveMinimum":0,"title":"Ratio","type":"number"},"step":{"multipleOf":0.5,"title":"Step","type":"number"},"opt":{"anyOf":[{"type":"string"},{"type":"null"}],"default":null,"title":"Opt"},"lit":{"enum":["a","b"],"title":"Lit","type":"string"},"one":{"const":"only","title":"One","type":"string"},"color":{"$ref":"#/$defs/Color","default":"red"},"pet":{"discriminator":{"mapping":{"cat":"#/$defs/Cat","dog":"#/$defs/Dog"},"propertyName":"pet_type"},"oneOf":[{"$ref":"#/$defs/Cat"},{"$ref":"#/$defs/Dog"}],"title":"Pet"},"d":{"format":"date","title":"D","type":"string"},"dt":{"format":"date-time","title":"Dt","type":"string"},"t":{"format":"time","title":"T","type":"string"},"td":{"format":"duration","title":"Td","type":"string"},"u":{"format":"uuid","title":"U","type":"string"},"e":{"format":"email","title":"E","type":"string"},"url":{"format":"uri","maxLength":2083,"minLength":1,"title":"Url","type":"string"},"aurl":{"format":"uri","minLength":1,"title":"Aurl","type":"string"},"tags":{"items":{"type":"string"},"maxItems":5,"minItems":1,"title":"Tags","type":"array"},"s":{"items":{"type":"string"},"title":"S","type":"array","uniqueItems":true},"fs":{"items":{"$ref":"#/$defs/Color"},"title":"Fs","type":"array","uniqueItems":true},"m":{"additionalProperties":{"type":"integer"},"title":"M","type":"object"},"mk":{"patternProperties":{"^[a-z]+$":{"type":"number"}},"title":"Mk","type":"object"},"ml":{"additionalProperties":{"type":"integer"},"propertyNames":{"enum":["x","y"]},"title":"Ml","type":"object"},"tup":{"maxItems":2,"minItems":2,"prefixItems":[{"type":"integer"},{"type":"string"}],"title":"Tup","type":"array"},"vt":{"items":{"type":"integer"},"title":"Vt","type":"array"},"secret":{"format":"password","title":"Secret","type":"string","writeOnly":true},"ip":{"format":"ipvanyaddress","title":"Ip","type":"string"},"ip4":{"format":"ipv4","title":"Ip4","type":"string"},"ip6":{"format":"ipv6","title":"Ip6","type":"string"},"b":{"format":"binary","title":"B","type":"string"},"nested":{"anyOf":[{"$ref":"#/$defs/Cat"},{"type":"null"}],"default":null},"lst":{"default":[],"items":{"$ref":"#/$defs/Cat"},"title":"Lst","type":"array"},"ann":{"exclusiveMaximum":10,"exclusiveMinimum":0,"title":"Ann","type":"integer"},"strict":{"title":"Strict","type":"string"},"nn":{"minimum":0,"title":"Nn","type":"number"}},"required":["code","name","qty","pos","ratio","step","lit","one","pet","d","dt","t","td","u","e","url","aurl","tags","s","fs","m","mk","ml","tup","vt","secret","ip","ip4","ip6","b","ann","strict","nn"],"title":"M","type":"object"}`},
	{"zod", `{"$ref":"#/definitions/S","definitions":{"S":{"type":"object","properties":{"id":{"type":"string","format":"uuid"},"name":{"type":"string","minLength":1,"maxLength":50},"slug":{"type":"string","pattern":"^[a-z0-9-]+$","minLength":3,"maxLength":20},"code":{"type":"string","allOf":[{"pattern":"^[A-Z]"},{"pattern":"\\d$"}]},"email":{"type":"string","format":"email"},"site":{"type":"string","format":"uri"},"age":{"type":"integer","exclusiveMinimum":0,"maximum":150},"score":{"type":"number","minimum":0,"maximum":1},"qty":{"type":"integer","multipleOf":5,"minimum":0},"tags":{"type":"array","items":{"type":"string"},"minItems":1,"maxItems":5},"status":{"type":"string","enum":["active","inactive"],"default":"active"},"nick":{"type":["string","null"]},"at":{"type":"string","format":"date-time"},"created":{"type":"string","format":"date-time"},"when":{"type":"string","format":"date"},"kind":{"type":"string","const":"user"},"pair":{"type":"array","minItems":2,"maxItems":2,"items":[{"type":"string"},{"type":"number"}]},"meta":{"type":"object","additionalProperties":{"type":"number"}},"pet":{"anyOf":[{"type":"object","properties":{"type":{"type":"string","const":"cat"},"lives":{"type":"number"}},"required":["type","lives"],"additionalProperties":false},{"type":"object","properties":{"type":{"type":"string","const":"dog"},"good":{"type":"boolean"}},"required":["type","good"],"additionalProperties":false}]},"either":{"type":["string","number"]},"start":{"type":"string","allOf":[{"pattern":"^ab"},{"pattern":"z$"}]},"ip":{"type":"string","anyOf":[{"format":"ipv4"},{"format":"ipv6"}]},"cuid":{"type":"string","pattern":"^[cC][^\\s-]{8,}$"},"len":{"type":"string","minLength":4,"maxLength":4},"big":{"type":"integer","format":"int64"},"set":{"type":"array","uniqueItems":true,"items":{"type":"string"}},"inter":{"allOf":[{"type":"object","properties":{"a":{"type":"string"}},"required":["a"]},{"type":"object","properties":{"b":{"type":"number"}},"required":["b"]}]},"opt":{"type":"number","description":"an optional"}},"required":["id","name","slug","code","email","age","score","qty","tags","nick","at","created","when","kind","pair","meta","pet","either","start","ip","cuid","len","big","set","inter"],"additionalProperties":false}},"$schema":"http://json-schema.org/draft-07/schema#"}`},
}

// TestGeneratorModels compiles whole models and validates random walks
// through them, with budgets above their shortest outputs.
func TestGeneratorModels(t *testing.T) {
	r := rand.New(rand.NewPCG(13, 14))
	pieces := testVocabulary(r)
	eog := int32(len(pieces))
	v := NewVocabulary(append(pieces, ""), []int32{eog})
	pieces = append(pieces, "")
	for _, tc := range generatorModels {
		t.Run(tc.name, func(t *testing.T) {
			g, err := JSONSchema([]byte(tc.schema))
			if err != nil {
				t.Fatal(err)
			}
			val := schematest.Compile(t, tc.schema)
			for i := range 12 {
				out, whole := walk(t, r, g, v, pieces, g.MinLength()+100+i*40)
				if !whole {
					t.Fatalf("walk %d ended before a whole match: %q", i, out)
				}
				schematest.Check(t, val, out)
			}
		})
	}
}

// FuzzPatternLengths checks that a pattern with lengths neither panics
// nor hangs, that a failure is a *SchemaError, and that each string the
// grammar takes (of a few characters, as JSON strings) has the lengths
// and, where RE2 reads the pattern the same, matches it.
func FuzzPatternLengths(f *testing.F) {
	for _, tc := range []struct {
		p      string
		lo, hi int
	}{{`^[ab]+$`, 1, 3}, {`(?=a)[ab]{2}`, 0, 5}, {`^(?!b)a*b?$`, 2, -1}, {`a|^b$`, 0, 1}, {`é(x|\d)*`, 3, 3}, {`[^\s]{2,}`, 0, 4}} {
		f.Add(tc.p, tc.lo, tc.hi)
	}
	v := NewVocabulary([]string{"x"}, nil)
	texts := []string{"", "a", "b", "ab", "ba", "aab", "é", "éx1", "a b", "abab", "\"", "\\", "aaaaa"}
	f.Fuzz(func(t *testing.T, p string, lo, hi int) {
		if lo < 0 || lo > 50 || hi > 50 || len(p) > 200 {
			return
		}
		schema := `{"type":"string","pattern":` + quoteJSON(p) + `,"minLength":` + strconv.Itoa(lo)
		if hi >= 0 {
			schema += `,"maxLength":` + strconv.Itoa(hi)
		}
		schema += "}"
		start := time.Now()
		g, err := JSONSchema([]byte(schema))
		if took := time.Since(start); took > 5*time.Second {
			t.Fatalf("%s took %v", schema, took)
		}
		if err != nil {
			var se *SchemaError
			if !errors.As(err, &se) {
				t.Fatalf("%s: %v is not a SchemaError", schema, err)
			}
			return
		}
		re, reErr := regexp.Compile(p)
		m := NewMatcher(g, v)
		for _, s := range texts {
			m.cur = m.a.start()
			if !m.AcceptBytes(quoteJSON(s)) || !m.Matched() {
				continue
			}
			if n := utf8.RuneCountInString(s); n < lo || (hi >= 0 && n > hi) {
				t.Fatalf("%s takes %q, of %d characters", schema, s, n)
			}
			// ECMA-262 reads [] and [^] otherwise than RE2.
			if reErr == nil && !strings.Contains(p, "[]") && !strings.Contains(p, "[^]") && !re.MatchString(s) {
				t.Fatalf("%s takes %q, which the pattern does not match", schema, s)
			}
		}
	})
}
