package grammar

import (
	"fmt"
	"math"
	"math/big"
	"strconv"
	"strings"
)

// maxMagnitude is the largest integer magnitude the grammars write
// (maxIntDigits digits); bounds beyond it are no bounds.
const maxMagnitude = 1e16 - 1

// natRange matches the decimal numbers lo … hi (0 <= lo <= hi), written
// without leading zeros: one alternative per digit count, each split by
// digits as the range of the numbers of that length requires.
func natRange(lo, hi int64) *Expr {
	var alts []*Expr
	for n := len(strconv.FormatInt(lo, 10)); n <= len(strconv.FormatInt(hi, 10)); n++ {
		first, last := int64(0), pow10(n)-1
		if n > 1 {
			first = pow10(n - 1)
		}
		a, b := max(lo, first), min(hi, last)
		if a <= b {
			alts = append(alts, sameLength(strconv.FormatInt(a, 10), strconv.FormatInt(b, 10)))
		}
	}
	return Alt(alts...)
}

func pow10(n int) int64 {
	p := int64(1)
	for range n {
		p *= 10
	}
	return p
}

// sameLength matches the digit strings from lo to hi, which have the same
// length.
func sameLength(lo, hi string) *Expr {
	if lo == hi {
		return Lit(lo)
	}
	if len(lo) == 1 {
		return Byte(Range(lo[0], hi[0]))
	}
	if lo[0] == hi[0] {
		return Seq(Lit(lo[:1]), sameLength(lo[1:], hi[1:]))
	}
	n := len(lo) - 1
	var alts []*Expr
	from, to := lo[0], hi[0]
	if strings.Trim(lo[1:], "0") != "" {
		alts = append(alts, Seq(Lit(lo[:1]), sameLength(lo[1:], strings.Repeat("9", n))))
		from++
	}
	var last *Expr
	if strings.Trim(hi[1:], "9") != "" {
		last = Seq(Lit(hi[:1]), sameLength(strings.Repeat("0", n), hi[1:]))
		to--
	}
	if from <= to {
		alts = append(alts, Seq(Byte(Range(from, to)), Repeat(Byte(Range('0', '9')), n, n)))
	}
	if last != nil {
		alts = append(alts, last)
	}
	return Alt(alts...)
}

// intRange matches the integers lo … hi (lo <= hi, both within
// ±maxMagnitude).
func intRange(lo, hi int64) *Expr {
	var alts []*Expr
	if lo < 0 {
		alts = append(alts, Seq(Lit("-"), natRange(max(1, -hi), -lo)))
	}
	if hi >= 0 {
		alts = append(alts, natRange(max(lo, 0), hi))
	}
	return Alt(alts...)
}

// bound is a limit of a number schema: minimum or maximum, maybe
// exclusive; set is false for no limit.
type bound struct {
	set       bool
	v         float64
	exclusive bool
}

// integerBounds are the least and greatest integers within lo and hi,
// clamped to ±maxMagnitude.
func integerBounds(lo, hi bound) (int64, int64) {
	a, b := -maxMagnitude, maxMagnitude
	if lo.set {
		c := math.Ceil(lo.v)
		if lo.exclusive && c == lo.v {
			c++
		}
		a = max(a, c)
	}
	if hi.set {
		f := math.Floor(hi.v)
		if hi.exclusive && f == hi.v {
			f--
		}
		b = min(b, f)
	}
	return clampInt(a), clampInt(b)
}

// clampInt is x as an integer within ±(maxMagnitude+1).
func clampInt(x float64) int64 {
	return int64(min(max(x, -maxMagnitude-1), maxMagnitude+1))
}

// boundedInteger matches the integers within lo and hi, or nil if there
// is none.
func boundedInteger(lo, hi bound) *Expr {
	a, b := integerBounds(lo, hi)
	a, b = max(a, -maxMagnitude), min(b, maxMagnitude)
	if a > b {
		return nil
	}
	return intRange(a, b)
}

