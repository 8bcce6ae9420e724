package grammar

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
)

// The pieces of JSON every schema grammar shares, as rules named with a
// prefix of their own so that a grammar can hold several schemas.
const (
	ruleWS     = "ws"
	ruleChar   = "char"
	ruleString = "string"
	ruleNumber = "number"
	ruleInt    = "integer"
	ruleValue  = "value"
	ruleObject = "object"
	ruleArray  = "array"
)

// Limits on the numbers and whitespace the grammars write, so that every
// number fits a float64 and a model cannot pad forever.
const (
	maxIntDigits  = 16
	maxFracDigits = 16
	maxExpDigits  = 2
	maxIndent     = 20
)

// jsonRules are the shared pieces: whitespace between tokens (nothing, a
// space, or one or two newlines and an indentation, as llama.cpp allows),
// a string character, and any value.
func jsonRules() Rules {
	digit := Byte(Range('0', '9'))
	hex := Byte(hexDigits())
	intPart := Alt(Lit("0"), Seq(Byte(Range('1', '9')), Repeat(digit, 0, maxIntDigits-1)))
	// \u escapes of surrogates are left out: a lone one is no character,
	// and a pair would count as two toward maxLength.
	var notSurrogate ByteSet
	notSurrogate.AddRange('0', '9')
	notSurrogate.AddRange('a', 'c')
	notSurrogate.AddRange('A', 'C')
	notSurrogate.AddRange('e', 'f')
	notSurrogate.AddRange('E', 'F')
	uEscape := Seq(Lit("u"), Alt(Seq(Byte(notSurrogate), hex, hex, hex), Seq(Byte(bytesOf("dD")), Byte(Range('0', '7')), hex, hex)))
	member := Seq(Ref(ruleString), Ref(ruleWS), Lit(":"), Ref(ruleWS), Ref(ruleValue))
	item := Ref(ruleValue)
	sep := Seq(Ref(ruleWS), Lit(","), Ref(ruleWS))
	return Rules{
		ruleWS: Opt(Alt(Lit(" "), Seq(Repeat(Lit("\n"), 1, 2), Repeat(Byte(bytesOf(" \t")), 0, maxIndent)))),
		ruleChar: Alt(
			utf8Expr(mustEscape.negate()),
			Seq(Lit(`\`), Alt(Byte(bytesOf(`"\/bfnrt`)), uEscape)),
		),
		ruleString: Seq(Lit(`"`), Repeat(Ref(ruleChar), 0, -1), Lit(`"`)),
		ruleInt:    Seq(Opt(Lit("-")), intPart),
		ruleNumber: Seq(Opt(Lit("-")), intPart, Opt(Seq(Lit("."), Repeat(digit, 1, maxFracDigits))),
			Opt(Seq(Byte(bytesOf("eE")), Opt(Byte(bytesOf("+-"))), Repeat(digit, 1, maxExpDigits)))),
		ruleObject: Seq(Lit("{"), Ref(ruleWS), Opt(Seq(member, Repeat(Seq(sep, member), 0, -1))), Ref(ruleWS), Lit("}")),
		ruleArray:  Seq(Lit("["), Ref(ruleWS), Opt(Seq(item, Repeat(Seq(sep, item), 0, -1))), Ref(ruleWS), Lit("]")),
		ruleValue: Alt(Ref(ruleObject), Ref(ruleArray), Ref(ruleString), Ref(ruleNumber),
			Lit("true"), Lit("false"), Lit("null")),
	}
}

func hexDigits() ByteSet {
	s := Range('0', '9')
	s.AddRange('a', 'f')
	s.AddRange('A', 'F')
	return s
}

func bytesOf(s string) ByteSet {
	var set ByteSet
	for i := 0; i < len(s); i++ {
		set.AddRange(s[i], s[i])
	}
	return set
}

// jsonLiteral is the JSON text of v (a value decoded by decodeOrdered),
// with object members in their original order.
func jsonLiteral(v any) string {
	var b strings.Builder
	writeJSON(&b, v)
	return b.String()
}

func writeJSON(b *strings.Builder, v any) {
	switch x := v.(type) {
	case nil:
		b.WriteString("null")
	case bool:
		b.WriteString(strconv.FormatBool(x))
	case json.Number:
		b.WriteString(x.String())
	case string:
		b.WriteString(quoteJSON(x))
	case []any:
		b.WriteByte('[')
		for i, e := range x {
			if i > 0 {
				b.WriteString(", ")
			}
			writeJSON(b, e)
		}
		b.WriteByte(']')
	case *object:
		b.WriteByte('{')
		for i, k := range x.keys {
			if i > 0 {
				b.WriteString(", ")
			}
			b.WriteString(quoteJSON(k))
			b.WriteString(": ")
			writeJSON(b, x.vals[k])
		}
		b.WriteByte('}')
	}
}

// quoteJSON is s as a JSON string, escaping only what JSON requires.
func quoteJSON(s string) string {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.Encode(s)
	return strings.TrimSuffix(buf.String(), "\n")
}

// object is a JSON object that keeps the order of its members, which
// decides the order a schema's properties are generated in.
type object struct {
	keys []string
	vals map[string]any
}

func (o *object) get(k string) (any, bool) {
	v, ok := o.vals[k]
	return v, ok
}

// decodeOrdered decodes one JSON document: objects as *object, numbers as
// json.Number, and the rest as encoding/json does.
func decodeOrdered(data []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	v, err := decodeValue(dec, 0)
	if err != nil {
		return nil, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, fmt.Errorf("data after the JSON value")
	}
	return v, nil
}

// maxNesting bounds the depth of a schema document, and the nesting of
// groups in a regular expression or a GBNF rule, so that a request cannot
// run the parser and the compiler deep into the stack.
const maxNesting = 256

func decodeValue(dec *json.Decoder, depth int) (any, error) {
	if depth > maxNesting {
		return nil, fmt.Errorf("nested deeper than %d", maxNesting)
	}
	t, err := dec.Token()
	if err != nil {
		return nil, err
	}
	switch d := t.(type) {
	case json.Delim:
		switch d {
		case '{':
			o := &object{vals: map[string]any{}}
			for dec.More() {
				kt, err := dec.Token()
				if err != nil {
					return nil, err
				}
				k := kt.(string)
				v, err := decodeValue(dec, depth+1)
				if err != nil {
					return nil, err
				}
				if _, dup := o.vals[k]; !dup {
					o.keys = append(o.keys, k)
				}
				o.vals[k] = v
			}
			_, err := dec.Token()
			return o, err
		case '[':
			a := []any{}
			for dec.More() {
				v, err := decodeValue(dec, depth+1)
				if err != nil {
					return nil, err
				}
				a = append(a, v)
			}
			_, err := dec.Token()
			return a, err
		}
	}
	return t, nil
}

// numberValue is n as a float64, when it is finite.
func numberValue(v any) (float64, bool) {
	n, ok := v.(json.Number)
	if !ok {
		return 0, false
	}
	f, err := n.Float64()
	return f, err == nil && !math.IsInf(f, 0) && !math.IsNaN(f)
}
