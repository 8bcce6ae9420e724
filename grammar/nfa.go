package grammar

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// Regular languages over characters (code points), as automata: what a
// pattern becomes when a grammar alone cannot say it, so that it can be
// intersected with a length bound (counted in characters, as JSON schema
// counts them), with a format, with the complement of a negative
// lookahead, or with a divisibility test on a number's digits, and then
// written as rules, one per state. Patterns and formats without such
// companions keep their direct expressions (regex.go, schema.go).

// Limits of the automata built for one schema keyword, so that a request
// cannot make the server build a huge one: a state costs a rule and each
// move two or three elements of the grammar, so that the largest automaton
// allowed stays well within MaxElements. Refused beyond, with an error
// that says so.
const (
	maxFAStates = 1 << 15
	maxFAMoves  = 1 << 17
)

// errFATooLarge is the error of an automaton past the limits.
var errFATooLarge = fmt.Errorf("the automaton would have more than %d states or %d moves", maxFAStates, maxFAMoves)

// scalarChars is every character a JSON string can hold (every scalar
// value: the code points but the surrogates).
var scalarChars = charSet(nil).negate()

// and is the code points in both cs and o.
func (cs charSet) and(o charSet) charSet {
	var out charSet
	i, j := 0, 0
	for i < len(cs) && j < len(o) {
		lo, hi := max(cs[i].lo, o[j].lo), min(cs[i].hi, o[j].hi)
		if lo <= hi {
			out = append(out, runeRange{lo, hi})
		}
		if cs[i].hi < o[j].hi {
			i++
		} else {
			j++
		}
	}
	return out
}

// has reports whether c is in cs.
func (cs charSet) has(c rune) bool {
	i, ok := slices.BinarySearchFunc(cs, c, func(r runeRange, c rune) int {
		switch {
		case r.hi < c:
			return -1
		case r.lo > c:
			return 1
		}
		return 0
	})
	return ok && i < len(cs)
}

func (cs charSet) key() string {
	var b strings.Builder
	for _, r := range cs {
		b.WriteString(strconv.Itoa(int(r.lo)))
		b.WriteByte('-')
		b.WriteString(strconv.Itoa(int(r.hi)))
		b.WriteByte(',')
	}
	return b.String()
}

// move is a step on one character of cs to state to.
type move struct {
	cs charSet
	to int32
}

// fa is an automaton without empty moves: from start, a text is matched
// when some path of moves on its characters ends in a final state.
type fa struct {
	start int32
	moves [][]move
	final []bool
}

// faBuild counts the states and moves made for one keyword, across every
// automaton built on the way, against the limits.
type faBuild struct {
	states, moves int
}

func (b *faBuild) spend(states, moves int) error {
	b.states += states
	b.moves += moves
	if b.states > 4*maxFAStates || b.moves > 4*maxFAMoves {
		return errFATooLarge
	}
	return nil
}

func (a *fa) add(final bool) int32 {
	a.moves = append(a.moves, nil)
	a.final = append(a.final, final)
	return int32(len(a.moves) - 1)
}

func (a *fa) size() (states, moves int) {
	for _, ms := range a.moves {
		moves += len(ms)
	}
	return len(a.moves), moves
}

func (a *fa) checkSize(lim *faBuild) error {
	s, m := a.size()
	if s > maxFAStates || m > maxFAMoves {
		return errFATooLarge
	}
	return lim.spend(s, m)
}

// trim keeps the states on some path from start to a final state, and
// reports whether there are any (whether a matches some text).
func (a *fa) trim() bool {
	n := len(a.moves)
	reach := make([]bool, n)
	stack := []int32{a.start}
	reach[a.start] = true
	back := make([][]int32, n)
	for len(stack) > 0 {
		q := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		for _, m := range a.moves[q] {
			back[m.to] = append(back[m.to], q)
			if !reach[m.to] {
				reach[m.to] = true
				stack = append(stack, m.to)
			}
		}
	}
	live := make([]bool, n)
	for q := range n {
		if reach[q] && a.final[q] {
			live[q] = true
			stack = append(stack, int32(q))
		}
	}
	for len(stack) > 0 {
		q := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		for _, p := range back[q] {
			if !live[p] {
				live[p] = true
				stack = append(stack, p)
			}
		}
	}
	if !live[a.start] {
		*a = fa{moves: [][]move{nil}, final: []bool{false}}
		return false
	}
	index := make([]int32, n)
	var moves [][]move
	var final []bool
	for q := range n {
		index[q] = -1
		if live[q] {
			index[q] = int32(len(moves))
			moves = append(moves, nil)
			final = append(final, a.final[q])
		}
	}
	for q := range n {
		if !live[q] {
			continue
		}
		for _, m := range a.moves[q] {
			if live[m.to] {
				moves[index[q]] = append(moves[index[q]], move{m.cs, index[m.to]})
			}
		}
	}
	*a = fa{start: index[a.start], moves: moves, final: final}
	return true
}

