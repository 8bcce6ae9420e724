package chat

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/nikolalohinski/gonja/v2/exec"
)

// percentFormat is Python's printf-style str % args, which Jinja2's format
// filter applies: %s, %r, %d, %i, %f, %e, %g, %x, %o, %c and %%, with flags,
// width and precision, and %(name)s keys taken from keyword arguments.
func percentFormat(format string, params *exec.VarArgs) (string, error) {
	var b strings.Builder
	next := 0
	for i := 0; i < len(format); i++ {
		c := format[i]
		if c != '%' {
			b.WriteByte(c)
			continue
		}
		i++
		if i >= len(format) {
			return "", fmt.Errorf("incomplete format")
		}
		var arg *exec.Value
		if format[i] == '(' {
			end := strings.IndexByte(format[i:], ')')
			if end < 0 {
				return "", fmt.Errorf("incomplete format key")
			}
			key := format[i+1 : i+end]
			v, ok := params.KwArgs[key]
			if !ok {
				return "", fmt.Errorf("KeyError: '%s'", key)
			}
			arg = v
			i += end + 1
		}
		start := i
		for i < len(format) && strings.IndexByte("-+ #0", format[i]) >= 0 {
			i++
		}
		flags := format[start:i]
		for i < len(format) && format[i] >= '0' && format[i] <= '9' {
			i++
		}
		width := format[start+len(flags) : i]
		prec := ""
		if i < len(format) && format[i] == '.' {
			j := i + 1
			for j < len(format) && format[j] >= '0' && format[j] <= '9' {
				j++
			}
			prec = format[i:j]
			if prec == "." {
				prec = ".0"
			}
			i = j
		}
		if i >= len(format) {
			return "", fmt.Errorf("incomplete format")
		}
		verb := format[i]
		if verb == '%' {
			b.WriteByte('%')
			continue
		}
		if arg == nil {
			if next >= len(params.Args) {
				return "", fmt.Errorf("not enough arguments for format string")
			}
			arg = params.Args[next]
			next++
		}
		s, err := formatOne(arg, verb, flags, width, prec)
		if err != nil {
			return "", err
		}
		b.WriteString(s)
	}
	if next < len(params.Args) {
		return "", fmt.Errorf("not all arguments converted during string formatting")
	}
	return b.String(), nil
}

func formatOne(v *exec.Value, verb byte, flags, width, prec string) (string, error) {
	spec := "%" + flags + width + prec
	switch verb {
	case 's', 'r', 'a':
		s := pyStr(v)
		if verb != 's' {
			s = pyRepr(v)
		}
		if prec != "" {
			n, _ := strconv.Atoi(prec[1:])
			if r := []rune(s); len(r) > n {
				s = string(r[:n])
			}
		}
		return padField(s, flags, width), nil
	case 'd', 'i', 'u':
		if k := kindOf(v); k != kindInt && k != kindFloat && k != kindBool {
			return "", fmt.Errorf("%%%c format: a real number is required, not %s", verb, typeName(v))
		}
		return fmt.Sprintf("%"+flags+width+"d", int64(math.Trunc(toFloat(v)))), nil
	case 'x', 'X', 'o':
		if k := kindOf(v); k != kindInt && k != kindBool {
			return "", fmt.Errorf("%%%c format: an integer is required, not %s", verb, typeName(v))
		}
		return fmt.Sprintf(spec+string(verb), int64(toFloat(v))), nil
	case 'f', 'F', 'e', 'E', 'g', 'G':
		if k := kindOf(v); k != kindInt && k != kindFloat && k != kindBool {
			return "", fmt.Errorf("must be real number, not %s", typeName(v))
		}
		if prec == "" {
			spec += ".6"
		}
		return fmt.Sprintf(spec+string(verb), toFloat(v)), nil
	case 'c':
		switch kindOf(v) {
		case kindInt:
			return padField(string(rune(resolvedInt(v))), flags, width), nil
		case kindString:
			if utf8.RuneCountInString(v.String()) == 1 {
				return padField(v.String(), flags, width), nil
			}
		}
		return "", fmt.Errorf("%%c requires int or char")
	}
	return "", fmt.Errorf("unsupported format character '%c'", verb)
}

