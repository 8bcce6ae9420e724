package grammar

import (
	"container/heap"
	"errors"
	"fmt"
	"math"
)

// ErrGrammar is wrapped by every error of Compile.
var ErrGrammar = errors.New("grammar")

// Limits of a compiled grammar, so that a request cannot make the server
// build a huge one.
const (
	// MaxElements bounds the elements (bytes, rule references) of a grammar.
	MaxElements = 1 << 20
	// MaxRepeat bounds the count of a bounded repetition.
	MaxRepeat = 1 << 16
)

// Rules names expressions that Ref refers to.
type Rules map[string]*Expr

type elemKind uint8

const (
	elemEnd  elemKind = iota // the end of an alternative
	elemByte                 // one byte of sets[arg]
	elemRule                 // the rule arg
)

type element struct {
	kind elemKind
	// free says the byte costs nothing toward the lengths a budget is
	// measured in: a byte of a Token after its first.
	free bool
	arg  int32
}

// Grammar is a compiled grammar: rules of alternatives, each a sequence of
// elements (a byte set or a rule) ending with an end element, all in one
// array so that a position in it says where a match is. It is immutable
// and safe for concurrent use; Matchers run it.
type Grammar struct {
	elems []element
	sets  []ByteSet
	rules [][]int32 // rule → the positions where its alternatives start
	root  int32
	// minRest[p] is the fewest bytes that finish the alternative of p from
	// p on; ruleMin[r] the fewest that match rule r. A Token counts as one
	// byte: these are the lengths a budget of tokens is checked against.
	minRest []int32
	ruleMin []int32
}

// Compile compiles root, whose references name rules. It fails when a
// referenced rule is missing, a rule can reach itself before matching a
// byte, some rule can match no string at all (so that a match could never
// end), or the grammar is too large. The last two name the rule at fault
// (a *RuleError), so that a user can find it in what they wrote.
func Compile(root *Expr, rules Rules) (*Grammar, error) {
	c := &compiler{
		g:      &Grammar{},
		rules:  rules,
		named:  map[string]int32{},
		setIdx: map[ByteSet]int32{},
	}
	c.g.root = c.newRule()
	if err := c.defineRule(c.g.root, root); err != nil {
		return nil, err
	}
	for len(c.pending) > 0 {
		name := c.pending[0]
		c.pending = c.pending[1:]
		c.cur = name
		if err := c.defineRule(c.named[name], rules[name]); err != nil {
			return nil, err
		}
	}
	g := c.g
	if r := g.computeMinLengths(); r >= 0 {
		return nil, &RuleError{Rule: c.owner[r], Msg: "matches no finite string: every way through it needs itself again, or a part that matches nothing"}
	}
	if r := g.checkLeftRecursion(); r >= 0 {
		return nil, &RuleError{Rule: c.owner[r], Msg: "can reach itself before matching a byte (left recursion)"}
	}
	return g, nil
}

type compiler struct {
	g       *Grammar
	rules   Rules
	named   map[string]int32
	pending []string
	setIdx  map[ByteSet]int32
	// owner[r] is the named rule whose definition made rule r ("" for
	// the root expression); cur is the one being defined.
	owner []string
	cur   string
}

func (c *compiler) newRule() int32 {
	c.g.rules = append(c.g.rules, nil)
	c.owner = append(c.owner, c.cur)
	return int32(len(c.g.rules) - 1)
}

// defineRule gives rule r the alternatives of e.
func (c *compiler) defineRule(r int32, e *Expr) error {
	alts := []*Expr{e}
	if e.op == opAlt {
		alts = e.subs
	}
	for _, a := range alts {
		body, err := c.emit(nil, a)
		if err != nil {
			return err
		}
		if err := c.appendAlt(r, body); err != nil {
			return err
		}
	}
	return nil
}

func (c *compiler) appendAlt(r int32, body []element) error {
	if len(c.g.elems)+len(body)+1 > MaxElements {
		return fmt.Errorf("%w: more than %d elements", ErrGrammar, MaxElements)
	}
	c.g.rules[r] = append(c.g.rules[r], int32(len(c.g.elems)))
	c.g.elems = append(c.g.elems, body...)
	c.g.elems = append(c.g.elems, element{kind: elemEnd})
	return nil
}

func (c *compiler) set(s ByteSet) element {
	i, ok := c.setIdx[s]
	if !ok {
		i = int32(len(c.g.sets))
		c.g.sets = append(c.g.sets, s)
		c.setIdx[s] = i
	}
	return element{kind: elemByte, arg: i}
}

