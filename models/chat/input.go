package chat

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"reflect"
	"slices"
	"strconv"
	"strings"

	"github.com/nikolalohinski/gonja/v2/exec"
)

// maxDepth bounds the nesting of input values, so hostile input gets an
// error instead of a stack overflow.
const maxDepth = 256

var errTooDeep = errors.New("chat template input nested too deeply")

// templateValue converts a Go value from the caller into the form the
// template engine works on: objects become ordered gonja dicts, arrays []any,
// integers int, null None. json.RawMessage is decoded keeping key order and
// the int/float distinction, as Python's json.loads would; a float64 that
// holds an integer is taken to be a JSON integer (encoding/json turns 3 into
// 3.0); maps of other origin are ordered by key, and structs go through
// encoding/json so their fields keep declaration order.
func templateValue(v any, depth int) (any, error) {
	if depth > maxDepth {
		return nil, errTooDeep
	}
	switch x := v.(type) {
	case nil:
		return none, nil
	case noneType, string, bool, int:
		return x, nil
	case json.RawMessage:
		return decodeJSON(x)
	case json.Number:
		return jsonNumber(x)
	case float64:
		return floatValue(x), nil
	case float32:
		return floatValue(float64(x)), nil
	case map[string]any:
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		pairs := make([]*exec.Pair, 0, len(keys))
		for _, k := range keys {
			e, err := templateValue(x[k], depth+1)
			if err != nil {
				return nil, err
			}
			pairs = append(pairs, &exec.Pair{Key: exec.AsValue(k), Value: exec.AsValue(e)})
		}
		return newDict(pairs), nil
	case []any:
		out := make(pyList, len(x))
		for i, e := range x {
			c, err := templateValue(e, depth+1)
			if err != nil {
				return nil, err
			}
			out[i] = c
		}
		return out, nil
	}
	rv := reflect.ValueOf(v)
	switch rv.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return int(rv.Int()), nil
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		if rv.Uint() > math.MaxInt64 {
			return float64(rv.Uint()), nil
		}
		return int(rv.Uint()), nil
	case reflect.String:
		return rv.String(), nil
	case reflect.Bool:
		return rv.Bool(), nil
	case reflect.Pointer, reflect.Interface:
		if rv.IsNil() {
			return none, nil
		}
		if rv.Kind() == reflect.Interface {
			return templateValue(rv.Elem().Interface(), depth+1)
		}
	case reflect.Slice, reflect.Array:
		if rv.Kind() == reflect.Slice && rv.IsNil() {
			return none, nil
		}
		if rv.Type().Elem().Kind() != reflect.Uint8 {
			out := make(pyList, rv.Len())
			for i := range out {
				c, err := templateValue(rv.Index(i).Interface(), depth+1)
				if err != nil {
					return nil, err
				}
				out[i] = c
			}
			return out, nil
		}
	case reflect.Map:
		if rv.IsNil() {
			return none, nil
		}
		if rv.Type().Key().Kind() == reflect.String {
			m := make(map[string]any, rv.Len())
			for it := rv.MapRange(); it.Next(); {
				m[it.Key().String()] = it.Value().Interface()
			}
			return templateValue(m, depth)
		}
	}
	// Anything else is taken as JSON, the form the API layer's types are
	// made to have.
	raw, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("chat template input of type %T: %w", v, err)
	}
	return decodeJSON(raw)
}

// floatValue keeps integral floats as ints: JSON that said 3 decodes to
// float64 3 in Go, but to int 3 in Python, which renders as "3".
func floatValue(f float64) any {
	if f == math.Trunc(f) && math.Abs(f) < 1<<53 {
		return int(f)
	}
	return f
}

func jsonNumber(n json.Number) (any, error) {
	if i, err := strconv.ParseInt(string(n), 10, 64); err == nil {
		return int(i), nil
	}
	if isDecimalInteger(string(n)) {
		return bigInt(n), nil
	}
	f, err := strconv.ParseFloat(string(n), 64)
	if err != nil {
		return nil, fmt.Errorf("chat template input: bad number %q", n)
	}
	return f, nil
}

// decodeJSON decodes one JSON value keeping object key order.
func decodeJSON(raw []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	v, err := decodeJSONValue(dec, 0)
	if err != nil {
		return nil, fmt.Errorf("chat template input: %w", err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, errors.New("chat template input: trailing data after JSON value")
	}
	return v, nil
}

func decodeJSONValue(dec *json.Decoder, depth int) (any, error) {
	if depth > maxDepth {
		return nil, errTooDeep
	}
	tok, err := dec.Token()
	if err != nil {
		return nil, err
	}
	switch t := tok.(type) {
	case nil:
		return none, nil
	case bool, string:
		return t, nil
	case json.Number:
		return jsonNumber(t)
	case json.Delim:
		switch t {
		case '[':
			out := pyList{}
			for dec.More() {
				e, err := decodeJSONValue(dec, depth+1)
				if err != nil {
					return nil, err
				}
				out = append(out, e)
			}
			if _, err := dec.Token(); err != nil {
				return nil, err
			}
			return out, nil
		case '{':
			d := &exec.Dict{Pairs: []*exec.Pair{}}
			at := map[string]int{}
			for dec.More() {
				kt, err := dec.Token()
				if err != nil {
					return nil, err
				}
				k, ok := kt.(string)
				if !ok {
					return nil, errors.New("object key is not a string")
				}
				e, err := decodeJSONValue(dec, depth+1)
				if err != nil {
					return nil, err
				}
				// A repeated key keeps its first place and its last value, as
				// in a Python dict.
				if i, ok := at[k]; ok {
					d.Pairs[i].Value = exec.AsValue(e)
					continue
				}
				at[k] = len(d.Pairs)
				d.Pairs = append(d.Pairs, &exec.Pair{Key: exec.AsValue(k), Value: exec.AsValue(e)})
			}
			if _, err := dec.Token(); err != nil {
				return nil, err
			}
			return newDict(d.Pairs), nil
		}
	}
	return nil, fmt.Errorf("unexpected JSON token %v", tok)
}

func isDecimalInteger(s string) bool {
	s = strings.TrimPrefix(s, "-")
	if s == "" {
		return false
	}
	for _, c := range s {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}