func padField(s, flags, width string) string {
	w, _ := strconv.Atoi(width)
	n := utf8.RuneCountInString(s)
	if w <= n {
		return s
	}
	if strings.Contains(flags, "-") {
		return s + strings.Repeat(" ", w-n)
	}
	return strings.Repeat(" ", w-n) + s
}

// strFormat is Python's str.format: {} and {0} take positional arguments,
// {name} keyword ones, followed by .attr or [key] lookups, an optional !s,
// !r or !a conversion and a format spec.
func strFormat(format string, params *exec.VarArgs) (string, error) {
	var b strings.Builder
	auto := 0
	for i := 0; i < len(format); i++ {
		c := format[i]
		switch {
		case c == '{' && i+1 < len(format) && format[i+1] == '{':
			b.WriteByte('{')
			i++
			continue
		case c == '}' && i+1 < len(format) && format[i+1] == '}':
			b.WriteByte('}')
			i++
			continue
		case c == '}':
			return "", errors.New("ValueError: Single '}' encountered in format string")
		case c != '{':
			b.WriteByte(c)
			continue
		}
		end, depth := i+1, 1
		for ; end < len(format); end++ {
			if format[end] == '{' {
				depth++
			} else if format[end] == '}' {
				depth--
				if depth == 0 {
					break
				}
			}
		}
		if end >= len(format) {
			return "", errors.New("ValueError: Single '{' encountered in format string")
		}
		field := format[i+1 : end]
		i = end
		spec := ""
		if k := strings.IndexByte(field, ':'); k >= 0 {
			field, spec = field[:k], field[k+1:]
		}
		conv := byte(0)
		if k := strings.IndexByte(field, '!'); k >= 0 {
			if k+2 != len(field) {
				return "", fmt.Errorf("expected ':' after conversion specifier")
			}
			conv = field[k+1]
			field = field[:k]
		}
		name := field
		rest := ""
		if k := strings.IndexAny(field, ".["); k >= 0 {
			name, rest = field[:k], field[k:]
		}
		var v *exec.Value
		switch {
		case name == "":
			if auto < 0 {
				return "", fmt.Errorf("cannot switch from manual field specification to automatic field numbering")
			}
			if auto >= len(params.Args) {
				return "", fmt.Errorf("IndexError: Replacement index %d out of range for positional args tuple", auto)
			}
			v = params.Args[auto]
			auto++
		case name[0] >= '0' && name[0] <= '9':
			n, err := strconv.Atoi(name)
			if err != nil || n >= len(params.Args) {
				return "", fmt.Errorf("IndexError: Replacement index %s out of range for positional args tuple", name)
			}
			if auto > 0 {
				return "", fmt.Errorf("cannot switch from automatic field numbering to manual field specification")
			}
			auto = -1
			v = params.Args[n]
		default:
			kv, ok := params.KwArgs[name]
			if !ok {
				return "", fmt.Errorf("KeyError: '%s'", name)
			}
			v = kv
		}
		for rest != "" {
			var key string
			if rest[0] == '.' {
				k := strings.IndexAny(rest[1:], ".[")
				if k < 0 {
					key, rest = rest[1:], ""
				} else {
					key, rest = rest[1:k+1], rest[k+1:]
				}
				v = getItem(v, exec.AsValue(key))
				continue
			}
			k := strings.IndexByte(rest, ']')
			if k < 0 {
				return "", errors.New("ValueError: Missing ']' in format string")
			}
			key, rest = rest[1:k], rest[k+1:]
			if n, err := strconv.Atoi(key); err == nil {
				v = getItem(v, exec.AsValue(n))
			} else {
				v = getItem(v, exec.AsValue(key))
			}
		}
		switch conv {
		case 0:
		case 's':
			v = exec.AsValue(pyStr(v))
		case 'r', 'a':
			v = exec.AsValue(pyRepr(v))
		default:
			return "", fmt.Errorf("ValueError: Unknown conversion specifier %c", conv)
		}
		s, err := formatSpec(v, spec)
		if err != nil {
			return "", err
		}
		b.WriteString(s)
	}
	return b.String(), nil
}

