package chat

import (
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Python's str methods, on Go strings. Indexes and widths count code points,
// as Python does.

// isUnicodeSpace is Python's str.isspace for one character: Go's notion of
// white space plus the four ASCII information separators.
func isUnicodeSpace(r rune) bool {
	return unicode.IsSpace(r) || (r >= 0x1c && r <= 0x1f)
}

// pyStrip is str.strip/lstrip/rstrip: with no chars, white space goes.
func pyStrip(s string, chars *string, left, right bool) string {
	cut := isUnicodeSpace
	if chars != nil {
		set := *chars
		cut = func(r rune) bool { return strings.ContainsRune(set, r) }
	}
	if left {
		s = strings.TrimLeftFunc(s, cut)
	}
	if right {
		s = strings.TrimRightFunc(s, cut)
	}
	return s
}

// pySplit is str.split(sep, maxsplit); a nil sep splits on runs of white
// space and drops empty strings.
func pySplit(s string, sep *string, maxsplit int) ([]string, error) {
	if sep == nil {
		var out []string
		rest := strings.TrimLeftFunc(s, isUnicodeSpace)
		for rest != "" {
			if maxsplit >= 0 && len(out) == maxsplit {
				out = append(out, rest)
				break
			}
			i := strings.IndexFunc(rest, isUnicodeSpace)
			if i < 0 {
				out = append(out, rest)
				break
			}
			out = append(out, rest[:i])
			rest = strings.TrimLeftFunc(rest[i:], isUnicodeSpace)
		}
		return out, nil
	}
	if *sep == "" {
		return nil, fmt.Errorf("empty separator")
	}
	if maxsplit < 0 {
		return strings.Split(s, *sep), nil
	}
	return strings.SplitN(s, *sep, maxsplit+1), nil
}

// pyRSplit is str.rsplit(sep, maxsplit).
func pyRSplit(s string, sep *string, maxsplit int) ([]string, error) {
	if maxsplit < 0 {
		return pySplit(s, sep, maxsplit)
	}
	if sep == nil {
		var out []string
		rest := strings.TrimRightFunc(s, isUnicodeSpace)
		for rest != "" {
			if len(out) == maxsplit {
				out = append(out, rest)
				break
			}
			i := strings.LastIndexFunc(rest, isUnicodeSpace)
			if i < 0 {
				out = append(out, rest)
				break
			}
			_, size := utf8.DecodeRuneInString(rest[i:])
			out = append(out, rest[i+size:])
			rest = strings.TrimRightFunc(rest[:i], isUnicodeSpace)
		}
		reverseStrings(out)
		return out, nil
	}
	if *sep == "" {
		return nil, fmt.Errorf("empty separator")
	}
	var out []string
	rest := s
	for len(out) < maxsplit {
		i := strings.LastIndex(rest, *sep)
		if i < 0 {
			break
		}
		out = append(out, rest[i+len(*sep):])
		rest = rest[:i]
	}
	out = append(out, rest)
	reverseStrings(out)
	return out, nil
}

func reverseStrings(s []string) {
	for i, j := 0, len(s)-1; i < j; i, j = i+1, j-1 {
		s[i], s[j] = s[j], s[i]
	}
}

// isLineBreak reports the characters str.splitlines splits on.
func isLineBreak(r rune) bool {
	switch r {
	case '\n', '\r', '\v', '\f', 0x1c, 0x1d, 0x1e, 0x85, 0x2028, 0x2029:
		return true
	}
	return false
}

// pySplitLines is str.splitlines(keepends).
func pySplitLines(s string, keepends bool) []string {
	var out []string
	start := 0
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		if !isLineBreak(r) {
			i += size
			continue
		}
		end := i + size
		if r == '\r' && end < len(s) && s[end] == '\n' {
			end++
		}
		if keepends {
			out = append(out, s[start:end])
		} else {
			out = append(out, s[start:i])
		}
		start, i = end, end
	}
	if start < len(s) {
		out = append(out, s[start:])
	}
	return out
}

// isCased reports a letter that has an upper or lower case form.
func isCased(r rune) bool {
	return unicode.IsUpper(r) || unicode.IsLower(r) || unicode.IsTitle(r)
}

