package chat

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"unicode/utf16"

	"github.com/nikolalohinski/gonja/v2/exec"
)

// jsonOptions are the arguments of Python's json.dumps that transformers'
// tojson filter passes through.
type jsonOptions struct {
	indent      string // nil indent is hasIndent false
	hasIndent   bool
	itemSep     string
	keySep      string
	sortKeys    bool
	ensureASCII bool
}

// newJSONOptions applies json.dumps' defaults: separators (", ", ": "), or
// (",", ": ") when an indent is given.
func newJSONOptions(indent *exec.Value, separators *exec.Value, sortKeys, ensureASCII bool) (jsonOptions, error) {
	o := jsonOptions{itemSep: ", ", keySep: ": ", sortKeys: sortKeys, ensureASCII: ensureASCII}
	switch kindOf(indent) {
	case kindUndefined, kindNone:
	case kindInt, kindBool:
		o.hasIndent = true
		o.indent = strings.Repeat(" ", max(0, int(resolvedInt(indent))))
		if kindOf(indent) == kindBool {
			o.indent = strings.Repeat(" ", int(toFloat(indent)))
		}
	case kindString:
		o.hasIndent = true
		o.indent = indent.String()
	default:
		return o, fmt.Errorf("tojson: indent must be an int or a string, not %s", typeName(indent))
	}
	if o.hasIndent {
		o.itemSep = ","
	}
	switch kindOf(separators) {
	case kindUndefined, kindNone:
	case kindList:
		parts := listItems(separators)
		if len(parts) != 2 || kindOf(parts[0]) != kindString || kindOf(parts[1]) != kindString {
			return o, fmt.Errorf("tojson: separators must be a pair of strings")
		}
		o.itemSep, o.keySep = parts[0].String(), parts[1].String()
	default:
		return o, fmt.Errorf("tojson: separators must be a pair of strings, not %s", typeName(separators))
	}
	return o, nil
}

// pyJSON is Python's json.dumps(v, ...) with the given options.
func pyJSON(v *exec.Value, o jsonOptions) (string, error) {
	var b strings.Builder
	if err := writeJSON(&b, v, o, 0); err != nil {
		return "", err
	}
	return b.String(), nil
}

func writeJSON(b *strings.Builder, v *exec.Value, o jsonOptions, level int) error {
	if level > maxDepth {
		return errTooDeep
	}
	switch kindOf(v) {
	case kindNone:
		b.WriteString("null")
	case kindBool:
		if toFloat(v) != 0 {
			b.WriteString("true")
		} else {
			b.WriteString("false")
		}
	case kindInt:
		b.WriteString(intText(v))
	case kindFloat:
		b.WriteString(jsonFloat(toFloat(v)))
	case kindString:
		writeJSONString(b, v.String(), o.ensureASCII)
	case kindList:
		items := listItems(v)
		if len(items) == 0 {
			b.WriteString("[]")
			return nil
		}
		b.WriteByte('[')
		for i, e := range items {
			if i > 0 {
				b.WriteString(o.itemSep)
			}
			o.newline(b, level+1)
			if err := writeJSON(b, e, o, level+1); err != nil {
				return err
			}
		}
		o.newline(b, level)
		b.WriteByte(']')
	case kindDict:
		pairs := dictPairs(v)
		if len(pairs) == 0 {
			b.WriteString("{}")
			return nil
		}
		keys := make([]string, len(pairs))
		for i, p := range pairs {
			k, err := jsonKey(p.Key)
			if err != nil {
				return err
			}
			keys[i] = k
		}
		order := make([]int, len(pairs))
		for i := range order {
			order[i] = i
		}
		if o.sortKeys {
			slices.SortStableFunc(order, func(x, y int) int { return strings.Compare(keys[x], keys[y]) })
		}
		b.WriteByte('{')
		for n, i := range order {
			if n > 0 {
				b.WriteString(o.itemSep)
			}
			o.newline(b, level+1)
			writeJSONString(b, keys[i], o.ensureASCII)
			b.WriteString(o.keySep)
			if err := writeJSON(b, pairs[i].Value, o, level+1); err != nil {
				return err
			}
		}
		o.newline(b, level)
		b.WriteByte('}')
	default:
		return fmt.Errorf("TypeError: Object of type %s is not JSON serializable", typeName(v))
	}
	return nil
}

func (o jsonOptions) newline(b *strings.Builder, level int) {
	if o.hasIndent {
		b.WriteByte('\n')
		b.WriteString(strings.Repeat(o.indent, level))
	}
}

// jsonKey turns a dict key into the string json.dumps writes for it.
func jsonKey(k *exec.Value) (string, error) {
	switch kindOf(k) {
	case kindString:
		return k.String(), nil
	case kindInt:
		return intText(k), nil
	case kindFloat:
		return jsonFloat(toFloat(k)), nil
	case kindBool:
		if toFloat(k) != 0 {
			return "true", nil
		}
		return "false", nil
	case kindNone:
		return "null", nil
	}
	return "", fmt.Errorf("TypeError: keys must be str, int, float, bool or None, not %s", typeName(k))
}

func jsonFloat(f float64) string {
	switch {
	case math.IsInf(f, 1):
		return "Infinity"
	case math.IsInf(f, -1):
		return "-Infinity"
	case math.IsNaN(f):
		return "NaN"
	}
	return formatPyFloat(f)
}

// writeJSONString quotes s as json.dumps does: only ", \ and control
// characters are escaped, and with ensureASCII everything past ASCII too.
func writeJSONString(b *strings.Builder, s string, ensureASCII bool) {
	b.WriteByte('"')
	for _, r := range s {
		switch r {
		case '"':
			b.WriteString(`\"`)
		case '\\':
			b.WriteString(`\\`)
		case '\n':
			b.WriteString(`\n`)
		case '\r':
			b.WriteString(`\r`)
		case '\t':
			b.WriteString(`\t`)
		case '\b':
			b.WriteString(`\b`)
		case '\f':
			b.WriteString(`\f`)
		default:
			switch {
			case r < 0x20:
				fmt.Fprintf(b, `\u%04x`, r)
			case ensureASCII && r > 0x7e:
				if r >= 0x10000 {
					hi, lo := utf16.EncodeRune(r)
					fmt.Fprintf(b, `\u%04x\u%04x`, hi, lo)
				} else {
					fmt.Fprintf(b, `\u%04x`, r)
				}
			default:
				b.WriteRune(r)
			}
		}
	}
	b.WriteByte('"')
}