// boundedNumber matches the numbers within lo and hi, or nil if there is
// none: the integers (intRange), and numbers with a fraction of up to
// maxFracDigits digits, by sign, by their magnitude's range.
func boundedNumber(lo, hi bound) *Expr {
	var alts []*Expr
	if e := boundedInteger(lo, hi); e != nil {
		alts = append(alts, e)
	}
	// n.f lies in [max(lo, 0), hi]; -n.f's magnitude in [max(-hi, 0), -lo].
	if !hi.set || hi.v >= 0 {
		a := bound{set: true, v: 0}
		if lo.set && lo.v >= 0 {
			a = lo
		}
		if e := fractions(a, hi); e != nil {
			alts = append(alts, e)
		}
	}
	if !lo.set || lo.v < 0 {
		a := bound{set: true, v: 0}
		if hi.set && hi.v <= 0 {
			a = bound{set: true, v: -hi.v, exclusive: hi.exclusive}
		}
		b := bound{}
		if lo.set {
			b = bound{set: true, v: -lo.v, exclusive: lo.exclusive}
		}
		if e := fractions(a, b); e != nil {
			alts = append(alts, Seq(Lit("-"), e))
		}
	}
	if len(alts) == 0 {
		return nil
	}
	return Alt(alts...)
}

// fractions matches "n.f", numbers with a fraction whose value lies
// within a and b (a set, 0 <= a; b unset for no limit), or nil if none
// does. The integer parts strictly between a's and b's take any fraction;
// a's and b's own integer parts take the fractions on the right side of
// theirs.
func fractions(a, b bound) *Expr {
	if b.set && (b.v < a.v || (b.v == a.v && (a.exclusive || b.exclusive))) {
		return nil
	}
	na, fa := splitDecimal(a.v)
	nb, fb := int64(maxMagnitude), ""
	if b.set {
		nb, fb = splitDecimal(b.v)
	}
	if na > maxMagnitude {
		return nil
	}
	nb = min(nb, maxMagnitude)
	whole := func(n int64) *Expr { return Seq(Lit(strconv.FormatInt(n, 10)), Lit(".")) }
	if na == nb {
		var e *Expr
		if b.set {
			e = fracBetween(fa, fb, a.exclusive, b.exclusive, true)
		} else {
			e = fracAtLeast(fa, a.exclusive, true)
		}
		if e == nil {
			return nil
		}
		return Seq(whole(na), e)
	}
	var alts []*Expr
	if e := fracAtLeast(fa, a.exclusive, true); e != nil {
		alts = append(alts, Seq(whole(na), e))
	}
	if na+1 <= nb-1 {
		alts = append(alts, Seq(natRange(na+1, nb-1), Lit("."), anyFraction()))
	}
	if !b.set {
		alts = append(alts, Seq(whole(nb), anyFraction()))
	} else if e := fracAtMost(fb, b.exclusive, true); e != nil {
		alts = append(alts, Seq(whole(nb), e))
	}
	if len(alts) == 0 {
		return nil
	}
	return Alt(alts...)
}

// splitDecimal splits x >= 0 into its integer part and the digits of its
// fraction, without trailing zeros ("" for an integer).
func splitDecimal(x float64) (int64, string) {
	s := strconv.FormatFloat(x, 'f', -1, 64)
	w, f, _ := strings.Cut(s, ".")
	if len(w) > maxIntDigits {
		return maxMagnitude + 1, ""
	}
	n, _ := strconv.ParseInt(w, 10, 64)
	return n, strings.TrimRight(f, "0")
}

func anyFraction() *Expr { return Repeat(Byte(Range('0', '9')), 1, maxFracDigits) }

// The fraction comparisons below match digit strings f of at most
// maxFracDigits digits (at least one when first) against the digits g of
// a bound's fraction, comparing 0.f with 0.g. n is how many digits are
// left to write.

// fracAtLeast: 0.f >= 0.g, or > if strict.
func fracAtLeast(g string, strict, first bool) *Expr { return fracGE(g, strict, first, maxFracDigits) }

