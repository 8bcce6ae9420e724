package sona

import (
	"math"
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Limits of the feature space.
const (
	// DefaultFeatureBits is Options.FeatureBits when it is 0: 2^16 hashed
	// buckets, few enough collisions for the n-grams of many thousands of
	// distinct prompts.
	DefaultFeatureBits = 16
	minFeatureBits     = 8
	maxFeatureBits     = 22
	// maxWords bounds the words of a text that features read: of a longer
	// text the first and the last maxWords/2, where instructions and their
	// constraints usually sit, so that a huge prompt cannot slow a decision.
	maxWords = 1024
	// featureVersion names the way features are made; stored trajectories of
	// another version are not reused. Raise it whenever extract changes.
	featureVersion = 1
)

// Request is what the router sees of a request before choosing its arm.
type Request struct {
	// ID names the request's trajectory: the completion id that its
	// outcome and later feedback refer to; "" records nothing.
	ID string
	// Text is the prompt as text: a chat's messages joined by newlines.
	Text string
	// MaxTokens is the cap on the answer the client set; 0 for none.
	MaxTokens int
	// User is the client's end-user id (OpenAI's "user"), "" for none:
	// users differ in what they rate well.
	User string
	// CostWeight overrides Options.CostWeight for this request; nil keeps
	// the router's.
	CostWeight *float64
}

// term is one non-zero entry of a sparse feature vector.
type term struct {
	idx uint32
	val float32
}

// Dense features, each at a fixed position after the hashed buckets.
const (
	denseBias = iota
	denseWords
	denseMaxTokens
	denseHasMaxTokens
	denseDigits
	densePunct
	denseLines
	numDense
)

// features describe one request: the hashed n-grams of its text (the
// vector that nearest neighbours compare), numbers about its shape, and its
// user's bucket.
type features struct {
	// text is sorted by idx and has unit L2 norm (empty for an empty text).
	text  []term
	dense [numDense]float32
	// user is the hashed bucket of Request.User, when hasUser.
	user    uint32
	hasUser bool
}

// Namespaces keep the n-grams of different kinds apart in the hash.
const (
	nsUnigram uint64 = iota + 1
	nsBigram
	nsHead1
	nsHead2
	nsHead3
	nsTail1
	nsTail2
	nsCross
	nsUser
)

// mix folds x into the hash h (multiply-xorshift, as splitmix64 mixes):
// fixed, so that stored features stay valid across runs.
func mix(h, x uint64) uint64 {
	h ^= x + 0x9e3779b97f4a7c15 + (h << 6) + (h >> 2)
	h ^= h >> 30
	h *= 0xbf58476d1ce4e5b9
	h ^= h >> 27
	h *= 0x94d049bb133111eb
	h ^= h >> 31
	return h
}

// fnv64 is FNV-1a of s, a token's identity.
func fnv64(s string) uint64 {
	h := uint64(14695981039346656037)
	for i := 0; i < len(s); i++ {
		h ^= uint64(s[i])
		h *= 1099511628211
	}
	return h
}

// tokenKind tells the words, numbers and marks of a text apart.
type tokenKind uint8

const (
	kindWord tokenKind = iota
	kindNumber
	kindMark
)

// tokenize splits lower-cased text into words (runs of letters), numbers
// (runs of digits, reduced to their number of digits, so that "17" and "42"
// are alike), and single marks (punctuation and symbols); ideographs are a
// word each, since those scripts do not separate words with spaces. It
// returns each token's hash and counts numbers, marks and line breaks.
func tokenize(text string, hashes []uint64) (out []uint64, numbers, marks, lines int) {
	out = hashes[:0]
	i := 0
	for i < len(text) {
		r, size := utf8.DecodeRuneInString(text[i:])
		switch {
		case r == '\n':
			lines++
			i += size
		case unicode.IsSpace(r):
			i += size
		case unicode.Is(unicode.Han, r) || unicode.Is(unicode.Hiragana, r) || unicode.Is(unicode.Katakana, r):
			out = append(out, fnv64(text[i:i+size]))
			i += size
		case unicode.IsLetter(r) || unicode.IsMark(r):
			j := i + size
			for j < len(text) {
				r2, s2 := utf8.DecodeRuneInString(text[j:])
				if !(unicode.IsLetter(r2) || unicode.IsMark(r2)) || unicode.Is(unicode.Han, r2) {
					break
				}
				j += s2
			}
			out = append(out, fnv64(text[i:j]))
			i = j
		case unicode.IsDigit(r):
			j := i + size
			for j < len(text) {
				r2, s2 := utf8.DecodeRuneInString(text[j:])
				if !unicode.IsDigit(r2) {
					break
				}
				j += s2
			}
			digits := min(utf8.RuneCountInString(text[i:j]), 4)
			out = append(out, mix(uint64(kindNumber), uint64(digits)))
			numbers++
			i = j
		default:
			out = append(out, mix(uint64(kindMark), uint64(r)))
			marks++
			i += size
		}
	}
	return out, numbers, marks, lines
}

// extractor makes features; it holds the size of the hashed space.
type extractor struct {
	bits uint
	mask uint32
}

func newExtractor(bits int) extractor {
	return extractor{bits: uint(bits), mask: uint32(1)<<bits - 1}
}

// buckets is the number of hashed buckets.
func (x extractor) buckets() int { return int(x.mask) + 1 }

func (x extractor) bucket(h uint64) uint32 { return uint32(h) & x.mask }

// extract describes r: unigrams and bigrams of its tokens; its first one,
// two and three tokens and its last one and two (an instruction's verb
// usually leads, its constraints trail); and the conjunction of its first
// and last two tokens, so that a linear model can tell "what is asked" ×
// "how hard" apart from their sum. Each bucket's value is 1 + ln(count),
// and the vector is scaled to unit length.
func (x extractor) extract(r Request) features {
	var f features
	text := strings.ToLower(r.Text)
	var scratch [256]uint64
	toks, numbers, marks, lines := tokenize(text, scratch[:0])
	if len(toks) > maxWords {
		toks = append(toks[:maxWords/2:maxWords/2], toks[len(toks)-maxWords/2:]...)
	}
	n := len(toks)
	idx := make([]uint32, 0, 2*n+8)
	for i, t := range toks {
		idx = append(idx, x.bucket(mix(nsUnigram, t)))
		if i+1 < n {
			idx = append(idx, x.bucket(mix(mix(nsBigram, t), toks[i+1])))
		}
	}
	if n > 0 {
		idx = append(idx, x.bucket(mix(nsHead1, toks[0])), x.bucket(mix(nsTail1, toks[n-1])))
	}
	if n > 1 {
		idx = append(idx, x.bucket(mix(mix(nsHead2, toks[0]), toks[1])), x.bucket(mix(mix(nsTail2, toks[n-2]), toks[n-1])))
	}
	if n > 2 {
		idx = append(idx, x.bucket(mix(mix(mix(nsHead3, toks[0]), toks[1]), toks[2])))
	}
	if n > 3 {
		idx = append(idx, x.bucket(mix(mix(mix(mix(nsCross, toks[0]), toks[1]), toks[n-2]), toks[n-1])))
	}
	slices.Sort(idx)
	f.text = make([]term, 0, len(idx))
	var norm float64
	for i := 0; i < len(idx); {
		j := i + 1
		for j < len(idx) && idx[j] == idx[i] {
			j++
		}
		v := 1 + math.Log(float64(j-i))
		norm += v * v
		f.text = append(f.text, term{idx: idx[i], val: float32(v)})
		i = j
	}
	if norm > 0 {
		s := float32(1 / math.Sqrt(norm))
		for i := range f.text {
			f.text[i].val *= s
		}
	}
	f.dense[denseBias] = 1
	f.dense[denseWords] = float32(math.Log1p(float64(n)) / 8)
	if r.MaxTokens > 0 {
		f.dense[denseMaxTokens] = float32(math.Log1p(float64(r.MaxTokens)) / 10)
		f.dense[denseHasMaxTokens] = 1
	}
	if n > 0 {
		f.dense[denseDigits] = float32(numbers) / float32(n)
		f.dense[densePunct] = float32(marks) / float32(n)
	}
	f.dense[denseLines] = float32(math.Log1p(float64(lines)) / 5)
	if r.User != "" {
		f.user, f.hasUser = x.bucket(mix(nsUser, fnv64(r.User))), true
	}
	return f
}

// cosine is the dot product of two unit vectors sorted by idx.
func cosine(a, b []term) float32 {
	var s float32
	i, j := 0, 0
	for i < len(a) && j < len(b) {
		switch {
		case a[i].idx < b[j].idx:
			i++
		case a[i].idx > b[j].idx:
			j++
		default:
			s += a[i].val * b[j].val
			i++
			j++
		}
	}
	return s
}
