package tokenizer

import (
	"fmt"
	"strings"

	"github.com/dlclark/regexp2"
)

// A BPE vocabulary never merges across the boundaries of the "words" its
// pre-tokenizer cuts the text into, so the cuts must be exactly llama.cpp's.
// llama.cpp picks a list of regular expressions by tokenizer.ggml.pre; each
// expression in turn cuts every piece left by the previous one into its
// matches and the gaps between them. Two expressions (GPT-2's and Llama 3's)
// run as hand-written scanners there; the others run through std::regex on a
// "collapsed" text in which every non-ASCII code point is replaced by one byte
// standing for its Unicode category, so that \p{L} and friends become byte
// classes. This file reproduces both: the two scanners by hand, the rest with
// regexp2 on the same collapsed text.

// Regular expressions shared by several pre-tokenizer families.
const (
	reGPT2  = `'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)`
	reCased = `(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])`
	// reLlama3 is Llama 3's tiktoken expression with (?i:...) spelled out.
	reLlama3 = reCased + `|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`
	// reLlama3Orig is the form found in tokenizer.json, which llama.cpp also
	// runs with its Llama 3 scanner.
	reLlama3Orig = `(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`
	// reQwen2 is Llama 3's expression with single digits.
	reQwen2      = reCased + `|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`
	reStarcoder  = `\p{N}`
	reCJK        = "[\u4e00-\u9fa5\u0800-\u4e00\uac00-\ud7ff]+"
	reKana       = "[\u4e00-\u9fa5\u3040-\u309f\u30a0-\u30ff]+"
	reNewline    = "[\r\n]"
	reASCIIPunct = `[!"#$%&'()*+,\-./:;<=>?@\[\\\]^_` + "`" + `{|}~]`
	reDeepseek3  = reASCIIPunct + `[A-Za-z]+|[^` + "\r\n" + `\p{L}\p{P}\p{S}]?[\p{L}\p{M}]+| ?[\p{P}\p{S}]+[` + "\r\n" + `]*|\s*[` + "\r\n" + `]+|\s+(?!\S)|\s+`
	reGPT4o      = `[^\r\n\p{L}\p{N}]?((?=[\p{L}])([^a-z]))*((?=[\p{L}])([^A-Z]))+` + reCased + `?|[^\r\n\p{L}\p{N}]?((?=[\p{L}])([^a-z]))+((?=[\p{L}])([^A-Z]))*` + reCased + `?|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+`
	// rePoro splits on spaces and sentence punctuation of several scripts
	// (… 。 ， 、 । ۔ ،).
	rePoro = " ?[^(\\s|.,!?\u2026\u3002\uff0c\u3001\u0964\u06d4\u060c)]+"
	// reDeepseekLetters is DeepSeek LLM's list of cased letters (Lu, Ll, Lt).
	reDeepseekLetters = "\\s?[A-Za-z\u00b5\u00c0-\u00d6\u00d8-\u00f6\u00f8-\u01ba\u01bc-\u01bf\u01c4-\u0293\u0295-\u02af" +
		"\u0370-\u0373\u0376\u0377\u037b-\u037d\u037f\u0386\u0388-\u038a\u038c\u038e-\u03a1\u03a3-\u03f5\u03f7-\u0481" +
		"\u048a-\u052f\u0531-\u0556\u10a0-\u10c5\u13a0-\u13f5\u13f8-\u13fd\u1c90-\u1cba\u1cbd-\u1cbf\u1d00-\u1d2b" +
		"\u1d6b-\u1d77\u1d79-\u1d9a\u1e00-\u1f15\u1f18-\u1f1d\u1f20-\u1f45\u1f48-\u1f4d\u1f50-\u1f57\u1f59\u1f5b\u1f5d" +
		"\u1f5f-\u1f7d\u1f80-\u1fb4\u1fb6-\u1fbc\u1fbe\u1fc2-\u1fc4\u1fc6-\u1fcc\u1fd0-\u1fd3\u1fd6-\u1fdb\u1fe0-\u1fec" +
		"\u1ff2-\u1ff4\u1ff6-\u1ffc\u2102\u2107\u210a-\u2113\u2115\u2119-\u211d\u2124\u2126\u2128\u212a-\u212d" +
		"\u212f-\u2134\u2139\u213c-\u213f\u2145-\u2149\u214e\u2183\u2184\u2c00-\u2c7b\u2c7e-\u2ce4\u2ceb-\u2cee" +
		"\u2cf2\u2cf3\ua640-\ua66d\ua680-\ua69b\ua722-\ua76f\ua771-\ua787\ua78b-\ua78e\uab70-\uabbf\ufb00-\ufb06" +
		"\ufb13-\ufb17\uff21-\uff3a\uff41-\uff5a\U00010400-\U0001044f\U000104b0-\U000104d3\U000104d8-\U000104fb" +
		"\U00010c80-\U00010cb2\U00010cc0-\U00010cf2\U000118a0-\U000118df\U0001e900-\U0001e943]+"
	// reDeepseekPunct is ASCII and fullwidth punctuation, curly quotes and
	// the ideographic space, comma and full stop.
	reDeepseekPunct = "\\s?[!-/:-~\uff01-\uff0f\uff1a-\uff5e\u2018-\u201f\u3000-\u3002]+"
)