// pyTitle is str.title: a letter after a cased letter is lowered, any other
// letter is title-cased.
func pyTitle(s string) string {
	var b strings.Builder
	prevCased := false
	for _, r := range s {
		if prevCased {
			b.WriteRune(unicode.ToLower(r))
		} else {
			b.WriteRune(unicode.ToTitle(r))
		}
		prevCased = isCased(r)
	}
	return b.String()
}

// pyCapitalize is str.capitalize: the first character title-cased, the rest
// lowered.
func pyCapitalize(s string) string {
	r, size := utf8.DecodeRuneInString(s)
	if size == 0 {
		return s
	}
	return string(unicode.ToTitle(r)) + strings.ToLower(s[size:])
}

// pySwapCase is str.swapcase.
func pySwapCase(s string) string {
	return strings.Map(func(r rune) rune {
		switch {
		case unicode.IsUpper(r):
			return unicode.ToLower(r)
		case unicode.IsLower(r):
			return unicode.ToUpper(r)
		}
		return r
	}, s)
}

// jinjaTitle is Jinja2's title filter: words start after runs of white
// space, hyphens and opening brackets; each word gets its first character
// upper-cased and the rest lowered.
func jinjaTitle(s string) string {
	var b strings.Builder
	atStart := true
	for _, r := range s {
		sep := isUnicodeSpace(r) || strings.ContainsRune("-({[<", r)
		switch {
		case sep:
			b.WriteRune(r)
			atStart = true
		case atStart:
			b.WriteRune(unicode.ToUpper(r))
			atStart = false
		default:
			b.WriteRune(unicode.ToLower(r))
		}
	}
	return b.String()
}

// clampIndexes is Python's handling of the start and end indexes of str
// methods such as find and startswith, for a string of n code points:
// negative indexes count from the end and stop at 0, and end stops at n.
// start may stay past n (or past end), which callers find no match in.
func clampIndexes(n int, start, end *int) (int, int) {
	s, e := 0, n
	if start != nil {
		s = *start
		if s < 0 {
			s += n
			if s < 0 {
				s = 0
			}
		}
	}
	if end != nil {
		e = *end
		if e < 0 {
			e += n
			if e < 0 {
				e = 0
			}
		}
		if e > n {
			e = n
		}
	}
	return s, e
}

// pyFind is str.find(sub, start, end) in code points; -1 when absent.
func pyFind(s, sub string, start, end *int, last bool) int {
	runes := []rune(s)
	st, en := clampIndexes(len(runes), start, end)
	if st > len(runes) || st > en {
		return -1
	}
	window := string(runes[st:en])
	var i int
	if last {
		i = strings.LastIndex(window, sub)
	} else {
		i = strings.Index(window, sub)
	}
	if i < 0 {
		return -1
	}
	return st + utf8.RuneCountInString(window[:i])
}

// pyCount is str.count(sub, start, end).
func pyCount(s, sub string, start, end *int) int {
	runes := []rune(s)
	st, en := clampIndexes(len(runes), start, end)
	if st > en || st > len(runes) {
		return 0
	}
	window := string(runes[st:en])
	if sub == "" {
		return utf8.RuneCountInString(window) + 1
	}
	return strings.Count(window, sub)
}

// pyAffix is str.startswith / str.endswith for one prefix or suffix.
func pyAffix(s, affix string, start, end *int, suffix bool) bool {
	runes := []rune(s)
	st, en := clampIndexes(len(runes), start, end)
	if st > len(runes) {
		return false
	}
	if st > en {
		return false
	}
	window := string(runes[st:en])
	if suffix {
		return strings.HasSuffix(window, affix)
	}
	return strings.HasPrefix(window, affix)
}

// pyPad is str.center / ljust / rjust (how: 'c', 'l', 'r').
func pyPad(s string, width int, fill rune, how byte) string {
	n := utf8.RuneCountInString(s)
	if width <= n {
		return s
	}
	pad := width - n
	f := string(fill)
	switch how {
	case 'l':
		return s + strings.Repeat(f, pad)
	case 'r':
		return strings.Repeat(f, pad) + s
	}
	left := pad / 2
	if pad%2 == 1 && width%2 == 1 {
		left++
	}
	return strings.Repeat(f, left) + s + strings.Repeat(f, pad-left)
}