// formatSpec is Python's format(v, spec) for the common mini-language:
// [[fill]align][sign][0][width][,][.precision][type].
func formatSpec(v *exec.Value, spec string) (string, error) {
	if spec == "" {
		return pyStr(v), nil
	}
	r := []rune(spec)
	i := 0
	fill, align := ' ', rune(0)
	if len(r) >= 2 && strings.ContainsRune("<>^=", r[1]) {
		fill, align, i = r[0], r[1], 2
	} else if len(r) >= 1 && strings.ContainsRune("<>^=", r[0]) {
		align, i = r[0], 1
	}
	sign := rune(0)
	if i < len(r) && strings.ContainsRune("+- ", r[i]) {
		sign = r[i]
		i++
	}
	if i < len(r) && r[i] == '0' {
		if align == 0 {
			fill, align = '0', '='
		}
		i++
	}
	w := 0
	for i < len(r) && r[i] >= '0' && r[i] <= '9' {
		w = w*10 + int(r[i]-'0')
		i++
	}
	comma := false
	if i < len(r) && r[i] == ',' {
		comma = true
		i++
	}
	prec := -1
	if i < len(r) && r[i] == '.' {
		i++
		prec = 0
		for i < len(r) && r[i] >= '0' && r[i] <= '9' {
			prec = prec*10 + int(r[i]-'0')
			i++
		}
	}
	typ := rune(0)
	if i < len(r) {
		typ = r[i]
		i++
	}
	if i != len(r) {
		return "", fmt.Errorf("ValueError: Invalid format specifier '%s'", spec)
	}
	var s string
	numeric := false
	switch k := kindOf(v); {
	case k == kindString && (typ == 0 || typ == 's'):
		s = v.String()
		if prec >= 0 {
			if rs := []rune(s); len(rs) > prec {
				s = string(rs[:prec])
			}
		}
		if align == 0 {
			align = '<'
		}
	case (k == kindInt || k == kindBool) && (typ == 0 || typ == 'd' || typ == 'n'):
		numeric = true
		s = strconv.FormatInt(int64(toFloat(v)), 10)
		if comma {
			s = groupThousands(s)
		}
	case (k == kindInt || k == kindBool || k == kindFloat) && typ != 0 && strings.ContainsRune("eEfFgG%xXob", typ):
		numeric = true
		f := toFloat(v)
		p := prec
		if p < 0 {
			p = 6
		}
		switch typ {
		case '%':
			s = strconv.FormatFloat(f*100, 'f', p, 64) + "%"
		case 'x', 'X', 'o', 'b':
			s = strconv.FormatInt(int64(f), map[rune]int{'x': 16, 'X': 16, 'o': 8, 'b': 2}[typ])
			if typ == 'X' {
				s = strings.ToUpper(s)
			}
		case 'g', 'G':
			s = strconv.FormatFloat(f, byte(typ), max(p, 1), 64)
		default:
			s = strconv.FormatFloat(f, byte(typ), p, 64)
		}
	case k == kindFloat && typ == 0:
		numeric = true
		if prec >= 0 {
			s = strconv.FormatFloat(toFloat(v), 'g', max(prec, 1), 64)
		} else {
			s = formatPyFloat(toFloat(v))
		}
	default:
		return "", fmt.Errorf("ValueError: Unknown format code '%c' for object of type '%s'", typ, typeName(v))
	}
	if numeric {
		neg := strings.HasPrefix(s, "-")
		if neg {
			s = s[1:]
		}
		prefix := ""
		switch {
		case neg:
			prefix = "-"
		case sign == '+':
			prefix = "+"
		case sign == ' ':
			prefix = " "
		}
		if align == '=' {
			if pad := w - len(prefix) - utf8.RuneCountInString(s); pad > 0 {
				s = strings.Repeat(string(fill), pad) + s
			}
		}
		s = prefix + s
		if align == 0 {
			align = '>'
		}
	}
	n := utf8.RuneCountInString(s)
	if w > n {
		pad := w - n
		switch align {
		case '<':
			s += strings.Repeat(string(fill), pad)
		case '^':
			s = strings.Repeat(string(fill), pad/2) + s + strings.Repeat(string(fill), pad-pad/2)
		default:
			s = strings.Repeat(string(fill), pad) + s
		}
	}
	return s, nil
}

func groupThousands(s string) string {
	neg := strings.HasPrefix(s, "-")
	if neg {
		s = s[1:]
	}
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	if neg {
		return "-" + b.String()
	}
	return b.String()
}