// lengths are, for each state of a trimmed automaton, the fewest and the
// most characters that take it to a final state (most -1: no limit).
func (a *fa) lengths() (fewest, most []int) {
	n := len(a.moves)
	fewest = make([]int, n)
	most = make([]int, n)
	// fewest: Bellman-Ford-like relaxation in rounds of a breadth-first
	// search backwards from the final states.
	back := make([][]int32, n)
	for q, ms := range a.moves {
		for _, m := range ms {
			back[m.to] = append(back[m.to], int32(q))
		}
	}
	for q := range fewest {
		fewest[q] = -1
	}
	var queue []int32
	for q := range n {
		if a.final[q] {
			fewest[q] = 0
			queue = append(queue, int32(q))
		}
	}
	for len(queue) > 0 {
		q := queue[0]
		queue = queue[1:]
		for _, p := range back[q] {
			if fewest[p] < 0 {
				fewest[p] = fewest[q] + 1
				queue = append(queue, p)
			}
		}
	}
	// most: the longest path to a final state, unbounded on a cycle
	// (every state of a trimmed automaton reaches a final one).
	const (
		white = iota
		grey
		black
	)
	color := make([]uint8, n)
	var visit func(q int32)
	visit = func(q int32) {
		color[q] = grey
		best := 0
		if !a.final[q] {
			best = -2 // no path yet
		}
		for _, m := range a.moves[q] {
			switch color[m.to] {
			case white:
				visit(m.to)
			case grey:
				best = -1
			}
			if best == -1 {
				continue
			}
			if most[m.to] < 0 {
				best = -1
			} else {
				best = max(best, most[m.to]+1)
			}
		}
		most[q] = best
		color[q] = black
	}
	for q := range n {
		if color[q] == white {
			visit(int32(q))
		}
	}
	return fewest, most
}

// intersect is the automaton of the texts both a and b match.
func intersect(a, b *fa, lim *faBuild) (*fa, error) {
	out := &fa{}
	index := map[[2]int32]int32{}
	var queue [][2]int32
	get := func(p, q int32) int32 {
		k := [2]int32{p, q}
		if s, ok := index[k]; ok {
			return s
		}
		s := out.add(a.final[p] && b.final[q])
		index[k] = s
		queue = append(queue, k)
		return s
	}
	out.start = get(a.start, b.start)
	for len(queue) > 0 {
		k := queue[0]
		queue = queue[1:]
		s := index[k]
		for _, ma := range a.moves[k[0]] {
			for _, mb := range b.moves[k[1]] {
				if cs := ma.cs.and(mb.cs); len(cs) > 0 {
					t := get(ma.to, mb.to)
					out.moves[s] = append(out.moves[s], move{cs, t})
				}
			}
		}
		if len(out.moves) > maxFAStates {
			return nil, errFATooLarge
		}
	}
	out.trim()
	return out, out.checkSize(lim)
}