// preSpec is how llama.cpp pre-tokenizes for one family of
// tokenizer.ggml.pre values.
type preSpec struct {
	exprs []string
	// ignoreMerges: a word that is itself a token is taken whole, without
	// running the merges (tiktoken-style vocabularies such as Llama 3's).
	ignoreMerges bool
	// rawBytes: the words are merged as UTF-8, not byte-encoded, and a byte
	// that is no token falls back to its <0xNN> token (SentencePiece-style
	// BPE such as Gemma 4's, whose spaces the tokenizer writes as ▁).
	rawBytes bool
	// wholeNewlines: a word of newlines that is a token is taken whole.
	wholeNewlines bool
}

var (
	preDefault   = preSpec{exprs: []string{`[\p{P}\$\+<=>\^~\|]+`, reGPT2, `\p{N}+`, `[0-9][0-9][0-9]`}}
	preGPT2      = preSpec{exprs: []string{reGPT2}}
	preLlama3    = preSpec{exprs: []string{reLlama3}, ignoreMerges: true}
	preLlama3Re  = preSpec{exprs: []string{reLlama3}}
	preQwen2     = preSpec{exprs: []string{reQwen2}}
	preStarcoder = preSpec{exprs: []string{reStarcoder, reGPT2}}
	preFalcon    = preSpec{exprs: []string{`[\p{P}\$\+<=>\^~\|` + "`" + `]+`, reGPT2, `[0-9][0-9][0-9]`}}
	preDSCoder   = preSpec{exprs: []string{reNewline, `\s?\p{L}+`, `\s?\p{P}+`, reCJK, `\p{N}`}}
	preDSLLM     = preSpec{exprs: []string{reNewline, reDeepseekLetters, reDeepseekPunct, `\s+$`, reCJK, `\p{N}+`}}
	preDS3       = preSpec{exprs: []string{`\p{N}{1,3}`, reKana, reDeepseek3}}
	prePoro      = preSpec{exprs: []string{rePoro}}
	preViking    = preSpec{exprs: []string{rePoro, `\p{N}`}}
	preTekken    = preSpec{exprs: []string{`[^\r\n\p{L}\p{N}]?((?=[\p{L}])([^a-z]))*((?=[\p{L}])([^A-Z]))+|[^\r\n\p{L}\p{N}]?((?=[\p{L}])([^a-z]))+((?=[\p{L}])([^A-Z]))*|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+`}, ignoreMerges: true}
	preGPT4o     = preSpec{exprs: []string{reGPT4o}}
	preQwen35    = preSpec{exprs: []string{reCased + `|[^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+|\p{N}| ?[^\s\p{L}\p{M}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`}}
	preChameleon = preSpec{exprs: []string{`<sentinel:[0-9]+>`, `(IMGIMG)((A|B|C|D|E|F|G|H|I){1,4})Z`, `([\t\n]|    |  )`, `\p{N}`, `[\p{P}!-/:-@\[-` + "`" + `{-~]`, reGPT2}}
	preBailing   = preSpec{exprs: []string{`'(?:[sSdDmMtT]|[lL][lL]|[vV][eE]|[rR][eE])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]|\s+(?!\S)|\s+`}}
	preSeedCoder = preSpec{exprs: []string{reCased + `|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1}| ?[^\s\p{L}\p{N}\r\n]+|\s*[\r\n]+|\s+(?!\S)|\s+`}}
	preUfakzeka  = preSpec{exprs: []string{`[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`}}
	preLaguna    = preSpec{exprs: []string{`[^\n]+|[\n]+`, reQwen2}}
	preExaoneMoE = preSpec{exprs: []string{reCased + `|[^\r\n\p{L}\p{N}]?(?:\p{L}\p{M}*(?: \p{L}\p{M}*)*)+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n/]?|\s*[\r\n]|\s+(?!\S)|\s+`}}
	preMiniCPM5  = preSpec{exprs: []string{`\p{N}{1,3}`, reCased + `|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}+| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`}, ignoreMerges: true}
	preGemma4    = preSpec{exprs: []string{`[^\n]+|[\n]+`}, rawBytes: true, wholeNewlines: true}
	preSarvam    = preSpec{exprs: []string{`[^\n]+|[\n]+`}, rawBytes: true}
	preJais2     = preSpec{exprs: []string{reCased + `|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s{512}(?!\S)|\s{256}(?!\S)|\s{128}(?!\S)|\s{64}(?!\S)|\s{32}(?!\S)|\s{16}(?!\S)|\s{8}(?!\S)|\s{4}(?!\S)|\s{1,2}(?!\S)|\s{1}`}}
)