func fracGE(g string, strict, first bool, n int) *Expr {
	d := Byte(Range('0', '9'))
	if n == 0 {
		if g == "" && !strict && !first {
			return Empty()
		}
		return nil
	}
	if g == "" {
		if !strict {
			return Repeat(d, boolInt(first), n)
		}
		// Some digit after here must be non-zero.
		var alts []*Expr
		for k := 0; k < n; k++ {
			alts = append(alts, Seq(Repeat(Lit("0"), k, k), Byte(Range('1', '9')), Repeat(d, 0, n-k-1)))
		}
		return Alt(alts...)
	}
	var alts []*Expr
	if g[0] < '9' {
		alts = append(alts, Seq(Byte(Range(g[0]+1, '9')), Repeat(d, 0, n-1)))
	}
	if rest := fracGE(g[1:], strict, false, n-1); rest != nil {
		alts = append(alts, Seq(Lit(g[:1]), rest))
	}
	if len(alts) == 0 {
		return nil
	}
	return Alt(alts...)
}

// fracAtMost: 0.f <= 0.g, or < if strict.
func fracAtMost(g string, strict, first bool) *Expr { return fracLE(g, strict, first, maxFracDigits) }

func fracLE(g string, strict, first bool, n int) *Expr {
	d := Byte(Range('0', '9'))
	if g == "" {
		// Only zeros are left: equal.
		if strict {
			return nil
		}
		return Repeat(Lit("0"), boolInt(first), n)
	}
	var alts []*Expr
	if !first {
		alts = append(alts, Empty()) // stop: 0.g has a non-zero digit to come
	}
	if n == 0 {
		return Alt(alts...)
	}
	if g[0] > '0' {
		alts = append(alts, Seq(Byte(Range('0', g[0]-1)), Repeat(d, 0, n-1)))
	}
	if rest := fracLE(g[1:], strict, false, n-1); rest != nil {
		alts = append(alts, Seq(Lit(g[:1]), rest))
	}
	if len(alts) == 0 {
		return nil
	}
	return Alt(alts...)
}

// fracBetween: 0.a <= 0.f <= 0.b (strict on either side as told), for
// a's and b's fractions of the same integer part.
func fracBetween(a, b string, strictA, strictB, first bool) *Expr {
	return fracBetweenN(a, b, strictA, strictB, first, maxFracDigits)
}