// complement is the automaton of the texts (of any characters) that a
// does not match: a made deterministic over the pieces of the alphabet
// that its moves tell apart, completed with a state that every other
// character leads to, its final states swapped.
func (a *fa) complement(lim *faBuild) (*fa, error) {
	out := &fa{}
	index := map[string]int32{}
	var sets [][]int32
	key := func(set []int32) string {
		var b strings.Builder
		for _, q := range set {
			b.WriteString(strconv.Itoa(int(q)))
			b.WriteByte(',')
		}
		return b.String()
	}
	get := func(set []int32) int32 {
		k := key(set)
		if s, ok := index[k]; ok {
			return s
		}
		final := false
		for _, q := range set {
			final = final || a.final[q]
		}
		s := out.add(!final)
		index[k] = s
		sets = append(sets, set)
		return s
	}
	out.start = get([]int32{a.start})
	for i := 0; i < len(sets); i++ {
		set := sets[i]
		// The boundaries of the moves' ranges cut the alphabet into
		// pieces on which every move is all or nothing.
		var cuts []rune
		for _, q := range set {
			for _, m := range a.moves[q] {
				for _, r := range m.cs {
					cuts = append(cuts, r.lo, r.hi+1)
				}
			}
		}
		slices.Sort(cuts)
		cuts = slices.Compact(cuts)
		targets := map[string]*move{}
		var order []string
		for j := 0; j+1 < len(cuts); j++ {
			lo, hi := cuts[j], cuts[j+1]-1
			var to []int32
			for _, q := range set {
				for _, m := range a.moves[q] {
					if m.cs.has(lo) {
						to = append(to, m.to)
					}
				}
			}
			if len(to) == 0 {
				continue
			}
			slices.Sort(to)
			to = slices.Compact(to)
			k := key(to)
			mv := targets[k]
			if mv == nil {
				mv = &move{to: get(to)}
				targets[k] = mv
				order = append(order, k)
			}
			mv.cs = append(mv.cs, runeRange{lo, hi})
		}
		s := int32(i)
		var covered charSet
		for _, k := range order {
			mv := targets[k]
			mv.cs = mv.cs.normalize()
			covered = append(covered, mv.cs...)
			out.moves[s] = append(out.moves[s], *mv)
		}
		if rest := scalarChars.minus(covered); len(rest) > 0 {
			out.moves[s] = append(out.moves[s], move{rest, get(nil)})
		}
		if len(out.moves) > maxFAStates {
			return nil, errFATooLarge
		}
	}
	out.trim()
	return out, out.checkSize(lim)
}

// withLength is the automaton of the texts of a with lo to hi characters
// (hi < 0: no upper limit): a's states paired with a count of the
// characters so far, for as long as the count matters. From a state
// whose every way to a final one keeps the count within the bounds, it
// goes on in a copy of a, uncounted; so a count above lo is never kept
// when there is no upper limit, and an automaton already within the
// bounds is its own result.
func (a *fa) withLength(lo, hi int, lim *faBuild) (*fa, error) {
	fewest, most := a.lengths()
	free := func(q int32, k int) bool {
		return k+fewest[q] >= lo && (hi < 0 || (most[q] >= 0 && k+most[q] <= hi))
	}
	alive := func(q int32, k int) bool {
		return (hi < 0 || k+fewest[q] <= hi) && (most[q] < 0 || k+most[q] >= lo)
	}
	if free(a.start, 0) {
		return a, nil
	}
	out := &fa{}
	copies := make([]int32, len(a.moves))
	for q := range copies {
		copies[q] = -1
	}
	var copyOf func(q int32) int32
	var copyQueue []int32
	copyOf = func(q int32) int32 {
		if copies[q] < 0 {
			copies[q] = out.add(a.final[q])
			copyQueue = append(copyQueue, q)
		}
		return copies[q]
	}
	type counted struct {
		q int32
		k int
	}
	index := map[counted]int32{}
	var queue []counted
	get := func(q int32, k int) int32 {
		if free(q, k) {
			return copyOf(q)
		}
		c := counted{q, k}
		if s, ok := index[c]; ok {
			return s
		}
		s := out.add(a.final[q] && k >= lo && (hi < 0 || k <= hi))
		index[c] = s
		queue = append(queue, c)
		return s
	}
	if !alive(a.start, 0) {
		return nil, nil
	}
	out.start = get(a.start, 0)
	for len(queue) > 0 {
		c := queue[0]
		queue = queue[1:]
		s := index[c]
		for _, m := range a.moves[c.q] {
			if alive(m.to, c.k+1) {
				out.moves[s] = append(out.moves[s], move{m.cs, get(m.to, c.k+1)})
			}
		}
		if len(out.moves) > maxFAStates {
			return nil, errFATooLarge
		}
	}
	for len(copyQueue) > 0 {
		q := copyQueue[0]
		copyQueue = copyQueue[1:]
		for _, m := range a.moves[q] {
			out.moves[copies[q]] = append(out.moves[copies[q]], move{m.cs, copyOf(m.to)})
		}
	}
	if !out.trim() {
		return nil, nil
	}
	return out, out.checkSize(lim)
}

// matches reports whether a matches the text s.
func (a *fa) matches(s string) bool {
	cur := []int32{a.start}
	for _, c := range s {
		var next []int32
		for _, q := range cur {
			for _, m := range a.moves[q] {
				if m.cs.has(c) && !slices.Contains(next, m.to) {
					next = append(next, m.to)
				}
			}
		}
		cur = next
	}
	return slices.ContainsFunc(cur, func(q int32) bool { return a.final[q] })
}