// ruleOf makes e a rule of its own and returns the element referring to it.
func (c *compiler) ruleOf(e *Expr) (element, error) {
	if e.op == opRef {
		return c.ref(e.name)
	}
	r := c.newRule()
	if err := c.defineRule(r, e); err != nil {
		return element{}, err
	}
	return element{kind: elemRule, arg: r}, nil
}

func (c *compiler) ref(name string) (element, error) {
	r, ok := c.named[name]
	if !ok {
		if _, defined := c.rules[name]; !defined {
			return element{}, fmt.Errorf("%w: rule %q is not defined", ErrGrammar, name)
		}
		r = c.newRule()
		c.owner[r] = name
		c.named[name] = r
		c.pending = append(c.pending, name)
	}
	return element{kind: elemRule, arg: r}, nil
}

// emit appends the elements of e to body.
func (c *compiler) emit(body []element, e *Expr) ([]element, error) {
	if len(body) > MaxElements {
		return nil, fmt.Errorf("%w: more than %d elements", ErrGrammar, MaxElements)
	}
	switch e.op {
	case opSeq:
		var err error
		for _, s := range e.subs {
			if body, err = c.emit(body, s); err != nil {
				return nil, err
			}
		}
		return body, nil
	case opLit, opToken:
		for i := 0; i < len(e.lit); i++ {
			el := c.set(Range(e.lit[i], e.lit[i]))
			el.free = e.op == opToken && i > 0
			body = append(body, el)
		}
		return body, nil
	case opByte:
		return append(body, c.set(e.set)), nil
	case opAlt, opRef:
		el, err := c.ruleOf(e)
		if err != nil {
			return nil, err
		}
		return append(body, el), nil
	case opRepeat:
		return c.emitRepeat(body, e)
	}
	return nil, fmt.Errorf("%w: unknown expression", ErrGrammar)
}

// emitRepeat writes e{min,max} as min copies of e followed by a chain of
// optional copies (bounded) or a right-recursive rule (unbounded).
func (c *compiler) emitRepeat(body []element, e *Expr) ([]element, error) {
	if e.min > MaxRepeat || e.max > MaxRepeat {
		return nil, fmt.Errorf("%w: a repetition of more than %d", ErrGrammar, MaxRepeat)
	}
	sub := e.subs[0]
	var one element
	if sub.op == opByte || (sub.op == opLit && len(sub.lit) == 1) {
		b, _ := c.emit(nil, sub)
		one = b[0]
	} else {
		var err error
		if one, err = c.ruleOf(sub); err != nil {
			return nil, err
		}
	}
	for range e.min {
		body = append(body, one)
	}
	if e.max < 0 {
		// star ::= one star | ""
		star := c.newRule()
		if err := c.appendAlt(star, []element{one, {kind: elemRule, arg: star}}); err != nil {
			return nil, err
		}
		if err := c.appendAlt(star, nil); err != nil {
			return nil, err
		}
		return append(body, element{kind: elemRule, arg: star}), nil
	}
	// opt_k ::= one opt_{k-1} | "", opt_1 ::= one | ""
	var prev element
	for k := 1; k <= e.max-e.min; k++ {
		r := c.newRule()
		alt := []element{one}
		if k > 1 {
			alt = append(alt, prev)
		}
		if err := c.appendAlt(r, alt); err != nil {
			return nil, err
		}
		if err := c.appendAlt(r, nil); err != nil {
			return nil, err
		}
		prev = element{kind: elemRule, arg: r}
	}
	if e.max > e.min {
		body = append(body, prev)
	}
	return body, nil
}

const unreachable = math.MaxInt32