// preSpecs maps tokenizer.ggml.pre to its pre-tokenizer, following
// llama.cpp's table of names.
var preSpecs = func() map[string]preSpec {
	m := map[string]preSpec{}
	set := func(s preSpec, names ...string) {
		for _, n := range names {
			m[n] = s
		}
	}
	// "" is a file without the key; "none" is how some tools write that.
	set(preDefault, "", "default", "none")
	set(preLlama3, "llama3", "llama-v3", "llama-bpe", "falcon3", "falcon-h1", "pixtral", "midm-2.0", "lfm2", "jina-v5-nano")
	set(preLlama3Re, "dbrx", "smaug-bpe", "glm4", "chatglm-bpe")
	set(preGPT2, "gpt-2", "phi-2", "jina-es", "jina-de", "gigachat", "jina-v2-es", "jina-v2-de", "a.x-4.0", "mellum",
		"modern-bert", "jina-v1-en", "jina-v2-code", "roberta-bpe", "exaone4", "mpt", "olmo", "jais", "trillion", "granite-docling")
	set(preQwen2, "qwen2", "deepseek-r1-qwen", "kormo", "f2llmv2", "megrez", "stablelm2", "hunyuan", "solar-open", "grok-2")
	set(preStarcoder, "starcoder", "refact", "command-r", "smollm", "codeshell", "exaone", "minerva-7b", "mellum2")
	set(preFalcon, "falcon")
	set(preDSCoder, "deepseek-coder")
	set(preDSLLM, "deepseek-llm")
	set(preDS3, "deepseek-v3", "hunyuan-dense", "joyai-llm", "hy_v4")
	set(prePoro, "poro-chat", "bloom", "gpt3-finnish")
	set(preViking, "viking")
	set(preTekken, "tekken")
	set(preGPT4o, "gpt-4o", "llama4", "kanana2", "talkie", "minimax-m2")
	set(preQwen35, "qwen35")
	set(preChameleon, "chameleon")
	set(preBailing, "bailingmoe", "bailingmoe2", "llada-moe")
	set(preSeedCoder, "seed-coder")
	set(preUfakzeka, "ufakzeka")
	set(preLaguna, "laguna")
	set(preExaoneMoE, "exaone-moe")
	set(preMiniCPM5, "minicpm5")
	set(preJais2, "jais-2")
	set(preGemma4, "gemma4", "granite-embed-multi-311m")
	set(preSarvam, "sarvam-moe")
	return m
}()

