package grammar

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

func digit() *Expr { return Byte(Range('0', '9')) }

// testGrammars are small grammars with strings they match and strings
// they do not (which may still be prefixes of matches).
var testGrammars = []struct {
	name  string
	root  *Expr
	rules Rules
	yes   []string
	no    []string
}{
	{"literal", Lit("abc"), nil, []string{"abc"}, []string{"", "ab", "abcd", "abd"}},
	{"alternatives", Alt(Lit("cat"), Lit("car"), Lit("c")), nil, []string{"cat", "car", "c"}, []string{"ca", "cart"}},
	{"star", Seq(Lit("["), Repeat(digit(), 0, -1), Lit("]")), nil, []string{"[]", "[0]", "[0123456789]"}, []string{"[", "[a]", "]"}},
	{"bounded", Repeat(digit(), 2, 4), nil, []string{"12", "123", "1234"}, []string{"1", "12345"}},
	{"optional", Seq(Opt(Lit("-")), digit()), nil, []string{"-1", "1"}, []string{"-", "--1"}},
	{"recursion", Ref("list"), Rules{"list": Seq(Lit("("), Repeat(Ref("list"), 0, -1), Lit(")"))},
		[]string{"()", "(())", "(()())", "((()))"}, []string{"(", "())", "(()"}},
	{"nullable repeat", Repeat(Alt(Lit("a"), Empty()), 0, -1), nil, []string{"", "a", "aaa"}, []string{"b"}},
	{"empty", Empty(), nil, []string{""}, []string{"a"}},
	{"bytes", Seq(Byte(Range(0xC3, 0xC3)), Byte(Range(0x80, 0xBF))), nil, []string{"é", "à"}, []string{"e", "\xC3"}},
}

func TestMatcherStrings(t *testing.T) {
	v := NewVocabulary([]string{"x"}, nil)
	for _, tc := range testGrammars {
		t.Run(tc.name, func(t *testing.T) {
			g, err := Compile(tc.root, tc.rules)
			if err != nil {
				t.Fatal(err)
			}
			for _, s := range tc.yes {
				if m := NewMatcher(g, v); !m.AcceptBytes(s) || !m.Matched() {
					t.Errorf("%q does not match %s", s, tc.root)
				}
			}
			for _, s := range tc.no {
				if m := NewMatcher(g, v); m.AcceptBytes(s) && m.Matched() {
					t.Errorf("%q matches %s", s, tc.root)
				}
			}
		})
	}
}

func TestCompileErrors(t *testing.T) {
	tests := []struct {
		name  string
		root  *Expr
		rules Rules
	}{
		{"undefined rule", Ref("nowhere"), nil},
		{"left recursion", Ref("a"), Rules{"a": Alt(Seq(Ref("a"), Lit("x")), Lit("y"))}},
		{"left recursion through a nullable rule", Ref("a"), Rules{"a": Alt(Seq(Opt(Lit("z")), Ref("a"), Lit("x")), Lit("y"))}},
		{"no finite string", Ref("a"), Rules{"a": Seq(Lit("x"), Ref("a"))}},
		{"nothing at all", Alt(), nil},
		{"repetition too large", Repeat(Lit("x"), 0, MaxRepeat+1), nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := Compile(tc.root, tc.rules); !errors.Is(err, ErrGrammar) {
				t.Errorf("Compile: %v, want an ErrGrammar", err)
			}
		})
	}
}

// randomVocabulary makes pieces over alphabet: every single byte of it, and
// random strings of 2 to 6 bytes, some repeated.
func randomVocabulary(r *rand.Rand, alphabet string, n int) []string {
	var pieces []string
	for i := 0; i < len(alphabet); i++ {
		pieces = append(pieces, alphabet[i:i+1])
	}
	for len(pieces) < n {
		var b strings.Builder
		for range 2 + r.IntN(5) {
			b.WriteByte(alphabet[r.IntN(len(alphabet))])
		}
		pieces = append(pieces, b.String())
		if r.IntN(10) == 0 {
			pieces = append(pieces, b.String())
		}
	}
	pieces = append(pieces, "") // a control token, never allowed
	return pieces
}

