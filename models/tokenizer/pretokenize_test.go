package tokenizer

import (
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestPreTokenizerCuts(t *testing.T) {
	cases := []struct {
		pre, text string
		want      []string
	}{
		// GPT-2: case-sensitive contractions, a space joins what follows it,
		// digits in one run, whitespace before a word leaves one space to it.
		{"gpt-2", "Hello world", []string{"Hello", " world"}},
		{"gpt-2", "I'm sure they'll go", []string{"I", "'m", " sure", " they", "'ll", " go"}},
		{"gpt-2", "'LL 'S", []string{"'", "LL", " '", "S"}},
		{"gpt-2", "x 1234567 y", []string{"x", " 1234567", " y"}},
		{"gpt-2", "  Hello", []string{" ", " Hello"}},
		{"gpt-2", "a   b", []string{"a", "  ", " b"}},
		{"gpt-2", "a\n\nb", []string{"a", "\n", "\n", "b"}},
		{"gpt-2", "end  ", []string{"end", "  "}},
		{"gpt-2", "🦙.cpp 中文", []string{"🦙.", "cpp", " 中文"}},
		{"gpt-2", "a\u00a0b", []string{"a", "\u00a0", "b"}},
		{"mpt", "don't!!", []string{"don", "'t", "!!"}},
		// Llama 3: contractions in any case, a non-letter joins the letters
		// after it, digits in groups of three, newlines take the whitespace
		// before them.
		{"llama-bpe", "333333333", []string{"333", "333", "333"}},
		{"llama-bpe", "3333", []string{"333", "3"}},
		{"llama-bpe", "Hello, y'all! How", []string{"Hello", ",", " y", "'all", "!", " How"}},
		{"llama-bpe", "'LL We'Ve", []string{"'LL", " We", "'Ve"}},
		{"llama-bpe", "  Hello", []string{" ", " Hello"}},
		{"llama-bpe", "\n\n\nHello", []string{"\n\n\n", "Hello"}},
		{"llama-bpe", "   \n  x", []string{"   \n", " ", " x"}},
		{"llama-bpe", "a.\n\nb", []string{"a", ".\n\n", "b"}},
		{"llama-bpe", "3.14", []string{"3", ".", "14"}},
		{"llama-bpe", "end ", []string{"end", " "}},
		{"llama-bpe", "\tx", []string{"\tx"}},
		{"llama-bpe", "нещо на Български", []string{"нещо", " на", " Български"}},
		{"llama-bpe", "我想在apple工作1314151天～", []string{"我想在apple工作", "131", "415", "1", "天", "～"}},
		{"llama3", "C\u1eeda Vi\u1ec7t", []string{"C\u1eeda", " Vi\u1ec7t"}},
		// Qwen2: as Llama 3 with single digits.
		{"qwen2", "ab12345", []string{"ab", "1", "2", "3", "4", "5"}},
		{"qwen2", "'S x", []string{"'S", " x"}},
		// DeepSeek Coder: newlines alone, letters and punctuation with one
		// optional leading whitespace, CJK runs, single digits.
		{"deepseek-coder", "Hello\nworld", []string{"Hello", "\n", "world"}},
		{"deepseek-coder", "a1b22", []string{"a", "1", "b", "2", "2"}},
		{"deepseek-coder", "  hi", []string{" ", " hi"}},
		{"deepseek-coder", "我想在apple工作", []string{"我想在", "apple", "工作"}},
		{"deepseek-coder", "x = (y);", []string{"x", " =", " (", "y", ");"}},
		// DeepSeek LLM: cased letters, punctuation, trailing whitespace, CJK
		// runs and digit runs.
		{"deepseek-llm", "Hello  world", []string{"Hello", " ", " world"}},
		{"deepseek-llm", "abc  ", []string{"abc", "  "}},
		{"deepseek-llm", "中文123", []string{"中文", "123"}},
		{"deepseek-llm", "Hi!!\n", []string{"Hi", "!!", "\n"}},
		// StarCoder family: every digit alone, then GPT-2.
		{"starcoder", "abc123", []string{"abc", "1", "2", "3"}},
		{"refact", " 12 x", []string{" ", "1", "2", " x"}},
		{"smollm", "x1", []string{"x", "1"}},
		// Default (no pre key, e.g. GPT-NeoX): punctuation runs, GPT-2, digit
		// runs, then ASCII digits in threes.
		{"", "Hello, world!!", []string{"Hello", ",", " world", "!!"}},
		{"default", "1234567", []string{"123", "456", "7"}},
		{"none", "a+b=$100", []string{"a", "+", "b", "=$", "100"}},
		// Falcon: as the default, with the backtick among the symbols and
		// without the digit-run step.
		{"falcon", "a`b 1234", []string{"a", "`", "b", " ", "123", "4"}},
		{"falcon", "1234", []string{"123", "4"}},
	}
	for _, c := range cases {
		t.Run(c.pre+"/"+c.text, func(t *testing.T) {
			p, err := newPreTokenizer(c.pre)
			if err != nil {
				t.Fatal(err)
			}
			if got := p.split(c.text); !slices.Equal(got, c.want) {
				t.Errorf("split(%q) =\n %q\nwant\n %q", c.text, got, c.want)
			}
		})
	}
}

func TestPreTokenizerNames(t *testing.T) {
	for name, spec := range preSpecs {
		p, err := newPreTokenizer(name)
		if err != nil {
			t.Errorf("%q: %v", name, err)
			continue
		}
		if p.spec.ignoreMerges != spec.ignoreMerges || len(p.steps) != len(spec.exprs) {
			t.Errorf("%q: built %d steps, ignoreMerges %v", name, len(p.steps), p.spec.ignoreMerges)
		}
		// Every pre-tokenizer must cover its input exactly.
		text := "Hello, y'all! 12345 \u00a0 \n\n 我想在apple工作 🦙 ``~~ $$ x\u0301"
		if got := strings.Join(p.split(text), ""); got != text {
			t.Errorf("%q: pieces join to %q", name, got)
		}
	}
	for _, name := range []string{"llama-bpe", "llama3", "tekken", "minicpm5"} {
		if p, _ := newPreTokenizer(name); !p.spec.ignoreMerges {
			t.Errorf("%q should ignore merges", name)
		}
	}
	for _, name := range []string{"gpt-2", "qwen2", "dbrx", "deepseek-coder"} {
		if p, _ := newPreTokenizer(name); p.spec.ignoreMerges {
			t.Errorf("%q should not ignore merges", name)
		}
	}
	if _, err := newPreTokenizer("no-such-pre-tokenizer"); err == nil {
		t.Error("an unknown pre-tokenizer name gave no error")
	}
}

func TestCompileRegexStepErrors(t *testing.T) {
	for _, expr := range []string{
		`\p{L}é`,    // categories and non-ASCII characters together
		`[^\S]`,     // negated class escape inside a class
		`(unclosed`, // not a regular expression
	} {
		if _, err := compileRegexStep(expr); err == nil {
			t.Errorf("compileRegexStep(%q): no error", expr)
		}
	}
}

// runesToCut mixes code points of every class the scanners tell apart.
var runesToCut = []rune{
	' ', ' ', ' ', '\t', '\n', '\n', '\r', '\v', '\f', 0x1C, 0, 0x7F, 0x85, 0xA0, 0x3000, 0x2028, 0x200B,
	'a', 'Z', 's', 'S', 't', 'T', 'm', 'd', 'D', 'r', 'e', 'E', 'v', 'l', 'L', 'x',
	'\'', '\'', '!', '.', ',', '$', '~', '`', '/', '+', '_',
	'0', '1', '9', 0x663, 0xBD, 0xB2,
	0xE9, 0x4E2D, 0x301, 0xFF5E, 0x1F999, 0xE000, 0x378, 0xD55C, 0x10FFFE,
}

func randomText(r *rand.Rand, n int) string {
	var b strings.Builder
	for range n {
		if r.IntN(40) == 0 {
			b.WriteByte(byte(0x80 + r.IntN(0x80))) // invalid UTF-8 on its own
			continue
		}
		b.WriteRune(runesToCut[r.IntN(len(runesToCut))])
	}
	return b.String()
}

// splitWith cuts text with one step.
func splitWith(s splitStep, text string) []string {
	p := &preTokenizer{steps: []splitStep{s}}
	return p.split(text)
}

// The hand-written scanners must cut exactly as their expressions do when
// run the way llama.cpp runs its other expressions. llama.cpp itself uses the
// GPT-2 and Llama 3 scanners and the Qwen2 expression.
func TestScannersMatchExpressions(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for _, c := range []struct {
		name string
		scan splitStep
		expr string
	}{
		{"gpt2", gpt2Scanner{}, reGPT2},
		{"llama3", llama3Scanner{maxDigits: 3}, reLlama3},
		{"qwen2", llama3Scanner{maxDigits: 1}, reQwen2},
	} {
		t.Run(c.name, func(t *testing.T) {
			re, err := compileRegexStep(c.expr)
			if err != nil {
				t.Fatal(err)
			}
			for i := range 3000 {
				text := randomText(r, 1+i%40)
				got, want := splitWith(c.scan, text), splitWith(re, text)
				if !slices.Equal(got, want) {
					t.Fatalf("%q:\nscanner %q\nregex   %q", text, got, want)
				}
			}
		})
	}
}

func FuzzPreTokenize(f *testing.F) {
	for _, s := range []string{
		"Hello, y'all! How are you 😁 ?我想在apple工作1314151天～",
		"\n \n\n \t\t \u3000 x", "3333333 3.3 3..3", "'s'S'll'LL'd", "\xff\xc0\x80\xed\xa0\x80\xf4\x90\x80\x80",
	} {
		f.Add(s)
	}
	names := []string{"gpt-2", "llama-bpe", "qwen2", "deepseek-llm", "deepseek-coder", "starcoder", "default", "falcon"}
	pres := make([]*preTokenizer, len(names))
	for i, n := range names {
		p, err := newPreTokenizer(n)
		if err != nil {
			f.Fatal(err)
		}
		pres[i] = p
	}
	regexes := map[string]splitStep{}
	for _, e := range []string{reGPT2, reLlama3, reQwen2} {
		re, err := compileRegexStep(e)
		if err != nil {
			f.Fatal(err)
		}
		regexes[e] = re
	}
	f.Fuzz(func(t *testing.T, text string) {
		if len(text) > 1<<12 {
			return
		}
		// What llama.cpp tokenizes: invalid bytes as U+FFFD.
		var want []byte
		for _, c := range decodeCodepoints(text, nil) {
			want = appendCodepoint(want, c)
		}
		for i, p := range pres {
			words := p.split(text)
			for _, w := range words {
				if w == "" {
					t.Fatalf("%s: empty word in %q", names[i], words)
				}
			}
			if got := strings.Join(words, ""); got != string(want) {
				t.Fatalf("%s: words %q do not join to %q", names[i], words, want)
			}
		}
		if !utf8.ValidString(text) {
			return
		}
		for _, c := range []struct {
			scan splitStep
			expr string
		}{{gpt2Scanner{}, reGPT2}, {llama3Scanner{maxDigits: 3}, reLlama3}, {llama3Scanner{maxDigits: 1}, reQwen2}} {
			if got, want := splitWith(c.scan, text), splitWith(regexes[c.expr], text); !slices.Equal(got, want) {
				t.Fatalf("%q: scanner %q, expression %q", text, got, want)
			}
		}
	})
}
