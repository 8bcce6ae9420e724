package grammar

import (
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
	"unicode/utf8"
)

// fullMatch reports whether g matches s whole.
func fullMatch(g *Grammar, s string) bool {
	m := NewMatcher(g, NewVocabulary([]string{"x"}, nil))
	return m.AcceptBytes(s) && m.Matched()
}

// checkStrings fails t for each of yes that g does not match and each of no
// that it does.
func checkStrings(t *testing.T, g *Grammar, yes, no []string) {
	t.Helper()
	for _, s := range yes {
		if !fullMatch(g, s) {
			t.Errorf("%q does not match", s)
		}
	}
	for _, s := range no {
		if fullMatch(g, s) {
			t.Errorf("%q matches", s)
		}
	}
}

// gbnfLanguages are grammars with texts they accept and texts they refuse.
// The first group are llama.cpp's tests/test-grammar-integration.cpp cases
// (grammars and strings as they are there); the second the grammars of
// tests/test-grammar-parser.cpp with strings of ours; the rest ours.
var gbnfLanguages = []struct {
	name    string
	src     string
	yes, no []string
}{
	{"llama simple grammar", `
            root ::= expr
            expr ::= term ("+" term)*
            term ::= number
            number ::= [0-9]+`,
		[]string{"42", "1+2+3+4+5", "123+456"},
		[]string{"+", "/ 3", "1+2+3+4+5+", "12a45"}},
	{"llama medium complexity grammar", `
            root ::= expression
            expression ::= term ws (("+"|"-") ws term)*
            term ::= factor ws (("*"|"/") ws factor)*
            factor ::= number | variable | "(" expression ")" | function-call
            number ::= [0-9]+
            variable ::= [a-zA-Z_][a-zA-Z0-9_]*
            function-call ::= variable ws "(" (expression ("," ws expression)*)? ")"
            ws ::= [ \t\n\r]?`,
		[]string{"42", "1*2*3*4*5", "x", "x+10", "x1+y2", "(a+b)*(c-d)", "func()", "func(x,y+2)", "a*(b+c)-d/e",
			"f(g(x),h(y,z))", "x + 10", "x1 + y2", "(a + b) * (c - d)", "func()", "func(x, y + 2)", "a * (b + c) - d / e",
			"f(g(x), h(y, z))", "123+456", "123*456*789-123/456+789*123",
			"123+456*789-123/456+789*123-456/789+123*456-789/123+456*789-123/456+789*123-456"},
		[]string{"+", "/ 3x", "x + + y", "a * / b", "func(,)", "func(x y)", "(a + b", "x + y)", "a + b * (c - d", "42 +",
			"x +", "x + 10 +", "(a + b) * (c - d", "func(", "func(x, y + 2", "a * (b + c) - d /", "f(g(x), h(y, z)",
			"123+456*789-123/456+789*123-456/789+123*456-789/123+456*789-123/456+789*123-456/"}},
	{"llama special characters", `
            root ::= ... "abc" ...
            `,
		[]string{"abcabcabc", "aaaabcccc", "🔵🟠✅abc❌🟠🔵"},
		[]string{"aaabcccc", "aaaaabcccc", "aaaabccc", "aaaabccccc", "🔵🟠✅❌abc❌✅🟠🔵", "🔵🟠abc🟠🔵"}},
	{"llama * quantifier", `root ::= "a"*`,
		[]string{"", "a", "aaaaa", "aaaaaaaaaaaaaaaaaa", "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"},
		[]string{"b", "ab", "aab", "ba", "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaab"}},
	{"llama + quantifier", `root ::= "a"+`,
		[]string{"a", "aaaaa", "aaaaaaaaaaaaaaaaaa", "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"},
		[]string{"", "b", "ab", "aab", "ba", "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaab"}},
	{"llama ? quantifier", `root ::= "a"?`, []string{"", "a"}, []string{"b", "ab", "aa", "ba"}},
	{"llama mixed quantifiers", `
            root ::= cons+ vowel* cons? (vowel cons)*
            vowel ::= [aeiouy]
            cons ::= [bcdfghjklmnpqrstvwxyz]
            `,
		[]string{"yes", "no", "noyes", "crwth", "four", "bryyyy"},
		[]string{"yess", "yesno", "forty", "catyyy"}},
	{"llama simple exact repetition", `
            root ::= [ab]{4}
        `, []string{"aaaa", "bbbb", "abab"}, []string{"a", "b", "aaaaa"}},
	{"llama simple min repetition", `
            root ::= [ab]{4,}
        `, []string{"aaaa", "aaaaab", "bbbb", "ababab"}, []string{"", "aba"}},
	{"llama simple max repetition", `
            root ::= [ab]{0,4}
        `, []string{"", "a", "aa", "aaa", "aaab"}, []string{"aaaaa"}},
	{"llama min / max repetition", `
            root ::= ("0x" [A-F0-9]{2} " "?){3,5}
        `,
		[]string{"0xFF 0x12 0xAB", "0xFF 0x12 0xAB 0x00 0x00"},
		[]string{"", "0xFF", "0xFF 0x12", "0xFF 0x12 0xAB 0x00 0x00 0x00"}},
	{"llama segfault", `
            root ::= ( [x]* )*
        `, []string{"", "x", "xx"}, []string{"y", "yy"}},

	{"parser a{0,5000}", `root ::= "a"{0,5000}`, []string{"", "a", strings.Repeat("a", 5000)}, []string{"b", strings.Repeat("a", 5001)}},
	{"parser a{3,5000}", `root ::= "a"{3,5000}`, []string{"aaa", strings.Repeat("a", 4999)}, []string{"", "aa", strings.Repeat("a", 5001)}},
	{"parser classes", `root  ::= "a" | [bdx-z] | [^1-3]`,
		[]string{"a", "b", "d", "x", "y", "z", "c", "4", "é", "\x00"}, []string{"", "1", "2", "3", "ab"}},
	{"parser a+ rule", "root  ::= a+\n        a     ::= \"a\"", []string{"a", "aaa"}, []string{""}},
	{"parser a? rule", "root  ::= a?\n        a     ::= \"a\"", []string{"", "a"}, []string{"aa"}},
	{"parser a* rule", "root  ::= a*\n        a     ::= \"a\"", []string{"", "a", "aaaa"}, []string{"b"}},
	{"parser a{2}", `root  ::= "a"{2}`, []string{"aa"}, []string{"a", "aaa"}},
	{"parser a{2,}", `root  ::= "a"{2,}`, []string{"aa", "aaaaaa"}, []string{"a"}},
	{"parser a{ 4}", `root  ::= "a"{ 4}`, []string{"aaaa"}, []string{"aaa", "aaaaa"}},
	{"parser a{2,4}", `root  ::= "a"{2,4}`, []string{"aa", "aaa", "aaaa"}, []string{"a", "aaaaa"}},
	{"parser expressions", `
        root  ::= (expr "=" term "\n")+
        expr  ::= term ([-+*/] term)*
        term  ::= [0-9]+
    `, []string{"1=2\n", "1+2*3=7\n10/5=2\n"}, []string{"1=2", "=2\n", "1=2+3\n"}},
	{"parser expressions with ws", `
        root  ::= (expr "=" ws term "\n")+
        expr  ::= term ([-+*/] term)*
        term  ::= ident | num | "(" ws expr ")" ws
        ident ::= [a-z] [a-z0-9_]* ws
        num   ::= [0-9]+ ws
        ws    ::= [ \t\n]*
    `, []string{"a = 1\n", "( x+1 )*y_2 = 3\n"}, []string{"A = 1\n", "a = 1 + 2\n"}},

	{"literal escapes", `root ::= "\n\r\t\\\"\[\]\-\x41\u00e9\U0001F600"`, []string{"\n\r\t\\\"[]-Aé😀"}, []string{"\n\r\t\\\"[]-A\xE9😀"}},
	{"\\x is a code point", `root ::= "\xE9" [\xFF]`, []string{"éÿ"}, []string{"\xE9\xFF"}},
	{"raw characters", "root ::= \"日本\" [α-ω]+ \"\n\"", []string{"日本αβω\n"}, []string{"日本\n", "日本Ω\n"}},
	{"class escapes and edges", `root ::= [\]\[\-a-] [-b] [^"\\]`, []string{"]-x", "[bé", "a-a", "-b日"}, []string{"]-\"", "a-\\", "cbx"}},
	{"negated class takes any other character", `root ::= [^a]+`, []string{"b", "😀é\n\x00"}, []string{"a", "ba", "\xFF"}},
	{"dot", `root ::= .{2}`, []string{"ab", "é😀", "\n\n"}, []string{"a", "\xC3", "abc"}},
	{"comments and newlines in groups", `
# a comment line
root ::= ( # a comment after (
    "a"   # a comment in a group
    | "b" # an alternative on its own line
  ) tail  # a forward reference
tail ::= "x" |
  "y"
`, []string{"ax", "by", "ay"}, []string{"a", "x", "abx"}},
	{"rule names", "root ::= a-b_c 9x\na-b_c ::= \"1\"\n9x ::= \"2\"", []string{"12"}, []string{"1", "21"}},
	{"empty alternatives", `root ::= | "a" | ""`, []string{"", "a"}, []string{"aa"}},
	{"empty rule", "root ::= \"a\" e \"b\"\ne ::=", []string{"ab"}, []string{"aeb"}},
	{"{,n} and stacked postfix", `root ::= "a"{,2} "b"{1}? ("c" "d"?)+ "e"**`, []string{"c", "aabcdcee", "bc"}, []string{"aaac", "bbc", "d"}},
	{"CRLF line ends", "root ::= a\r\na ::= \"x\"\r\n", []string{"x"}, []string{"x\r"}},
	{"right recursion", "root ::= item\nitem ::= \"-\" item | \".\"", []string{".", "---."}, []string{"-", ""}},
	{"nested repetitions under the limit", `root ::= (("a" "b"?){0,50}){0,50}`, []string{"", "aab", strings.Repeat("ab", 60)}, []string{"b", "abb"}},
}