// TestMaskMatchesBruteForce walks random outputs of each grammar and checks
// every step's mask against feeding each token's bytes to a fresh matcher.
func TestMaskMatchesBruteForce(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for _, tc := range testGrammars {
		t.Run(tc.name, func(t *testing.T) {
			g, err := Compile(tc.root, tc.rules)
			if err != nil {
				t.Fatal(err)
			}
			alphabet := "abcrtxy()[]-0123456789\xC3\xA9\x80"
			pieces := randomVocabulary(r, alphabet, 120)
			eog := int32(len(pieces))
			pieces = append(pieces, "")
			v := NewVocabulary(pieces, []int32{eog})
			for walk := range 20 {
				m := NewMatcher(g, v)
				prefix := ""
				mask := make([]uint64, v.MaskWords())
				for step := 0; step < 30; step++ {
					any := m.Mask(mask, 0)
					var allowed []int32
					for id, p := range pieces {
						ref := NewMatcher(g, v)
						ok := ref.AcceptBytes(prefix) && p != "" && ref.AcceptBytes(p)
						if int32(id) == eog {
							ref = NewMatcher(g, v)
							ok = ref.AcceptBytes(prefix) && ref.Matched()
						}
						if got := mask[id>>6]&(1<<(id&63)) != 0; got != ok {
							t.Fatalf("walk %d: after %q token %d %q: mask %v, brute force %v", walk, prefix, id, p, got, ok)
						}
						if ok {
							allowed = append(allowed, int32(id))
						}
					}
					if any != (len(allowed) > 0) {
						t.Fatalf("Mask reported %v with %d allowed", any, len(allowed))
					}
					if len(allowed) == 0 {
						break
					}
					id := allowed[r.IntN(len(allowed))]
					if !m.Accept(id) {
						t.Fatalf("Accept(%d) of an allowed token failed", id)
					}
					if id == eog {
						break
					}
					prefix += pieces[id]
				}
			}
		})
	}
}

// TestBudgetEndsWhole draws random allowed tokens under a budget: the
// output must be a whole match by the time the budget runs out, for every
// budget at least as long as the shortest match.
func TestBudgetEndsWhole(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	root := Ref("v")
	rules := Rules{"v": Alt(
		Seq(Lit("["), Opt(Seq(Ref("v"), Repeat(Seq(Lit(","), Ref("v")), 0, -1))), Lit("]")),
		Repeat(digit(), 1, -1),
		Seq(Lit(`"`), Repeat(Byte(Range('a', 'z')), 0, -1), Lit(`"`)),
	)}
	g, err := Compile(root, rules)
	if err != nil {
		t.Fatal(err)
	}
	alphabet := `[],"0123456789abcxyz`
	pieces := randomVocabulary(r, alphabet, 300)
	v := NewVocabulary(pieces, nil)
	mask := make([]uint64, v.MaskWords())
	for _, budget := range []int{1, 2, 3, 5, 10, 40} {
		for walk := range 200 {
			m := NewMatcher(g, v)
			out := ""
			for left := budget; left > 0 && !m.Complete(); left-- {
				if !m.Mask(mask, left) {
					t.Fatalf("budget %d: nothing allowed after %q", budget, out)
				}
				var allowed []int32
				for id := range pieces {
					if mask[id>>6]&(1<<(id&63)) != 0 {
						allowed = append(allowed, int32(id))
					}
				}
				id := allowed[r.IntN(len(allowed))]
				m.Accept(id)
				out += pieces[id]
			}
			if !m.Matched() {
				t.Fatalf("budget %d, walk %d: %q is not a whole match (%d bytes short)", budget, walk, out, m.Remaining())
			}
		}
	}
}

