package grammar

import (
	"errors"
	"regexp"
	"strings"
	"testing"
	"unicode"
)

// regexCases are Python patterns with texts: yes and no as Python 3.11's
// re.fullmatch reads them, and narrowed those Python accepts but the
// grammar leaves out by design (Unicode digits for \d, whitespace beyond
// ASCII for \s, marks for \W: see pyWord).
var regexCases = []struct {
	pattern           string
	yes, no, narrowed []string
}{
	{`[a-z]+`, []string{"abc", "z"}, []string{"", "aB", "é", "abc\n"}, nil},
	{`(cat|dog)s?`, []string{"cat", "dogs", "cats"}, []string{"catdog", "bird", "cat "}, nil},
	{`\d{3}-\d{4}`, []string{"555-1234"}, []string{"5551234", "555-123", "555-12345"}, []string{"٣٣٣-1234"}},
	{`\w+@\w+\.com`, []string{"a@b.com", "café@x_1.com"}, []string{"a@b.org", "@b.com", "a b@c.com", "a-b@c.com"}, nil},
	{`[^\d\s]+`, []string{"abc", "é日"}, []string{"a1", "a b", "٣", "a\u00a0", ""}, nil},
	{`\D+`, []string{"abc", "\n"}, []string{"a1", "٣"}, nil},
	{`\W+`, []string{"!?", " \n"}, []string{"a", "_", "é"}, []string{"\u0301"}},
	{`\S+`, []string{"abc", "é"}, []string{"a b", "\u00a0", "\u2003", "\x1c"}, nil},
	{`\s+`, []string{" \t\n\r\x0c\x0b"}, []string{"a", ""}, []string{"\u00a0", "\u3000"}},
	{`a.c`, []string{"abc", "a\rc", "aéc", "a😀c"}, []string{"a\nc", "ac"}, nil},
	{`(?P<year>\d{4})-(?:0[1-9]|1[0-2])`, []string{"2024-01", "2024-12"}, []string{"2024-13", "2024-00", "24-01"}, nil},
	{`x{2,}y{,2}z{3}`, []string{"xxzzz", "xxxyyzzz"}, []string{"xyzzz", "xxyyyzzz", "xxzz"}, nil},
	{`^abc$`, []string{"abc"}, []string{"abc\n", "abcd"}, nil},
	{`\Aabc\Z`, []string{"abc"}, []string{"abc\n"}, nil},
	{`[]a]+`, []string{"]", "a]a"}, []string{"b", ""}, nil},
	{`[^]a]`, []string{"b", "é"}, []string{"]", "a"}, nil},
	{`\x41\u00e9\U0001F600`, []string{"Aé😀"}, []string{`A\u00e9`}, nil},
	{`\101\0`, []string{"A\x00"}, []string{"A0"}, nil},
	{`a{`, []string{"a{"}, []string{"a"}, nil},
	{`a{x}`, []string{"a{x}"}, []string{"ax"}, nil},
	{`a{,}`, []string{"", "aaa"}, []string{"a{,}"}, nil},
	{`(?#a comment)ab`, []string{"ab"}, []string{"a"}, nil},
	{`colou?r|gr[ae]y`, []string{"color", "colour", "gray", "grey"}, []string{"griy", "colr"}, nil},
	{`[\w.-]+`, []string{"a.b-c_d", "é.x", "-"}, []string{"a b"}, nil},
	{`[α-ω]+`, []string{"αβγ", "ω"}, []string{"Α", "a"}, nil},
	{`(a|b)*?c`, []string{"c", "ababc"}, []string{"abca"}, nil},
	{`[\b]`, []string{"\x08"}, []string{"b"}, nil},
	{`\.\*\+\?\(\)\[\]\{\}\|\\\^\$`, []string{`.*+?()[]{}|\^$`}, []string{"a"}, nil},
	{`é+`, []string{"é", "ééé"}, []string{"e\u0301"}, nil},
	{`[^a-z]`, []string{"A", "é", "\n"}, []string{"a", ""}, nil},
	{`(ab){2,3}`, []string{"abab", "ababab"}, []string{"ab", "abababab"}, nil},
	{`a|`, []string{"a", ""}, []string{"b"}, nil},
	{`(a|b)c|d$`, []string{"ac", "bc", "d"}, []string{"ad"}, nil},
	{`[\s\S]`, []string{"\n", "a", "é"}, []string{""}, nil},
	{`[^\W\d_]+`, []string{"abc", "é", "日本"}, []string{"a1", "a_"}, nil},
	{`\t\n\r\f\v\a`, []string{"\t\n\r\x0c\x0b\x07"}, nil, nil},
}

func TestRegex(t *testing.T) {
	for _, tc := range regexCases {
		t.Run(tc.pattern, func(t *testing.T) {
			g, err := Regex(tc.pattern)
			if err != nil {
				t.Fatal(err)
			}
			checkStrings(t, g, tc.yes, append(tc.no, tc.narrowed...))
		})
	}
}