// computeMinLengths fills minRest and ruleMin, and returns a rule that
// matches no finite string (-1: none). It is Knuth's generalization of
// Dijkstra's algorithm to grammars: the rule with the shortest tentative
// length is final, and an alternative gets a length once every rule it
// refers to has one, so it takes time near-linear in the grammar whatever
// the order of its rules. Lengths past the int32 range are capped: no
// budget is that long.
func (g *Grammar) computeMinLengths() int32 {
	g.ruleMin = make([]int32, len(g.rules))
	for i := range g.ruleMin {
		g.ruleMin[i] = unreachable
	}
	type alternative struct {
		rule    int32
		sum     int64 // bytes, plus the lengths of the rules known so far
		pending int32 // references to rules without a length yet
	}
	var alts []alternative
	uses := make([][]int32, len(g.rules)) // rule → the alternatives referring to it, once a reference
	var h lengthHeap
	for r, starts := range g.rules {
		for _, start := range starts {
			a := alternative{rule: int32(r)}
			id := int32(len(alts))
			for p := start; g.elems[p].kind != elemEnd; p++ {
				switch el := g.elems[p]; el.kind {
				case elemByte:
					if !el.free {
						a.sum++
					}
				case elemRule:
					a.pending++
					uses[el.arg] = append(uses[el.arg], id)
				}
			}
			alts = append(alts, a)
			if a.pending == 0 {
				heap.Push(&h, ruleLength{int32(r), a.sum})
			}
		}
	}
	for h.Len() > 0 {
		rl := heap.Pop(&h).(ruleLength)
		if g.ruleMin[rl.rule] != unreachable {
			continue
		}
		m := int32(min(rl.n, unreachable-1))
		g.ruleMin[rl.rule] = m
		for _, id := range uses[rl.rule] {
			a := &alts[id]
			a.sum += int64(m)
			if a.pending--; a.pending == 0 && g.ruleMin[a.rule] == unreachable {
				heap.Push(&h, ruleLength{a.rule, a.sum})
			}
		}
	}
	// The last rule made is the deepest, and likely the one at fault
	// rather than one that merely refers to it.
	for r := len(g.ruleMin) - 1; r >= 0; r-- {
		if g.ruleMin[r] == unreachable {
			return int32(r)
		}
	}
	// minRest from the back of each alternative.
	g.minRest = make([]int32, len(g.elems))
	var next int64
	for p := len(g.elems) - 1; p >= 0; p-- {
		switch el := g.elems[p]; el.kind {
		case elemEnd:
			next = 0
		case elemByte:
			if !el.free {
				next++
			}
		case elemRule:
			next += int64(g.ruleMin[el.arg])
		}
		g.minRest[p] = int32(min(next, unreachable-1))
	}
	return -1
}

// ruleLength is a tentative shortest length of a rule.
type ruleLength struct {
	rule int32
	n    int64
}

// lengthHeap is a min-heap of tentative lengths, for container/heap.
type lengthHeap []ruleLength

func (h lengthHeap) Len() int           { return len(h) }
func (h lengthHeap) Less(i, j int) bool { return h[i].n < h[j].n }
func (h lengthHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *lengthHeap) Push(x any)        { *h = append(*h, x.(ruleLength)) }
func (h *lengthHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

// checkLeftRecursion fails if a rule can reach itself before matching a
// byte in a way that would make parse stacks grow without end: through
// rules that start an alternative or follow rules matching the empty
// string, where one of the references on the cycle is not the last element
// of its alternative. (A cycle of references that all end their
// alternative, as a repetition of something that can match the empty
// string makes, only revisits a stack the automaton has already seen.)
// It returns a rule on such a cycle, or -1.
func (g *Grammar) checkLeftRecursion() int32 {
	type edge struct {
		to   int32
		tail bool
	}
	first := make([][]edge, len(g.rules))
	for r, alts := range g.rules {
		for _, start := range alts {
			for p := start; g.elems[p].kind == elemRule; p++ {
				q := g.elems[p].arg
				first[r] = append(first[r], edge{q, g.elems[p+1].kind == elemEnd})
				if g.ruleMin[q] > 0 {
					break
				}
			}
		}
	}
	// Tarjan's strongly connected components: a non-tail edge inside one
	// closes a harmful cycle.
	n := len(g.rules)
	index := make([]int32, n)
	low := make([]int32, n)
	comp := make([]int32, n)
	onStack := make([]bool, n)
	for i := range index {
		index[i], comp[i] = -1, -1
	}
	var stack []int32
	var next, comps int32
	var visit func(r int32)
	visit = func(r int32) {
		index[r], low[r] = next, next
		next++
		stack = append(stack, r)
		onStack[r] = true
		for _, e := range first[r] {
			if index[e.to] < 0 {
				visit(e.to)
				low[r] = min(low[r], low[e.to])
			} else if onStack[e.to] {
				low[r] = min(low[r], index[e.to])
			}
		}
		if low[r] == index[r] {
			for {
				q := stack[len(stack)-1]
				stack = stack[:len(stack)-1]
				onStack[q] = false
				comp[q] = comps
				if q == r {
					break
				}
			}
			comps++
		}
	}
	for r := range int32(n) {
		if index[r] < 0 {
			visit(r)
		}
	}
	for r, es := range first {
		for _, e := range es {
			if !e.tail && comp[e.to] == comp[r] {
				return int32(r)
			}
		}
	}
	return -1
}

// MinLength is the fewest bytes of a string the grammar matches.
func (g *Grammar) MinLength() int { return int(g.ruleMin[g.root]) }