// splitText is the text being pre-tokenized, as code points, with the views
// the split steps read.
type splitText struct {
	cpts      []rune
	flags     []cpFlags
	collapsed []rune // one rune per code point: its category stand-in
	plain     []rune // cpts with non-ASCII whitespace replaced by '\v'
}

func (t *splitText) reset(cpts []rune) {
	t.cpts = cpts
	t.flags = t.flags[:0]
	for _, c := range cpts {
		t.flags = append(t.flags, flagsOf(c))
	}
	t.collapsed, t.plain = t.collapsed[:0], t.plain[:0]
}

// Collapsed stand-ins for the categories \p{N}, \p{L}, \p{P}, \p{M}, \p{S}
// and for any other non-ASCII code point, as llama.cpp chose them.
const (
	collapsedOther  = 0xD0
	collapsedNumber = 0xD1
	collapsedLetter = 0xD2
	collapsedPunct  = 0xD3
	collapsedMark   = 0xD4
	collapsedSymbol = 0xD5
)

// collapsedText returns the text with each code point at or above 0x80
// replaced by '\v' when it is whitespace, else by its category's stand-in.
func (t *splitText) collapsedText() []rune {
	if len(t.collapsed) == len(t.cpts) {
		return t.collapsed
	}
	for i, c := range t.cpts {
		if c >= 0x80 {
			f := t.flags[i]
			switch {
			case f.space():
				c = '\v'
			case f&cfNumber != 0:
				c = collapsedNumber
			case f&cfLetter != 0:
				c = collapsedLetter
			case f&cfPunct != 0:
				c = collapsedPunct
			case f&cfMark != 0:
				c = collapsedMark
			case f&cfSymbol != 0:
				c = collapsedSymbol
			default:
				c = collapsedOther
			}
		}
		t.collapsed = append(t.collapsed, c)
	}
	return t.collapsed
}

// plainText returns the code points with non-ASCII whitespace replaced by
// '\v', which is what the expressions without categories see in llama.cpp.
func (t *splitText) plainText() []rune {
	if len(t.plain) == len(t.cpts) {
		return t.plain
	}
	for i, c := range t.cpts {
		if c >= 0x80 && t.flags[i].space() {
			c = '\v'
		}
		t.plain = append(t.plain, c)
	}
	return t.plain
}

// splitStep cuts the piece [lo,hi) of t and appends the end of each of its
// parts to ends (the last one is hi).
type splitStep interface {
	split(t *splitText, lo, hi int, ends []int) []int
}

// preTokenizer cuts text into the words BPE merges within.
type preTokenizer struct {
	steps []splitStep
	spec  preSpec
}

// newPreTokenizer builds the pre-tokenizer llama.cpp uses for the
// tokenizer.ggml.pre value pre.
func newPreTokenizer(pre string) (*preTokenizer, error) {
	spec, ok := preSpecs[pre]
	if !ok {
		return nil, fmt.Errorf("tokenizer: unknown BPE pre-tokenizer %q", pre)
	}
	p, err := compilePreTokenizer(spec.exprs)
	if err != nil {
		return nil, fmt.Errorf("tokenizer: pre-tokenizer %q: %w", pre, err)
	}
	p.spec = spec
	return p, nil
}