// expr writes a (trimmed, matching something) as rules named by name in
// rules: one per state, with an alternative per state it moves to (the
// characters leading there merged into one set) and the empty one where
// it is final. Each character is written by char; a set that is more
// than one byte set gets a rule of its own, shared by every move on it.
// A move to a final state with no moves of its own is its character
// alone.
func (a *fa) expr(rules Rules, name func() string, char func(charSet) *Expr) *Expr {
	names := make([]string, len(a.moves))
	for q := range a.moves {
		if !a.terminal(int32(q)) {
			names[q] = name()
		}
	}
	chars := map[string]*Expr{}
	charOf := func(cs charSet) *Expr {
		k := cs.key()
		if e, ok := chars[k]; ok {
			return e
		}
		e := char(cs)
		if e.op != opByte && !(e.op == opLit && len(e.lit) == 1) {
			n := name()
			rules[n] = e
			e = Ref(n)
		}
		chars[k] = e
		return e
	}
	for q, ms := range a.moves {
		if names[q] == "" {
			continue
		}
		var targets []int32
		sets := map[int32]charSet{}
		for _, m := range ms {
			if _, ok := sets[m.to]; !ok {
				targets = append(targets, m.to)
			}
			sets[m.to] = append(sets[m.to], m.cs...)
		}
		var alts []*Expr
		for _, t := range targets {
			c := charOf(sets[t].normalize())
			if names[t] == "" {
				alts = append(alts, c)
			} else {
				alts = append(alts, Seq(c, Ref(names[t])))
			}
		}
		if a.final[q] {
			alts = append(alts, Empty())
		}
		rules[names[q]] = Alt(alts...)
	}
	if names[a.start] == "" {
		return Empty() // the start is final with no moves: only ""
	}
	return Ref(names[a.start])
}

// terminal reports whether q is final with no moves.
func (a *fa) terminal(q int32) bool { return a.final[q] && len(a.moves[q]) == 0 }

// enfa is an automaton under construction from a regular expression's
// tree: besides moves on characters, states have empty moves and end
// moves (an end anchor, $: taken only where the text ends). Lookaheads
// are built as intersections with what follows them, so that an enfa
// holds no lookahead.
type enfa struct {
	fa
	eps [][]int32
	end [][]int32
	lim *faBuild
	// loops counts the unbounded repetitions being built, inside which
	// what follows a lookahead is not yet known.
	loops int
	err   error
}

func (b *enfa) state() int32 {
	b.eps = append(b.eps, nil)
	b.end = append(b.end, nil)
	if len(b.eps) > maxFAStates && b.err == nil {
		b.err = errFATooLarge
	}
	return b.add(false)
}

// Where a node of a tree may stand in the text: at its start (nothing
// matched before), later, or either (the bits of reAt).
type reAt uint8

const (
	atStart reAt = 1 << iota
	atLater
)

// table is where the text stands after n for each place it may be
// entered at (a reAt, as an index), computed once.
func (n *reNode) table() *[4]reAt {
	if n.steps != nil {
		return n.steps
	}
	var t [4]reAt
	for v := range t {
		in := reAt(v)
		switch n.kind {
		case reChar:
			if in != 0 {
				t[v] = atLater
			}
		case reSeq:
			for _, s := range n.subs {
				in = s.table()[in]
			}
			t[v] = in
		case reAlt:
			for _, s := range n.subs {
				t[v] |= s.table()[in]
			}
		case reRepeat:
			t[v], _ = n.rounds(in)
		case reStart:
			t[v] = in & atStart
		default:
			t[v] = in
		}
	}
	n.steps = &t
	return n.steps
}

// rounds is where a repetition leaves the text when entered at in, and
// where its rounds are entered.
func (n *reNode) rounds(in reAt) (out, entered reAt) {
	step := n.subs[0].table()
	cur := in
	if n.min == 0 {
		out = in
	}
	for i := 1; n.max < 0 || i <= n.max; i++ {
		entered |= cur
		cur = step[cur]
		if i >= n.min {
			out |= cur
			if i >= n.min+4 {
				break // the values have gone round their cycle
			}
		}
	}
	return out, entered
}

// record notes in each start anchor and lookahead of n, entered at in,
// where the text may stand there.
func (n *reNode) record(in reAt) {
	if in == 0 {
		return
	}
	switch n.kind {
	case reSeq:
		for _, s := range n.subs {
			s.record(in)
			in = s.table()[in]
		}
	case reAlt:
		for _, s := range n.subs {
			s.record(in)
		}
	case reRepeat:
		_, entered := n.rounds(in)
		n.subs[0].record(entered)
	case reStart:
		n.at |= in
	case reLook:
		n.at |= in
		n.subs[0].record(in)
	}
}