func fracBetweenN(a, b string, strictA, strictB, first bool, n int) *Expr {
	if a == "" {
		// Any f >= 0 (> 0 if strict) that is <= b.
		if !strictA {
			return fracLE(b, strictB, first, n)
		}
		if b == "" || n == 0 {
			return nil
		}
		d := Byte(Range('0', '9'))
		// f > 0 and f <= b: a zero digit keeps both open; a digit
		// between 1 and b's (exclusive) settles both; b's digit needs
		// the rest <= b's rest, and > 0 only if b's digit is 0.
		var alts []*Expr
		if b[0] > '1' {
			alts = append(alts, Seq(Byte(Range('1', b[0]-1)), Repeat(d, 0, n-1)))
		}
		if b[0] == '0' {
			if rest := fracBetweenN("", b[1:], true, strictB, false, n-1); rest != nil {
				alts = append(alts, Seq(Lit("0"), rest))
			}
		} else if rest := fracLE(b[1:], strictB, false, n-1); rest != nil {
			alts = append(alts, Seq(Lit(b[:1]), rest))
		}
		if len(alts) == 0 {
			return nil
		}
		return Alt(alts...)
	}
	if b == "" {
		return nil // 0.b = 0 < 0.a
	}
	if n == 0 {
		return nil
	}
	if a[0] == b[0] {
		rest := fracBetweenN(a[1:], b[1:], strictA, strictB, false, n-1)
		if rest == nil {
			return nil
		}
		return Seq(Lit(a[:1]), rest)
	}
	d := Byte(Range('0', '9'))
	var alts []*Expr
	if rest := fracGE(a[1:], strictA, false, n-1); rest != nil {
		alts = append(alts, Seq(Lit(a[:1]), rest))
	}
	if a[0]+1 <= b[0]-1 {
		alts = append(alts, Seq(Byte(Range(a[0]+1, b[0]-1)), Repeat(d, 0, n-1)))
	}
	if rest := fracLE(b[1:], strictB, false, n-1); rest != nil {
		alts = append(alts, Seq(Lit(b[:1]), rest))
	}
	if len(alts) == 0 {
		return nil
	}
	return Alt(alts...)
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// maxListedMultiples is the most multiples that multiples writes as a
// list rather than through an automaton.
const maxListedMultiples = 1024

// multiples is the expression of the numbers within lo and hi that are
// multiples of m (integers only if integer), as JSON schema's multipleOf
// reads it: the quotient is an integer, exactly (as decimals, not
// binary floating point). m is a decimal a/10^e: the numbers written are
// those of at most e fraction digits whose digits, read as an integer
// scaled to e fraction digits, are a multiple of a (when m is an integer,
// only integers). When lo and hi leave few multiples, they are listed;
// otherwise the numbers of the bounds are intersected with an automaton
// of their digits' remainder modulo a.
func (c *schemaCompiler) multiples(m *big.Rat, lo, hi bound, integer bool) (*Expr, error) {
	// m = a / 10^e.
	e := 0
	scaled := new(big.Rat).Set(m)
	for !scaled.IsInt() {
		if e > maxFracDigits {
			return nil, fmt.Errorf("multipleOf %s has more than %d fraction digits", m.FloatString(maxFracDigits+1), maxFracDigits)
		}
		scaled.Mul(scaled, big.NewRat(10, 1))
		e++
	}
	if !m.IsInt() && integer {
		// An integer is a multiple of a/10^e when it is one of a/gcd(a, 10^e).
		a := scaled.Num()
		p := new(big.Int).Exp(big.NewInt(10), big.NewInt(int64(e)), nil)
		g := new(big.Int).GCD(nil, nil, a, p)
		m = new(big.Rat).SetInt(new(big.Int).Quo(a, g))
		scaled, e = m, 0
	}
	if m.IsInt() {
		integer = true
	}
	a := scaled.Num()
	// Few enough multiples within the bounds: list them.
	if lo.set && hi.set {
		// The bounds as the schema wrote them (the shortest decimals of
		// their float64s), as the rest of the number grammars read them.
		loR, _ := new(big.Rat).SetString(strconv.FormatFloat(lo.v, 'g', -1, 64))
		hiR, _ := new(big.Rat).SetString(strconv.FormatFloat(hi.v, 'g', -1, 64))
		first := new(big.Rat).Quo(loR, m)
		kLo := ceilRat(first)
		if lo.exclusive && first.IsInt() {
			kLo.Add(kLo, big.NewInt(1))
		}
		last := new(big.Rat).Quo(hiR, m)
		kHi := floorRat(last)
		if hi.exclusive && last.IsInt() {
			kHi.Sub(kHi, big.NewInt(1))
		}
		n := new(big.Int).Sub(kHi, kLo)
		if n.Sign() < 0 {
			return nil, fmt.Errorf("no multiple of %s lies within the bounds", m.RatString())
		}
		if n.Cmp(big.NewInt(maxListedMultiples)) < 0 {
			var alts []*Expr
			for k := new(big.Int).Set(kLo); k.Cmp(kHi) <= 0; k.Add(k, big.NewInt(1)) {
				v := new(big.Rat).Mul(new(big.Rat).SetInt(k), m)
				if f, _ := v.Float64(); math.Abs(f) > maxMagnitude {
					continue
				}
				alts = append(alts, Lit(decimalString(v, e)))
			}
			if len(alts) == 0 {
				return nil, fmt.Errorf("no multiple of %s lies within the bounds", m.RatString())
			}
			return Alt(alts...), nil
		}
	}
	if a.BitLen() > 62 || a.Int64()*int64(e+2) > maxFAStates {
		return nil, fmt.Errorf("multipleOf %s makes a grammar too large (the automaton of its remainders would have more than %d states)", m.RatString(), maxFAStates)
	}
	var base *Expr
	switch {
	case lo.set || hi.set:
		if integer {
			base = boundedInteger(lo, hi)
		} else {
			base = boundedNumber(lo, hi)
		}
		if base == nil {
			return nil, fmt.Errorf("no number lies within the bounds (or they exceed ±%g)", float64(maxMagnitude))
		}
	case integer:
		base = jsonInteger()
	default:
		base = Seq(jsonInteger(), Opt(Seq(Lit("."), anyFraction())))
	}
	lim := &faBuild{}
	baseFA, err := treeFA(exprRe(base), lim)
	if err != nil {
		return nil, err
	}
	both, err := intersect(baseFA, remainders(a.Int64(), e), lim)
	if err == errFATooLarge {
		return nil, fmt.Errorf("multipleOf %s makes a grammar too large (%v)", m.RatString(), err)
	} else if err != nil {
		return nil, err
	}
	if both.empty() {
		return nil, fmt.Errorf("no multiple of %s lies within the bounds", m.RatString())
	}
	return both.expr(c.b.rules, c.ruleName, asciiExpr), nil
}

// jsonInteger is the expression of the integers JSON writes, within
// maxIntDigits digits.
func jsonInteger() *Expr {
	return Seq(Opt(Lit("-")), Alt(Lit("0"), Seq(Byte(Range('1', '9')), Repeat(Byte(Range('0', '9')), 0, maxIntDigits-1))))
}

// remainders is the automaton of the numbers (a sign, digits, a point and
// at most e fraction digits; no point when e is 0) that are a multiple of
// a/10^e: it follows the remainder modulo a of the digits read so far.
func remainders(a int64, e int) *fa {
	out := &fa{}
	// State of (r, f): remainder r after f fraction digits (f = -1:
	// before the point).
	pow := func(n int) int64 {
		p := int64(1) % a
		for range n {
			p = p * 10 % a
		}
		return p
	}
	id := func(r int64, f int) int32 { return int32(int64(f+1)*a + r) }
	for f := -1; f <= e; f++ {
		for r := range a {
			final := r*pow(e-max(f, 0))%a == 0 && f != 0
			out.add(final)
		}
	}
	for f := -1; f <= e; f++ {
		for r := range a {
			s := id(r, f)
			if f < e {
				next := f + 1 // a fraction digit more
				if f < 0 {
					next = f // a digit before the point
				}
				for d := range int64(10) {
					c := rune('0' + d)
					out.moves[s] = append(out.moves[s], move{chars(c, c), id((r*10+d)%a, next)})
				}
			}
			if f == -1 {
				out.moves[s] = append(out.moves[s], move{chars('-', '-'), s})
				if e > 0 {
					out.moves[s] = append(out.moves[s], move{chars('.', '.'), id(r, 0)})
				}
			}
		}
	}
	out.start = id(0, -1)
	return out
}

// decimalString writes v (with at most e fraction digits) as JSON does,
// without trailing zeros.
func decimalString(v *big.Rat, e int) string {
	s := v.FloatString(e)
	if e > 0 {
		s = strings.TrimRight(strings.TrimRight(s, "0"), ".")
	}
	if s == "-0" {
		s = "0"
	}
	return s
}

func ceilRat(x *big.Rat) *big.Int {
	q, r := new(big.Int).QuoRem(x.Num(), x.Denom(), new(big.Int))
	if r.Sign() > 0 {
		q.Add(q, big.NewInt(1))
	}
	return q
}

func floorRat(x *big.Rat) *big.Int {
	q, r := new(big.Int).QuoRem(x.Num(), x.Denom(), new(big.Int))
	if r.Sign() < 0 {
		q.Sub(q, big.NewInt(1))
	}
	return q
}

// asciiExpr matches one character of cs, all of them ASCII, as a byte.
func asciiExpr(cs charSet) *Expr {
	var set ByteSet
	for _, r := range cs {
		set.AddRange(byte(r.lo), byte(r.hi))
	}
	return Byte(set)
}