// compilePreTokenizer turns a list of llama.cpp expressions into split steps.
func compilePreTokenizer(exprs []string) (*preTokenizer, error) {
	p := &preTokenizer{}
	for _, e := range exprs {
		var step splitStep
		switch e {
		case reGPT2:
			step = gpt2Scanner{}
		case reLlama3, reLlama3Orig:
			step = llama3Scanner{maxDigits: 3}
		case reQwen2:
			// llama.cpp runs this one through std::regex; the scanner gives
			// the same cuts (pretokenize_test.go checks it against the regex).
			step = llama3Scanner{maxDigits: 1}
		default:
			r, err := compileRegexStep(e)
			if err != nil {
				return nil, err
			}
			step = r
		}
		p.steps = append(p.steps, step)
	}
	return p, nil
}

// splitEnds cuts t and returns the end of every word, in code points. The
// two buffers in bufs are reused (and updated) across calls.
func (p *preTokenizer) splitEnds(t *splitText, bufs *[2][]int) []int {
	if len(t.cpts) == 0 {
		return nil
	}
	cur, next := append(bufs[0][:0], len(t.cpts)), bufs[1]
	for _, s := range p.steps {
		next = next[:0]
		lo := 0
		for _, hi := range cur {
			next = s.split(t, lo, hi, next)
			lo = hi
		}
		cur, next = next, cur
	}
	bufs[0], bufs[1] = cur, next
	return cur
}

// split cuts text into words. Invalid UTF-8 comes back as U+FFFD, as it
// reaches llama.cpp's merges.
func (p *preTokenizer) split(text string) []string {
	var t splitText
	t.reset(decodeCodepoints(text, nil))
	var words []string
	var bufs [2][]int
	lo := 0
	for _, hi := range p.splitEnds(&t, &bufs) {
		var b []byte
		for _, c := range t.cpts[lo:hi] {
			b = appendCodepoint(b, c)
		}
		words = append(words, string(b))
		lo = hi
	}
	return words
}

// span is the part [lo,hi) of a splitText that one step is cutting. Outside
// it there are no code points: cp returns -1 and flags returns 0.
type span struct {
	t      *splitText
	lo, hi int
}

func (s span) cp(i int) rune {
	if i >= s.lo && i < s.hi {
		return s.t.cpts[i]
	}
	return -1
}

func (s span) flags(i int) cpFlags {
	if i >= s.lo && i < s.hi {
		return s.t.flags[i]
	}
	return 0
}

// contraction returns the length of an English contraction ('s 't 're 've
// 'm 'll 'd) at i, or 0. With fold the letters match in either case.
func (s span) contraction(i int, fold bool) int {
	if s.cp(i) != '\'' || i+1 >= s.hi {
		return 0
	}
	lower := func(c rune) rune {
		if fold && c >= 'A' && c <= 'Z' {
			return c + 'a' - 'A'
		}
		return c
	}
	switch a := lower(s.cp(i + 1)); a {
	case 's', 't', 'm', 'd':
		return 2
	case 'r', 'v', 'l':
		if i+2 >= s.hi {
			return 0
		}
		b := lower(s.cp(i + 2))
		if (a == 'r' || a == 'v') && b == 'e' || a == 'l' && b == 'l' {
			return 3
		}
	}
	return 0
}

// spaceRun returns the number of whitespace code points from i and the end
// of the last '\r' or '\n' among them (0 when there is none).
func (s span) spaceRun(i int) (n, lastNewline int) {
	for s.flags(i + n).space() {
		if c := s.cp(i + n); c == '\r' || c == '\n' {
			lastNewline = i + n + 1
		}
		n++
	}
	return n, lastNewline
}

// endOfSpaces ends a word that starts with whitespace: a run followed by
// more text leaves its last whitespace to the next word (\s+(?!\S)).
func (s span) endOfSpaces(i, n int) int {
	switch {
	case n > 1 && i+n < s.hi:
		return i + n - 1
	case n > 0:
		return i + n
	}
	return i + 1 // not reached for valid code points; keeps the scan moving
}

// other reports a code point that is neither whitespace, letter nor number
// (flags 0, outside the piece, is not one).
func isOther(f cpFlags) bool { return f&(cfSpace|cfLetter|cfNumber) == 0 && f != 0 }