// TestBudgetWithLongerTokens: where the bytes left are more than the tokens
// left, but longer tokens can still finish in time, the matcher allows
// only the tokens that leave the least to write; a Token counts as one
// byte, so that a marker the vocabulary has whole costs one token.
func TestBudgetWithLongerTokens(t *testing.T) {
	g, err := Compile(Seq(Token("<call>"), Lit("abcdef"), Token("</call>")), nil)
	if err != nil {
		t.Fatal(err)
	}
	if n := g.MinLength(); n != 8 {
		t.Errorf("min length %d, want 8: each Token counts once", n)
	}
	pieces := []string{"<call>", "</call>", "a", "b", "c", "d", "e", "f", "abc", "def", "ab"}
	v := NewVocabulary(pieces, nil)
	mask := make([]uint64, v.MaskWords())
	m := NewMatcher(g, v)
	allowed := func() []string {
		var out []string
		for id, p := range pieces {
			if mask[id>>6]&(1<<(id&63)) != 0 {
				out = append(out, p)
			}
		}
		return out
	}
	for i, step := range []struct {
		budget int
		want   []string
		take   string
	}{
		{4, []string{"<call>"}, "<call>"},
		{3, []string{"abc"}, "abc"}, // "a" and "ab" leave more than "abc"
		{2, []string{"def"}, "def"},
		{1, []string{"</call>"}, "</call>"},
	} {
		if !m.Mask(mask, step.budget) {
			t.Fatalf("step %d: nothing allowed", i)
		}
		if got := allowed(); !slices.Equal(got, step.want) {
			t.Fatalf("step %d, budget %d: allowed %q, want %q", i, step.budget, got, step.want)
		}
		m.Accept(int32(slices.Index(pieces, step.take)))
	}
	if !m.Matched() {
		t.Error("not a whole match")
	}
}

// TestRestartKeepsState fills the automaton past its bound of states: the
// match goes on as before.
func TestRestartKeepsState(t *testing.T) {
	g, err := Compile(Seq(Repeat(digit(), 0, maxStates+100), Lit(";")), nil)
	if err != nil {
		t.Fatal(err)
	}
	v := NewVocabulary([]string{"0", "1", ";"}, nil)
	m := NewMatcher(g, v)
	mask := make([]uint64, 1)
	for i := range maxStates + 50 {
		m.Mask(mask, 0)
		if mask[0] != 0b111 {
			t.Fatalf("step %d: mask %b", i, mask[0])
		}
		m.Accept(int32(i % 2))
	}
	if len(m.a.states) > maxStates+2 {
		t.Errorf("%d states kept", len(m.a.states))
	}
	if !m.Accept(2) || !m.Complete() {
		t.Error("the match did not end")
	}
}

func ExampleExpr_String() {
	fmt.Println(Seq(Opt(Lit("-")), Repeat(digit(), 1, -1), Alt(Lit("a"), Lit("b"))))
	// Output: "-"? [0-9]+ ("a" | "b")
}

// TestWarmMaskAllocatesNothing checks the steady state of a decode step:
// once its states and masks are known, Mask and Accept allocate nothing.
func TestWarmMaskAllocatesNothing(t *testing.T) {
	g, err := JSONSchema([]byte(`{"type":"object","properties":{"text":{"type":"string"}},"required":["text"]}`))
	if err != nil {
		t.Fatal(err)
	}
	pieces := []string{`{"text": "`, "a", "b", "é", "\xC3", "\xA9", " ab", `"}`, `"`, "}"}
	v := NewVocabulary(pieces, nil)
	m := NewMatcher(g, v)
	mask := make([]uint64, v.MaskWords())
	m.Mask(mask, 0)
	m.Accept(0)
	m.Mask(mask, 0)
	m.Accept(6) // " ab": inside the string, where every step looks alike
	if n := testing.AllocsPerRun(100, func() {
		m.Mask(mask, 0)
		m.Accept(1)
		m.Mask(mask, 100)
		m.Accept(2)
	}); n != 0 {
		t.Errorf("%v allocations per warm step", n)
	}
}