func TestRegexErrors(t *testing.T) {
	tests := []struct {
		pattern string
		col     int
		msg     string
	}{
		{`a(?=b)`, 2, "lookaround"},
		{`(?<!a)b`, 1, "lookaround"},
		{`(a)\1`, 4, "backreferences"},
		{`(?P<x>a)(?P=x)`, 9, "backreferences"},
		{`(?i)abc`, 1, "inline flags"},
		{`(?s:.)`, 1, "inline flags"},
		{`(?>a)`, 1, "atomic groups"},
		{`(?(1)a|b)`, 1, "conditional"},
		{`a*+`, 3, "possessive"},
		{`a{2}{3}`, 5, "quantifier after a quantifier"},
		{`\bword\b`, 1, "word boundaries"},
		{`\N{DASH}`, 1, "named characters"},
		{`\q`, 1, "bad escape \\q"},
		{`\p{L}`, 1, "bad escape \\p"},
		{`a^b`, 2, "only at the start"},
		{`a$b`, 2, "only at the end"},
		{`(a\Z)`, 3, "only at the end"},
		{`*a`, 1, "nothing to repeat"},
		{`{2}`, 1, "nothing to repeat"},
		{`(ab`, 1, "missing )"},
		{`ab)`, 3, "unbalanced )"},
		{`[ab`, 1, "missing ]"},
		{`[]`, 1, "missing ]"},
		{`[z-a]`, 2, "bad range"},
		{`x{3,2}`, 2, "bounds crossed"},
		{`x{70000}`, 2, "too large"},
		{`\x4`, 1, "short hexadecimal"},
		{`\U00110000`, 1, "above U+10FFFF"},
		{`a\`, 2, "trailing backslash"},
		{`(?#open`, 1, "missing )"},
		{strings.Repeat("(", maxNesting+2) + strings.Repeat(")", maxNesting+2), maxNesting + 2, "nested more than"},
		{`a\xff\xfe`, 0, ""},
	}
	for _, tc := range tests {
		t.Run(tc.pattern[:min(len(tc.pattern), 20)], func(t *testing.T) {
			g, err := Regex(tc.pattern)
			if tc.msg == "" {
				if err != nil {
					t.Errorf("%v, want none", err)
				}
				return
			}
			var se *SyntaxError
			if g != nil || !errors.As(err, &se) || !errors.Is(err, ErrGrammar) {
				t.Fatalf("Regex: %v, want a *SyntaxError", err)
			}
			if se.Column != tc.col || !strings.Contains(se.Msg, tc.msg) {
				t.Errorf("%v: want column %d and %q", err, tc.col, tc.msg)
			}
		})
	}
	if _, err := Regex("a" + string([]byte{0xff})); !errors.Is(err, ErrGrammar) {
		t.Errorf("a pattern of invalid UTF-8: %v", err)
	}
}

// TestRegexMatcher follows patterns with a Matcher and checks each whole
// output with Go's regexp (where RE2 reads the pattern as Python does) or
// by hand.
func TestRegexMatcher(t *testing.T) {
	re := func(pattern string) func() (*Grammar, error) {
		return func() (*Grammar, error) { return Regex(pattern) }
	}
	oracle := func(pattern string) func(string) bool {
		return regexp.MustCompile(`^(?:` + pattern + `)$`).MatchString
	}
	checkMatcher(t, []matcherCase{
		{"phone", re(`\(?\d{3}\)? ?\d{3}-\d{4}`), "()0123456789- x", oracle(`\(?\d{3}\)? ?\d{3}-\d{4}`)},
		{"email", re(`[a-z0-9._]+@[a-z]+\.(com|org)`), "abz09._@.comrgx", oracle(`[a-z0-9._]+@[a-z]+\.(com|org)`)},
		{"alternation and lazy", re(`(ab|a)*?b{1,3}|c.`), "abc\n\xC3\xA9", oracle(`(?s:(ab|a)*?b{1,3}|c[^\n])`)},
		{"unicode words", re(`\w+( \w+)*`), "ab_1 \xC3\xA9\xA8\xCC\x81-", func(s string) bool {
			for _, w := range strings.Split(s, " ") {
				if w == "" || strings.IndexFunc(w, func(c rune) bool { return !unicode.IsLetter(c) && c != '_' && (c < '0' || c > '9') }) >= 0 {
					return false
				}
			}
			return true
		}},
		{"negated classes", re(`[^\d\s"]{2,4}`), "a1 \"\xC2\xA0\xD9\xA3\xC3\xA9\x80\n", func(s string) bool {
			n := 0
			for _, c := range s {
				if unicode.IsDigit(c) || unicode.IsSpace(c) || c == '"' || c == unicode.ReplacementChar {
					return false
				}
				n++
			}
			return n >= 2 && n <= 4
		}},
	})
}