// gpt2Scanner is llama.cpp's hand-written form of GPT-2's expression
// 's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
type gpt2Scanner struct{}

func (gpt2Scanner) split(t *splitText, lo, hi int, ends []int) []int {
	s := span{t, lo, hi}
	for i := lo; i < hi; {
		i = s.gpt2Word(i)
		ends = append(ends, i)
	}
	return ends
}

func (s span) gpt2Word(i int) int {
	if n := s.contraction(i, false); n > 0 {
		return i + n
	}
	// An optional space joins the letters, digits or symbols after it.
	j, f := i, s.flags(i)
	if s.cp(i) == ' ' {
		j, f = i+1, s.flags(i+1)
	}
	switch {
	case f.letter():
		for s.flags(j).letter() {
			j++
		}
		return j
	case f.number():
		for s.flags(j).number() {
			j++
		}
		return j
	case isOther(f):
		for isOther(s.flags(j)) {
			j++
		}
		return j
	}
	n, _ := s.spaceRun(i)
	return s.endOfSpaces(i, n)
}

// llama3Scanner is llama.cpp's hand-written form of Llama 3's expression
// (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
// With maxDigits 1 it is Qwen2's, whose digits go one by one.
type llama3Scanner struct{ maxDigits int }

func (sc llama3Scanner) split(t *splitText, lo, hi int, ends []int) []int {
	s := span{t, lo, hi}
	for i := lo; i < hi; {
		i = s.llama3Word(i, sc.maxDigits)
		ends = append(ends, i)
	}
	return ends
}

func (s span) llama3Word(i, maxDigits int) int {
	if n := s.contraction(i, true); n > 0 {
		return i + n
	}
	c, f := s.cp(i), s.flags(i)
	// Letters, with one leading code point that is not a newline, letter or
	// digit.
	if c != '\r' && c != '\n' && !f.number() && (f.letter() || s.flags(i+1).letter()) {
		j := i + 1
		for s.flags(j).letter() {
			j++
		}
		return j
	}
	if f.number() {
		j := i
		for j < i+maxDigits && s.flags(j).number() {
			j++
		}
		return j
	}
	// Symbols with an optional leading space, then any newlines.
	j, g := i, f
	if c == ' ' {
		j, g = i+1, s.flags(i+1)
	}
	if g&(cfSpace|cfLetter|cfNumber) == 0 && f != 0 {
		for isOther(s.flags(j)) {
			j++
		}
		for c := s.cp(j); c == '\r' || c == '\n'; c = s.cp(j) {
			j++
		}
		return j
	}
	n, lastNewline := s.spaceRun(i)
	if lastNewline > 0 {
		return lastNewline
	}
	return s.endOfSpaces(i, n)
}

// regexStep runs one expression the way llama.cpp's std::regex fallback
// does: on the collapsed text when it uses Unicode categories, else on the
// code points with non-ASCII whitespace as '\v'.
type regexStep struct {
	re        *regexp2.Regexp
	collapsed bool
}

func (r regexStep) split(t *splitText, lo, hi int, ends []int) []int {
	var text []rune
	if r.collapsed {
		text = t.collapsedText()
	} else {
		text = t.plainText()
	}
	seg := text[lo:hi]
	// Both a match and the gap before it are words; last is the end of the
	// word appended last, relative to lo.
	last := 0
	m, err := r.re.FindRunesMatch(seg)
	for ; m != nil && err == nil; m, err = r.re.FindNextMatch(m) {
		for _, e := range [2]int{m.Index, m.Index + m.Length} {
			if e > last {
				ends = append(ends, lo+e)
				last = e
			}
		}
	}
	if last < len(seg) {
		ends = append(ends, hi)
	}
	return ends
}