// pyZFill is str.zfill.
func pyZFill(s string, width int) string {
	n := utf8.RuneCountInString(s)
	if width <= n {
		return s
	}
	sign := ""
	if s != "" && (s[0] == '+' || s[0] == '-') {
		sign, s = s[:1], s[1:]
	}
	return sign + strings.Repeat("0", width-n) + s
}

// stringPredicate is str.isalpha and friends: true when s is not empty and
// every character (or, for islower/isupper, every cased one) passes.
func stringPredicate(s string, name string) bool {
	if s == "" {
		return name == "isascii" || name == "isprintable"
	}
	switch name {
	case "islower", "isupper":
		cased := false
		for _, r := range s {
			if unicode.IsUpper(r) || unicode.IsTitle(r) {
				if name == "islower" {
					return false
				}
				cased = true
			} else if unicode.IsLower(r) {
				if name == "isupper" {
					return false
				}
				cased = true
			}
		}
		return cased
	case "istitle":
		return s == pyTitle(s) && strings.IndexFunc(s, isCased) >= 0
	}
	for _, r := range s {
		var ok bool
		switch name {
		case "isalpha":
			ok = unicode.IsLetter(r)
		case "isalnum":
			ok = unicode.IsLetter(r) || unicode.IsNumber(r)
		case "isdigit", "isdecimal":
			ok = unicode.IsDigit(r)
		case "isnumeric":
			ok = unicode.IsNumber(r)
		case "isspace":
			ok = isUnicodeSpace(r)
		case "isascii":
			ok = r < utf8.RuneSelf
		case "isprintable":
			ok = isPrintable(r)
		}
		if !ok {
			return false
		}
	}
	return true
}

// upperSpecial holds the characters whose upper case is several characters
// (Unicode's SpecialCasing), which Go's per-rune mapping leaves alone.
var upperSpecial = map[rune]string{
	'ß': "SS", 'ŉ': "ʼN", 'ǰ': "J̌", 'ΐ': "Ϊ́", 'ΰ': "Ϋ́", 'և': "ԵՒ",
	'ẖ': "H̱", 'ẗ': "T̈", 'ẘ': "W̊", 'ẙ': "Y̊", 'ẚ': "Aʾ",
	'ﬀ': "FF", 'ﬁ': "FI", 'ﬂ': "FL", 'ﬃ': "FFI", 'ﬄ': "FFL", 'ﬅ': "ST", 'ﬆ': "ST",
}

// pyUpper is str.upper with full case mapping.
func pyUpper(s string) string {
	var b strings.Builder
	for _, r := range s {
		if u, ok := upperSpecial[r]; ok {
			b.WriteString(u)
			continue
		}
		b.WriteRune(unicode.ToUpper(r))
	}
	return b.String()
}

// pyLower is str.lower with full case mapping: İ lowers to i and a
// combining dot, and a final capital sigma to ς.
func pyLower(s string) string {
	var b strings.Builder
	runes := []rune(s)
	for i, r := range runes {
		switch {
		case r == 'İ':
			b.WriteString("i̇")
		case r == 'Σ' && finalSigma(runes, i):
			b.WriteRune('ς')
		default:
			b.WriteRune(unicode.ToLower(r))
		}
	}
	return b.String()
}

// finalSigma applies Unicode's Final_Sigma condition: a cased letter
// before, none after.
func finalSigma(runes []rune, i int) bool {
	before := false
	for k := i - 1; k >= 0; k-- {
		if isCased(runes[k]) {
			before = true
			break
		}
		if !unicode.Is(unicode.Mn, runes[k]) && runes[k] != '\'' {
			break
		}
	}
	if !before {
		return false
	}
	for k := i + 1; k < len(runes); k++ {
		if isCased(runes[k]) {
			return false
		}
		if !unicode.Is(unicode.Mn, runes[k]) && runes[k] != '\'' {
			break
		}
	}
	return true
}

// pyCasefold is str.casefold for the common cases: lower case, with ß
// folded to ss.
func pyCasefold(s string) string {
	return strings.ReplaceAll(pyLower(s), "ß", "ss")
}