// build adds the states of n followed by state k, and returns the one
// they start at.
func (b *enfa) build(n *reNode, k int32) int32 {
	if b.err != nil {
		return k
	}
	switch n.kind {
	case reChar:
		s := b.state()
		b.moves[s] = append(b.moves[s], move{n.cs, k})
		return s
	case reSeq:
		for i := len(n.subs) - 1; i >= 0; i-- {
			k = b.build(n.subs[i], k)
		}
		return k
	case reAlt:
		s := b.state()
		for _, sub := range n.subs {
			t := b.build(sub, k)
			b.eps[s] = append(b.eps[s], t)
		}
		return s
	case reRepeat:
		tail := k
		if n.max < 0 {
			loop := b.state()
			b.loops++
			body := b.build(n.subs[0], loop)
			b.loops--
			b.eps[loop] = append(b.eps[loop], body, k)
			tail = loop
		} else {
			// x{0,m} is (x(x(…)?)?)?: one way to match each count.
			for range n.max - n.min {
				o := b.state()
				body := b.build(n.subs[0], tail)
				b.eps[o] = append(b.eps[o], body, k)
				tail = o
				if b.err != nil {
					return k
				}
			}
		}
		for range n.min {
			tail = b.build(n.subs[0], tail)
			if b.err != nil {
				return k
			}
		}
		return tail
	case reStart:
		switch n.at {
		case atStart:
			return k
		case atLater:
			return b.state() // never true: a state with no way on
		}
		b.err = fmt.Errorf("^ where the pattern may or may not have matched characters before it is not supported")
		return k
	case reEnd:
		s := b.state()
		b.end[s] = append(b.end[s], k)
		return s
	case reLook:
		return b.lookahead(n, k)
	}
	return k
}

// lookahead builds (?=x) or (?!x) followed by state k: the automaton of
// what follows it, intersected with that of x followed by any text (x may
// end it, with $), or with its complement.
func (b *enfa) lookahead(n *reNode, k int32) int32 {
	if b.loops > 0 {
		b.err = fmt.Errorf("a lookahead inside a * or + repetition is not supported")
		return k
	}
	follow, err := b.eliminate(k)
	if err != nil {
		b.err = err
		return k
	}
	x := &enfa{lim: b.lim}
	tail := x.state()
	x.final[tail] = true
	x.moves[tail] = []move{{scalarChars, tail}}
	xs := x.build(n.subs[0], tail)
	if x.err != nil {
		b.err = x.err
		return k
	}
	xa, err := x.eliminate(xs)
	if err == nil && n.neg {
		xa, err = xa.complement(b.lim)
	}
	var both *fa
	if err == nil {
		both, err = intersect(follow, xa, b.lim)
	}
	if err != nil {
		b.err = err
		return k
	}
	// Copy it in.
	base := int32(len(b.moves))
	for range both.moves {
		b.state()
	}
	for q, ms := range both.moves {
		s := base + int32(q)
		b.final[s] = both.final[q]
		for _, m := range ms {
			b.moves[s] = append(b.moves[s], move{m.cs, base + m.to})
		}
	}
	return base + both.start
}

// eliminate is the automaton, without empty or end moves, of the texts
// that lead from state s to a final one, trimmed.
func (b *enfa) eliminate(s int32) (*fa, error) {
	out := &fa{}
	index := map[int32]int32{}
	var queue []int32
	get := func(q int32) int32 {
		if t, ok := index[q]; ok {
			return t
		}
		t := out.add(false)
		index[q] = t
		queue = append(queue, q)
		return t
	}
	out.start = get(s)
	seen := map[int32]uint8{} // bit 1: reached with the text going on; bit 2: after an end
	var stack [][2]int32
	for len(queue) > 0 {
		q := queue[0]
		queue = queue[1:]
		t := index[q]
		clear(seen)
		stack = append(stack[:0], [2]int32{q, 1})
		seen[q] = 1
		for len(stack) > 0 {
			top := stack[len(stack)-1]
			stack = stack[:len(stack)-1]
			p, mode := top[0], top[1]
			if b.final[p] {
				out.final[t] = true
			}
			if mode == 1 {
				for _, m := range b.moves[p] {
					out.moves[t] = append(out.moves[t], move{m.cs, get(m.to)})
				}
			}
			for _, r := range b.eps[p] {
				if seen[r]&uint8(mode) == 0 {
					seen[r] |= uint8(mode)
					stack = append(stack, [2]int32{r, mode})
				}
			}
			for _, r := range b.end[p] {
				if seen[r]&2 == 0 {
					seen[r] |= 2
					stack = append(stack, [2]int32{r, 2})
				}
			}
		}
		if len(out.moves) > maxFAStates {
			return nil, errFATooLarge
		}
	}
	out.trim()
	return out, out.checkSize(b.lim)
}