// categoryNames are the Unicode classes llama.cpp rewrites for the collapsed
// text: each stands for its collapsed rune plus the ASCII members of the
// class. (\p{S} leaves out '~', as llama.cpp's does; letter subclasses are
// approximated by \p{L}.)
var categoryNames = map[string]string{
	`\p{N}`:  string(rune(collapsedNumber)) + `0-9`,
	`\p{L}`:  string(rune(collapsedLetter)) + `A-Za-z`,
	`\p{P}`:  string(rune(collapsedPunct)) + `!-#%-*,-/:-;?-@\[-\]_\{\}`,
	`\p{M}`:  string(rune(collapsedMark)),
	`\p{S}`:  string(rune(collapsedSymbol)) + `\$\+<->\^` + "`" + `\|`,
	`\p{Lu}`: string(rune(collapsedLetter)) + `A-Za-z`,
	`\p{Ll}`: string(rune(collapsedLetter)) + `A-Za-z`,
	`\p{Lt}`: string(rune(collapsedLetter)) + `A-Za-z`,
	`\p{Lm}`: string(rune(collapsedLetter)) + `A-Za-z`,
	`\p{Lo}`: string(rune(collapsedLetter)) + `A-Za-z`,
}

// ASCII classes that std::regex's \s, \d and \w match in the C locale.
const (
	classSpace = "\\t\\n\\x0B\\f\\r "
	classDigit = "0-9"
	classWord  = "A-Za-z0-9_"
)

// compileRegexStep translates a llama.cpp (ECMAScript) expression for
// regexp2: categories become collapsed classes, \s \d \w their ASCII
// std::regex meaning, and $ the very end of the piece.
func compileRegexStep(expr string) (regexStep, error) {
	collapsed := false
	for name := range categoryNames {
		if strings.Contains(expr, name) {
			collapsed = true
			break
		}
	}
	if collapsed {
		for _, c := range expr {
			if c >= 0x80 {
				return regexStep{}, fmt.Errorf("expression %q mixes Unicode categories and non-ASCII characters", expr)
			}
		}
	}
	var b strings.Builder
	inClass := false
	rs := []rune(expr)
	for i := 0; i < len(rs); i++ {
		c := rs[i]
		switch {
		case c == '\\' && i+1 < len(rs):
			n := rs[i+1]
			if n == 'p' && collapsed {
				if members, end := categoryAt(rs, i); end > 0 {
					if inClass {
						b.WriteString(members)
					} else {
						b.WriteString("[" + members + "]")
					}
					i = end - 1
					continue
				}
			}
			i++
			cls, negated := "", false
			switch n {
			case 's', 'S':
				cls, negated = classSpace, n == 'S'
			case 'd', 'D':
				cls, negated = classDigit, n == 'D'
			case 'w', 'W':
				cls, negated = classWord, n == 'W'
			default:
				b.WriteRune('\\')
				b.WriteRune(n)
				continue
			}
			switch {
			case inClass && negated:
				return regexStep{}, fmt.Errorf("expression %q: \\%c inside a class is not supported", expr, n)
			case inClass:
				b.WriteString(cls)
			case negated:
				b.WriteString("[^" + cls + "]")
			default:
				b.WriteString("[" + cls + "]")
			}
		case c == '[' && !inClass:
			inClass = true
			b.WriteRune(c)
		case c == ']' && inClass:
			inClass = false
			b.WriteRune(c)
		case c == '$' && !inClass:
			b.WriteString(`\z`)
		default:
			b.WriteRune(c)
		}
	}
	re, err := regexp2.Compile(b.String(), regexp2.ECMAScript)
	if err != nil {
		return regexStep{}, fmt.Errorf("expression %q: %w", expr, err)
	}
	return regexStep{re: re, collapsed: collapsed}, nil
}

// categoryAt returns the collapsed class members of the category name (such
// as \p{L}) starting at rs[i], and the index just past it; end is 0 when
// there is no known name there.
func categoryAt(rs []rune, i int) (members string, end int) {
	for j := i + 2; j < len(rs) && j <= i+10; j++ {
		if rs[j] == '}' {
			members, ok := categoryNames[string(rs[i:j+1])]
			if !ok {
				return "", 0
			}
			return members, j + 1
		}
	}
	return "", 0
}