func TestGBNFLanguages(t *testing.T) {
	for _, tc := range gbnfLanguages {
		t.Run(tc.name, func(t *testing.T) {
			g, err := GBNF(tc.src)
			if err != nil {
				t.Fatal(err)
			}
			checkStrings(t, g, tc.yes, tc.no)
		})
	}
}

// gbnfExamples are texts that llama.cpp's example grammars (testdata/gbnf)
// accept and refuse.
var gbnfExamples = map[string]struct{ yes, no []string }{
	"arithmetic": {
		[]string{"x=1\n", "(b+c)*d = 4\n", "x1 = y_2\nz=3\n"},
		[]string{"", "x=1", "x=1+2\n", "X=1\n", "1x=2\n"}},
	"c": {
		[]string{"", "int main(){return 0;}", "int f(int x){x = x+1;}", "float g(){while(a<b){a = a*2;}}",
			"char c(){// hi\n}", "int main(){/* c */}int h(){if(a==b){}else{}}"},
		[]string{"int main(){return 0}", "intmain(){}", "int main(){x=1;}", "int main()"}},
	"chess": {
		[]string{"1. e4 e5\n2. Nf3 Nc6\n", "1. e4 e5\n2. O-O O-O-O\n", "1. exd5+ Qxd8#\n10. a8=Q Kb1\n"},
		[]string{"1. e4 e5\n", "1. e9 e5\n2. d4 d5\n", "1. e4 e5\n100. d4 d5\n", "1. e4  e5\n2. d4 d5\n"}},
	"english": {
		[]string{"Hello, world!", "one two\tthree\nfour", `[x]\y{z}`},
		[]string{"", "hello  world", "héllo", " leading", "trailing "}},
	"japanese": {
		[]string{"こんにちは", "日本語 カタカナ、", "漢字"},
		[]string{"", "hello", "こんにちは ", "こんにちは  世界"}},
	"json": {
		[]string{`{}`, `{"a": [1, 2.5, -3e5, true, null, "x\"y"]}`, "{\"a\":{\"b\":[]}}\n", `{"k": "\u00e9"}`},
		[]string{`[]`, `{"a":1,}`, `{'a':1}`, `{"a":01}`, `{"a":"\u12"}`, "{\"a\": \"tab\there\"}", `{"a": -3e10}`}},
	"json_arr": {
		[]string{"[\n]", "[\n1,\n2]", "[\n{\"a\": \"b\"},\n[1, 2]]", "[\n1e10]"},
		[]string{"[]", "[\n1,2]", "[\n1]\n", "[\n'a']"}},
	"list": {
		[]string{"- a\n", "- one\n- two\n", "- 日本\n"},
		[]string{"", "- \n", "- a", "- a\u0085b\n", "- a\u2028\n", "- a\rb\n"}},
}