// treeFA is the automaton of the texts the tree n matches whole.
func treeFA(n *reNode, lim *faBuild) (*fa, error) {
	n.record(atStart)
	b := &enfa{lim: lim}
	final := b.state()
	b.final[final] = true
	s := b.build(n, final)
	if b.err != nil {
		return nil, b.err
	}
	return b.eliminate(s)
}

// patternFA is the automaton of the texts that an ECMA-262 pattern
// matches whole, or (search) of those it matches somewhere in, as JSON
// schema reads pattern: the pattern after any text, where its start
// anchors never hold, or at the start, and then any text.
func patternFA(pattern string, search bool, lim *faBuild) (*fa, error) {
	n, err := parseRegex(pattern, ecma, true)
	if err != nil {
		return nil, err
	}
	if !search {
		return treeFA(n, lim)
	}
	later, _ := parseRegex(pattern, ecma, true)
	n.record(atStart)
	later.record(atLater)
	b := &enfa{lim: lim}
	rest := b.state()
	b.final[rest] = true
	b.moves[rest] = []move{{scalarChars, rest}}
	atStartHere := b.build(n, rest)
	afterSome := b.build(later, rest)
	skip := b.state()
	b.moves[skip] = []move{{scalarChars, skip}}
	b.eps[skip] = []int32{afterSome}
	start := b.state()
	b.moves[start] = []move{{scalarChars, skip}}
	b.eps[start] = []int32{atStartHere}
	if b.err != nil {
		return nil, b.err
	}
	return b.eliminate(start)
}

// empty reports whether a matches no text.
func (a *fa) empty() bool { return a == nil || (len(a.moves[a.start]) == 0 && !a.final[a.start]) }

// lengths are the fewest and the most characters of a text n matches
// (most -1: no limit), anchors and lookaheads aside.
func (n *reNode) lengths() (fewest, most int) {
	switch n.kind {
	case reChar:
		return 1, 1
	case reSeq:
		for _, s := range n.subs {
			lo, hi := s.lengths()
			fewest += lo
			if most >= 0 {
				most = addMost(most, hi)
			}
		}
		return fewest, most
	case reAlt:
		fewest = -1
		for _, s := range n.subs {
			lo, hi := s.lengths()
			if fewest < 0 || lo < fewest {
				fewest = lo
			}
			if most >= 0 && (hi < 0 || hi > most) {
				most = hi
			}
		}
		return max(fewest, 0), most
	case reRepeat:
		lo, hi := n.subs[0].lengths()
		fewest = min(lo*n.min, 1<<40)
		switch {
		case hi == 0:
			most = 0
		case n.max < 0 || hi < 0:
			most = -1
		default:
			most = min(hi*n.max, 1<<40)
		}
		return fewest, most
	}
	return 0, 0
}

func addMost(a, b int) int {
	if b < 0 {
		return -1
	}
	return min(a+b, 1<<40)
}

// exprRe is the tree of an expression over ASCII bytes without rule
// references (a format's), each byte a character.
func exprRe(e *Expr) *reNode {
	switch e.op {
	case opByte:
		var cs charSet
		for c := range 128 {
			if e.set.Has(byte(c)) {
				cs = append(cs, runeRange{rune(c), rune(c)})
			}
		}
		return reCharOf(cs.normalize())
	case opLit:
		subs := make([]*reNode, len(e.lit))
		for i := range len(e.lit) {
			subs[i] = reCharOf(chars(rune(e.lit[i]), rune(e.lit[i])))
		}
		return reSeqOf(subs...)
	case opSeq, opAlt:
		subs := make([]*reNode, len(e.subs))
		for i, s := range e.subs {
			subs[i] = exprRe(s)
		}
		if e.op == opSeq {
			return &reNode{kind: reSeq, subs: subs}
		}
		return reAltOf(subs...)
	case opRepeat:
		return &reNode{kind: reRepeat, subs: []*reNode{exprRe(e.subs[0])}, min: e.min, max: e.max}
	}
	panic("grammar: exprRe of a rule reference")
}