func TestGBNFExamples(t *testing.T) {
	files, err := filepath.Glob("testdata/gbnf/*.gbnf")
	if err != nil || len(files) != len(gbnfExamples) {
		t.Fatalf("%d example grammars (%v), want %d", len(files), err, len(gbnfExamples))
	}
	for _, f := range files {
		name := strings.TrimSuffix(filepath.Base(f), ".gbnf")
		t.Run(name, func(t *testing.T) {
			src, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			g, err := GBNF(string(src))
			if err != nil {
				t.Fatal(err)
			}
			ex, ok := gbnfExamples[name]
			if !ok {
				t.Fatalf("no sample texts for %s", name)
			}
			checkStrings(t, g, ex.yes, ex.no)
		})
	}
}

func TestGBNFErrors(t *testing.T) {
	tests := []struct {
		name      string
		src       string
		line, col int    // of a *SyntaxError; line alone of a *RuleError; both 0: a *SyntaxError without place
		msg       string // a part of the message
	}{
		// llama.cpp's tests/test-grammar-integration.cpp failures.
		{"llama missing root", "\n        rot ::= expr\n        expr ::= term (\"+\" term)*\n        term ::= number\n        number ::= [0-9]+", 0, 0, `no rule named "root"`},
		{"llama missing reference", "root ::= expr\n        expr ::= term (\"+\" term)*\n        term ::= numero\n        number ::= [0-9]+", 3, 18, `rule "numero" is not defined`},
		{"llama simple left recursion", `root ::= "a" | root "a"`, 1, 0, "left recursion"},
		{"llama medium left recursion", "\n        root ::= asdf\n        asdf ::= \"a\" | asdf \"a\"\n        ", 3, 0, "left recursion"},
		{"llama hard left recursion", "\n        root ::= asdf\n        asdf ::= \"a\" | foo \"b\"\n        foo ::= \"c\" | asdf \"d\" | \"e\"", 3, 0, "left recursion"},
		{"llama hardest left recursion", "\n        root ::= asdf\n        asdf ::= \"a\" | foo \"b\"\n        foo ::= \"c\" | empty asdf \"d\" | \"e\"\n        empty ::= \"blah\" | ", 3, 0, "left recursion"},
		// llama.cpp's tests/test-grammar-parser.cpp failures ({,} is refused
		// before the stray quote after it; {,10} is a count of ours).
		{"llama {,}", "\n        root ::= \"a\"{,}\"\n    ", 2, 21, "no count"},
		{"llama {,10}", "\n        root ::= \"a\"{,10}\"\n    ", 2, 26, "string literal without"},
		{"llama nested repetitions", "\n        root ::= (((((([^x]*){0,99}){0,99}){0,99}){0,99}){0,99}){0,99}\n    ", 2, 44, "multiply to more than"},
		// Ours.
		{"empty source", "", 0, 0, `no rule named "root"`},
		{"only comments", "# nothing\n\n", 0, 0, `no rule named "root"`},
		{"no ::=", "root = \"a\"", 1, 6, "expected ::="},
		{"::= on the next line", "root\n::= \"a\"", 1, 5, "expected ::="},
		{"continuation without |", "root ::= \"a\"\n  \"b\"", 2, 3, "only after a |"},
		{"| at the start of a line", "root ::= \"a\"\n  | \"b\"", 2, 3, "expected a rule name"},
		{"unclosed group", "root ::= (\"a\" \"b\"\n", 2, 1, "expected ) to close the ( at line 1, column 10"},
		{"stray )", `root ::= "a")`, 1, 13, "no ( to close"},
		{"unexpected character", `root ::= "a" ;`, 1, 14, `unexpected ';'`},
		{"unterminated literal", `root ::= "abc`, 1, 10, "string literal without"},
		{"unterminated class", `root ::= [abc`, 1, 10, "class without"},
		{"empty class", `root ::= []`, 1, 10, "empty character class"},
		{"empty negated class", `root ::= [^]`, 1, 10, "empty character class"},
		{"class of nothing", `root ::= [^\x00-\U0010FFFF]`, 1, 10, "matches no character"},
		{"reversed range", `root ::= [z-a]`, 1, 11, "ends before it starts"},
		{"unknown escape", `root ::= "a\qb"`, 1, 12, `unknown escape \q`},
		{"short hex escape", `root ::= "\x4"`, 1, 11, "2 hexadecimal digits"},
		{"surrogate", `root ::= "\uD800"`, 1, 11, "surrogate"},
		{"above U+10FFFF", `root ::= [\U00110000]`, 1, 11, "above U+10FFFF"},
		{"trailing backslash", `root ::= "\`, 1, 11, "backslash at the end"},
		{"invalid UTF-8", "root ::= \"a\xFFb\"", 1, 12, "not valid UTF-8"},
		{"defined twice", "root ::= a\na ::= \"x\"\na ::= \"y\"", 3, 1, `rule "a" is defined twice (first on line 2)`},
		{"token id", `root ::= <[10]> "a"`, 1, 10, "token matches"},
		{"token text", `root ::= <think>`, 1, 10, "token matches"},
		{"negated token", `root ::= !<[11]>*`, 1, 10, "token matches"},
		{"nothing to repeat", `root ::= * "a"`, 1, 10, `nothing to repeat before '*'`},
		{"nothing to repeat after |", `root ::= "a" | +`, 1, 16, `nothing to repeat`},
		{"{,} has no count", `root ::= "a"{,}`, 1, 13, "no count"},
		{"crossed bounds", `root ::= "a"{3,2}`, 1, 13, "bounds crossed"},
		{"count too large", `root ::= "a"{65537}`, 1, 14, "above 65536"},
		{"huge count", `root ::= "a"{99999999999999999999999}`, 1, 14, "above 65536"},
		{"bad braces", `root ::= "a"{x}`, 1, 14, "expected a count"},
		{"unclosed braces", `root ::= "a"{2,3`, 1, 17, "expected }"},
		{"stacked repetitions multiply", `root ::= "a"{300}{300}`, 1, 18, "multiply to more than"},
		{"too deep", "root ::= " + strings.Repeat("(", maxNesting+1) + `"a"` + strings.Repeat(")", maxNesting+1), 1, 10 + maxNesting, "nested more than"},
		{"no finite string", "root ::= a\na ::= \"x\" a", 2, 0, `rule "a" matches no finite string`},
		{"mutual recursion without end", "root ::= \"<\" a \">\"\na ::= b \"1\"\nb ::= \"(\" a \")\"", 3, 0, "matches no finite string"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			g, err := GBNF(tc.src)
			if g != nil || !errors.Is(err, ErrGrammar) {
				t.Fatalf("GBNF: %v, want an error wrapping ErrGrammar", err)
			}
			if !strings.Contains(err.Error(), tc.msg) {
				t.Errorf("%q does not say %q", err, tc.msg)
			}
			var se *SyntaxError
			var re *RuleError
			switch {
			case errors.As(err, &se):
				if tc.col == 0 && tc.line != 0 || se.Line != tc.line || se.Column != tc.col {
					t.Errorf("%v: at line %d, column %d, want %d, %d", err, se.Line, se.Column, tc.line, tc.col)
				}
			case errors.As(err, &re):
				if tc.col != 0 || re.Line != tc.line {
					t.Errorf("%v: at line %d, want %d, %d", err, re.Line, tc.line, tc.col)
				}
			default:
				t.Errorf("%v is neither a *SyntaxError nor a *RuleError", err)
			}
		})
	}
}

// TestGBNFMaxElements checks that a grammar past the package's bound of
// elements is refused, and one at the bounds of its counts compiles.
func TestGBNFMaxElements(t *testing.T) {
	var b strings.Builder
	b.WriteString("root ::=")
	for i := range 20 {
		fmt.Fprintf(&b, " r%d", i)
	}
	for i := range 20 {
		fmt.Fprintf(&b, "\nr%d ::= \"ab\"{60000}", i)
	}
	if _, err := GBNF(b.String()); !errors.Is(err, ErrGrammar) || !strings.Contains(err.Error(), "elements") {
		t.Errorf("a grammar of more than MaxElements: %v", err)
	}
	g, err := GBNF(`root ::= [a-z]{65536}`)
	if err != nil || g.MinLength() != MaxRepeat {
		t.Errorf("65536 letters: %v", err)
	}
}

// TestAmbiguousGrammarIsBounded follows grammars whose nested repetitions
// of things that match the empty string make the ways to continue explode
// (through rules, which no bound on a rule's text catches): a state past
// maxStateStacks ends the match instead of taking the server's memory.
func TestAmbiguousGrammarIsBounded(t *testing.T) {
	v := NewVocabulary([]string{"a", "aa", "b"}, nil)
	mask := make([]uint64, v.MaskWords())
	for _, src := range []string{
		"root ::= r{300}\nr ::= s{300}\ns ::= \"a\"?",
		"root ::= r{255} \"b\"\nr ::= s{255}\ns ::= t{255}\nt ::= \"a\"?",
	} {
		g, err := GBNF(src)
		if err != nil {
			t.Fatal(err)
		}
		m := NewMatcher(g, v)
		if m.Mask(mask, 0) || m.AcceptBytes("a") {
			t.Errorf("%q: the match goes on past %d ways to continue", src, maxStateStacks)
		}
	}
	// Just under the bound, the match goes on.
	g, err := GBNF(`root ::= ("a"?){65000} "b"`)
	if err != nil {
		t.Fatal(err)
	}
	if m := NewMatcher(g, v); !m.Mask(mask, 0) || !m.AcceptBytes("aab") || !m.Matched() {
		t.Error(`("a"?){65000} "b" does not match aab`)
	}
}

// matcherCase is a grammar to follow with a Matcher, with a vocabulary
// alphabet that can write its texts and a check of each whole output.
type matcherCase struct {
	name     string
	g        func() (*Grammar, error)
	alphabet string
	valid    func(string) bool
}

// checkMatcher walks each case with a Matcher over a small random
// vocabulary: every mask must equal what feeding each token's bytes to a
// fresh matcher says (brute force), and each walk must end in an output
// that valid accepts.
func checkMatcher(t *testing.T, cases []matcherCase) {
	r := rand.New(rand.NewPCG(11, 12))
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g, err := tc.g()
			if err != nil {
				t.Fatal(err)
			}
			pieces := randomVocabulary(r, tc.alphabet, 150)
			eog := int32(len(pieces))
			pieces = append(pieces, "")
			v := NewVocabulary(pieces, []int32{eog})
			mask := make([]uint64, v.MaskWords())
			ref := NewMatcher(g, v) // restarted for each check: one automaton for all
			for walk := range 15 {
				m := NewMatcher(g, v)
				out := ""
				ended := false
				for step := 0; step < 40 && !ended; step++ {
					m.Mask(mask, 40-step)
					var allowed []int32
					for id, p := range pieces {
						// valid: the token keeps the output a prefix of a
						// match; fits: and one finishable within the budget.
						ref.cur = ref.a.start()
						valid := ref.AcceptBytes(out) && p != "" && ref.AcceptBytes(p)
						fits := valid && ref.Remaining() <= 40-step-1
						if int32(id) == eog {
							ref.cur = ref.a.start()
							valid = ref.AcceptBytes(out) && ref.Matched()
							fits = valid
						}
						got := mask[id>>6]&(1<<(id&63)) != 0
						if got && !valid || fits && !got {
							t.Fatalf("walk %d: after %q token %q: mask %v, but valid %v, fits %v", walk, out, p, got, valid, fits)
						}
						if got {
							allowed = append(allowed, int32(id))
						}
					}
					if len(allowed) == 0 {
						break
					}
					id := allowed[r.IntN(len(allowed))]
					if !m.Accept(id) {
						t.Fatalf("Accept(%d) of an allowed token failed", id)
					}
					if ended = id == eog || m.Complete(); id != eog {
						out += pieces[id]
					}
				}
				if !m.Matched() || !tc.valid(out) {
					t.Fatalf("walk %d ended with %q, not a valid whole match", walk, out)
				}
			}
		})
	}
}

func gbnfFile(name string) func() (*Grammar, error) {
	return func() (*Grammar, error) {
		src, err := os.ReadFile(filepath.Join("testdata/gbnf", name))
		if err != nil {
			return nil, err
		}
		return GBNF(string(src))
	}
}

func TestGBNFMatcher(t *testing.T) {
	checkMatcher(t, []matcherCase{
		{"json", gbnfFile("json.gbnf"), `{}[],:" 0123456789.-eEtrufalsn\ab`, func(s string) bool {
			return strings.HasPrefix(s, "{") && json.Valid([]byte(s))
		}},
		{"json_arr", gbnfFile("json_arr.gbnf"), "[]{},:\" \n0123456789.-eEtrufalsn\\ab", func(s string) bool {
			return strings.HasPrefix(s, "[") && json.Valid([]byte(s))
		}},
		{"chess", gbnfFile("chess.gbnf"), "1. e4x5NBKQRO-+#=\nabh", func(s string) bool { return strings.HasPrefix(s, "1. ") }},
		{"japanese", gbnfFile("japanese.gbnf"), "こんにち日本語カ、 \xE3\x81\x93\x93", func(s string) bool { return utf8.ValidString(s) && s != "" }},
		{"class of code points", func() (*Grammar, error) { return GBNF(`root ::= "<" [^"\\<>]{1,3} ">"`) }, "<>\"\\aé日\xC3\xA9\xE6", func(s string) bool {
			return strings.HasPrefix(s, "<") && strings.HasSuffix(s, ">") && !strings.ContainsAny(s[1:len(s)-1], `"\<>`)
		}},
	})
}

// FuzzGBNF checks that GBNF neither panics nor hangs on any text, and that
// what it compiles can be matched.
func FuzzGBNF(f *testing.F) {
	files, _ := filepath.Glob("testdata/gbnf/*.gbnf")
	for _, name := range files {
		if src, err := os.ReadFile(name); err == nil {
			f.Add(string(src))
		}
	}
	for _, tc := range gbnfLanguages {
		f.Add(tc.src)
	}
	f.Add("root ::= [^\\x00-\\x7F]{2,5} (\"a\" | b)*\nb ::= \"\\u00e9\" # c\n")
	f.Add("root ::= (\n\"a\"{1,}\n)? <[1]>")
	f.Fuzz(func(t *testing.T, src string) {
		start := time.Now()
		g, err := GBNF(src)
		if took := time.Since(start); took > 5*time.Second {
			t.Fatalf("GBNF took %v", took)
		}
		if err != nil {
			if !errors.Is(err, ErrGrammar) {
				t.Fatalf("an error that does not wrap ErrGrammar: %v", err)
			}
			return
		}
		// Follow a few bytes of the grammar's own literal text: whatever
		// the grammar, the automaton must not fail.
		m := NewMatcher(g, NewVocabulary([]string{"a", "\"", "é"}, nil))
		m.AcceptBytes(src[:min(len(src), 8)])
		_ = m.Matched()
	})
}
