package chat

import (
	"fmt"
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"
)

// The code inside a tag is tokenized so that string literals can be spelled
// again (see rewriteSource), and so that what gonja's parser reads
// differently from Jinja2's, or not at all, can be written the way gonja
// reads as Jinja2 means it:
//
//   - None: gonja knows only the lowercase spelling of Jinja2's none constant
//     as a name, so None is written none (a global holding None).
//   - Conditional expressions, a if c else b: gonja parses them only at the
//     top of an output or set tag, and not chained. They become
//     ((c and [a]) or [b])[0], which evaluates the same branch lazily; a
//     missing else branch is undefined, as in Jinja2. It is wrapped in a
//     call of fnSoft, which tells the rewriter where it is.
//   - Tests, the right operand of in, chained comparisons and repeated nots
//     (see writeNodes).

// undefinedName is a variable never defined, standing for Jinja2's
// undefined result of a conditional without else.
const undefinedName = "__chat_undefined"

type tokKind int

const (
	tokSpace tokKind = iota
	tokString
	tokName
	tokNumber
	tokOp
	tokOpen
	tokClose
)

type tok struct {
	kind tokKind
	text string
}

// tagWriter writes rewritten tag code, noting the first syntax error that
// Jinja2 would report and gonja would not.
type tagWriter struct {
	out *strings.Builder
	err error
}

// node is a token or a bracketed group of them.
type node struct {
	tok
	group []node // for tokOpen: the contents; close holds the closing token
	close *tok
}

// maxNesting bounds how deep brackets and blocks may nest, and maxTagTokens
// how long the code of one tag may be: gonja parses by recursive descent and
// evaluates operator chains recursively, and a stack overflow cannot be
// recovered from.
const (
	maxNesting   = 100
	maxTagTokens = 4096
)

// blockDepth tracks the nesting of block tags across a template.
type blockDepth struct{ depth int }

// visit counts the block tag whose code is toks.
func (b *blockDepth) visit(toks []tok) error {
	name, hasAssign := "", false
	for _, t := range toks {
		if t.kind == tokName && name == "" {
			name = t.text
		}
		if t.kind == tokOp && t.text == "=" {
			hasAssign = true
		}
	}
	switch {
	case name == "set" && !hasAssign, name == "if", name == "for", name == "macro", name == "filter",
		name == "with", name == "generation", name == "call", name == "block":
		b.depth++
		if b.depth > maxNesting {
			return fmt.Errorf("blocks nested more than %d deep", maxNesting)
		}
	case strings.HasPrefix(name, "end") && b.depth > 0:
		b.depth--
	}
	return nil
}

// rewriteTag rewrites the tag starting at j, whose two-byte opener is
// followed by code ending in closer, and returns the index past the tag; plus
// adds a + mark to the opener. An unterminated tag is copied as is so that
// gonja reports the error.
func rewriteTag(out *strings.Builder, src string, j int, closer string, plus bool, literals map[string]string, blocks *blockDepth) (int, error) {
	// Whitespace control marks stay glued to the delimiters.
	open := j + 2
	if open < len(src) && (src[open] == '-' || src[open] == '+') {
		open++
	}
	toks, end, err := tokenizeTag(src, open, closer, literals)
	if err != nil {
		return 0, err
	}
	if end < 0 {
		out.WriteString(src[j:])
		return len(src), nil
	}
	if closer == "%}" {
		if err := blocks.visit(toks); err != nil {
			return 0, err
		}
	}
	close := closer
	if n := len(toks); n > 0 && toks[n-1].kind == tokOp && (toks[n-1].text == "-" || toks[n-1].text == "+") {
		close = toks[n-1].text + closer
		toks = toks[:n-1]
	}
	out.WriteString(src[j : j+2])
	if plus {
		out.WriteByte('+')
	}
	out.WriteString(src[j+2 : open])
	tree, _ := buildTree(toks, 0, false)
	w := &tagWriter{out: out}
	w.writeTagCode(tree, closer == "}}")
	if w.err != nil {
		return 0, fmt.Errorf("%w at byte %d", w.err, j)
	}
	out.WriteString(close)
	return end + len(closer), nil
}

// tokenizeTag splits tag code from i up to closer at bracket depth zero. It
// returns the tokens and the index of closer, or -1 when there is none.
func tokenizeTag(src string, i int, closer string, literals map[string]string) ([]tok, int, error) {
	var toks []tok
	depth := 0
	for i < len(src) {
		c := src[i]
		if depth == 0 && strings.HasPrefix(src[i:], closer) {
			return mergeStrings(toks, literals), i, nil
		}
		if len(toks) > maxTagTokens {
			return nil, 0, fmt.Errorf("tag at byte %d is longer than %d tokens", i, maxTagTokens)
		}
		switch {
		case c == ' ' || c == '\t' || c == '\n' || c == '\r':
			k := i
			for k < len(src) && strings.IndexByte(" \t\n\r", src[k]) >= 0 {
				k++
			}
			toks = append(toks, tok{tokSpace, src[i:k]})
			i = k
		case c == '\'' || c == '"':
			value, k, err := readLiteral(src, i)
			if err != nil {
				return nil, 0, err
			}
			toks = append(toks, tok{tokString, value})
			i = k
		case c >= '0' && c <= '9':
			k := scanNumber(src, i)
			toks = append(toks, tok{tokNumber, src[i:k]})
			i = k
		case c == '_' || c < utf8.RuneSelf && unicode.IsLetter(rune(c)) || c >= utf8.RuneSelf:
			k := i
			for k < len(src) {
				r, size := utf8.DecodeRuneInString(src[k:])
				if r != '_' && !unicode.IsLetter(r) && !unicode.IsDigit(r) {
					break
				}
				k += size
			}
			if k == i {
				// A byte that starts no name: let gonja complain about it.
				_, size := utf8.DecodeRuneInString(src[i:])
				k = i + size
				toks = append(toks, tok{tokOp, src[i:k]})
			} else {
				toks = append(toks, tok{tokName, src[i:k]})
			}
			i = k
		case c == '(' || c == '[' || c == '{':
			depth++
			if depth > maxNesting {
				return nil, 0, fmt.Errorf("brackets nested more than %d deep at byte %d", maxNesting, i)
			}
			toks = append(toks, tok{tokOpen, src[i : i+1]})
			i++
		case c == ')' || c == ']' || c == '}':
			if depth > 0 {
				depth--
			}
			toks = append(toks, tok{tokClose, src[i : i+1]})
			i++
		default:
			n := 1
			for _, op := range []string{"**", "//", "==", "!=", "<=", ">="} {
				if strings.HasPrefix(src[i:], op) {
					n = 2
				}
			}
			toks = append(toks, tok{tokOp, src[i : i+n]})
			i += n
		}
	}
	return toks, -1, nil
}

// scanNumber reads an integer or float literal starting at i.
func scanNumber(src string, i int) int {
	digits := func(k int) int {
		for k < len(src) && (src[k] >= '0' && src[k] <= '9' || src[k] == '_') {
			k++
		}
		return k
	}
	k := digits(i)
	if k+1 < len(src) && src[k] == '.' && src[k+1] >= '0' && src[k+1] <= '9' {
		k = digits(k + 1)
	}
	if k < len(src) && (src[k] == 'e' || src[k] == 'E') {
		e := k + 1
		if e < len(src) && (src[e] == '+' || src[e] == '-') {
			e++
		}
		if e < len(src) && src[e] >= '0' && src[e] <= '9' {
			k = digits(e)
		}
	}
	return k
}

// mergeStrings joins adjacent string literals, as Jinja2 does, and turns
// each literal into the text gonja reads back as the same value.
func mergeStrings(toks []tok, literals map[string]string) []tok {
	var out []tok
	for i := 0; i < len(toks); i++ {
		t := toks[i]
		if t.kind != tokString {
			out = append(out, t)
			continue
		}
		value := t.text
		for {
			k := i + 1
			for k < len(toks) && toks[k].kind == tokSpace {
				k++
			}
			if k >= len(toks) || toks[k].kind != tokString {
				break
			}
			value += toks[k].text
			i = k
		}
		var b strings.Builder
		writeLiteral(&b, value, literals)
		out = append(out, tok{tokString, b.String()})
	}
	return out
}

// buildTree nests tokens into bracket groups, reading from i until a
// closing bracket (inside a group, nested says) or the end, and returns the
// nodes and the index reached. A stray closing bracket at the top stays a
// token, for gonja to reject.
func buildTree(toks []tok, i int, nested bool) ([]node, int) {
	var out []node
	for i < len(toks) {
		t := toks[i]
		switch t.kind {
		case tokOpen:
			children, k := buildTree(toks, i+1, true)
			n := node{tok: t, group: children}
			if k < len(toks) {
				c := toks[k]
				n.close = &c
				k++
			}
			out = append(out, n)
			i = k
			continue
		case tokClose:
			if nested {
				return out, i
			}
		}
		out = append(out, node{tok: t})
		i++
	}
	return out, i
}

// writeTagCode writes the nodes of a tag, rewriting None and conditional
// expressions. In an output tag the whole expression may be a conditional;
// in a set tag, the value after '='.
func (w *tagWriter) writeTagCode(nodes []node, output bool) {
	if output {
		w.writeExpression(nodes)
		return
	}
	first := -1
	for i, n := range nodes {
		if n.kind == tokName {
			first = i
			break
		}
		if n.kind != tokSpace && n.kind != tokOp {
			break
		}
	}
	if first >= 0 && nodes[first].text == "set" {
		for i := first + 1; i < len(nodes); i++ {
			if nodes[i].kind == tokOp && nodes[i].text == "=" {
				w.writeNodes(nodes[:i+1])
				w.writeExpression(nodes[i+1:])
				return
			}
		}
	}
	w.writeNodes(nodes)
}

// writeNodes writes nodes as they are, rewriting inside bracket groups and
// expressing what gonja's parser reads differently from Jinja2's:
//   - a test is put in parentheses with its operand (see groupTests);
//   - the right operand of in too: Jinja2 applies filters in it (x in
//     y|list) before testing, gonja after;
//   - a chain of comparisons, a < b < c, becomes (a < b) and (b < c), as
//     Python reads it, where gonja would compare (a < b) with c;
//   - not not x becomes not (not x), which gonja cannot parse.
func (w *tagWriter) writeNodes(nodes []node) {
	nodes = w.groupTests(nodes)
	for start := 0; start <= len(nodes); {
		end := segmentEnd(nodes, start)
		w.writeSegment(nodes[start:end])
		if end < len(nodes) {
			w.writeNode(nodes, end)
		}
		start = end + 1
	}
}

// segmentEnd finds the next node from start that separates comparison
// chains: and, or, the keywords of conditionals and loops, separators.
func segmentEnd(nodes []node, start int) int {
	for k := start; k < len(nodes); k++ {
		n := nodes[k]
		if n.kind == tokName && (n.text == "and" || n.text == "or" || n.text == "if" || n.text == "else" || n.text == "recursive") {
			return k
		}
		if isOp(n, ",", ":", "=") {
			return k
		}
	}
	return len(nodes)
}

// comparisonAt reports whether a comparison operator starts at node k, and
// how many nodes it spans (not in spans two).
func comparisonAt(nodes []node, k int) (int, bool) {
	n := nodes[k]
	if isOp(n, "==", "!=", "<", ">", "<=", ">=") {
		return 1, true
	}
	if n.kind != tokName {
		return 0, false
	}
	switch {
	case n.text == "in" && !afterName(nodes, k, "is") && !afterName(nodes, k, "not") && prevOperand(nodes, k):
		return 1, true
	case n.text == "not" && prevOperand(nodes, k):
		if m := nextCode(nodes, k+1); m < len(nodes) && nodes[m].kind == tokName && nodes[m].text == "in" {
			return m - k + 1, true
		}
	}
	return 0, false
}

// prevOperand reports whether the code before k ends an operand, which makes
// the name at k a binary operator.
func prevOperand(nodes []node, k int) bool {
	p := prevCode(nodes, k)
	return p >= 0 && isOperand(nodes[p])
}

// writeSegment writes nodes that hold no and, or or separator.
func (w *tagWriter) writeSegment(nodes []node) {
	out := w.out
	// Unary nots come first and bind looser than the comparisons.
	lead := 0
	for {
		k := nextCode(nodes, lead)
		if k < len(nodes) && nodes[k].kind == tokName && nodes[k].text == "not" && !prevOperand(nodes, k) {
			lead = k + 1
			continue
		}
		break
	}
	var ops [][2]int // start and length of each comparison operator
	for k := lead; k < len(nodes); k++ {
		if n, ok := comparisonAt(nodes, k); ok {
			ops = append(ops, [2]int{k, n})
			k += n - 1
		}
	}
	if len(ops) < 2 && lead == 0 {
		w.writeSimple(nodes)
		return
	}
	if lead > 0 {
		// One not at a time, each over the rest: gonja reads no "not not".
		k := nextCode(nodes, 0)
		out.WriteString(" not (")
		w.writeSegment(nodes[k+1:])
		out.WriteString(") ")
		return
	}
	out.WriteString(" (")
	operand := func(i int) []node {
		from := lead
		if i > 0 {
			from = ops[i-1][0] + ops[i-1][1]
		}
		to := len(nodes)
		if i < len(ops) {
			to = ops[i][0]
		}
		return nodes[from:to]
	}
	for i, op := range ops {
		if i > 0 {
			out.WriteString(" and ")
		}
		out.WriteString("(")
		w.writeSimple(slices.Concat(operand(i), nodes[op[0]:op[0]+op[1]], operand(i+1)))
		out.WriteString(")")
	}
	out.WriteString(") ")
}

// writeSimple writes nodes with at most one comparison and no leading not.
func (w *tagWriter) writeSimple(nodes []node) {
	out := w.out
	for i := 0; i < len(nodes); i++ {
		n := nodes[i]
		if n.kind == tokName && n.text == "in" && !afterDot(nodes, i) {
			end := inOperandEnd(nodes, i+1)
			if hasCode(nodes[i+1 : end]) {
				out.WriteString("in (")
				w.writeNodes(nodes[i+1 : end])
				out.WriteString(") ")
				i = end - 1
				continue
			}
		}
		w.writeNode(nodes, i)
	}
}

// writeNode writes one node, a bracket group with its contents rewritten.
func (w *tagWriter) writeNode(nodes []node, i int) {
	out := w.out
	n := nodes[i]
	switch n.kind {
	case tokOpen:
		out.WriteString(n.text)
		w.writeGroup(n.group)
		if n.close != nil {
			out.WriteString(n.close.text)
		}
	case tokName:
		if n.text == "None" && !afterDot(nodes, i) {
			out.WriteString("none")
		} else {
			out.WriteString(n.text)
		}
	default:
		out.WriteString(n.text)
	}
}

// inOperandEnd finds where the right operand of an in that ends before
// start stops: at a boolean or comparison operator, a keyword of the
// conditional or for tags, or a separator.
func inOperandEnd(nodes []node, start int) int {
	for k := start; k < len(nodes); k++ {
		n := nodes[k]
		switch n.kind {
		case tokName:
			switch n.text {
			case "and", "or", "if", "else", "in", "recursive":
				return k
			case "not":
				if !afterName(nodes, k, "is") {
					return k
				}
			}
		case tokOp:
			switch n.text {
			case "==", "!=", "<", ">", "<=", ">=", ",", ":", "=":
				return k
			}
		}
	}
	return len(nodes)
}

func hasCode(nodes []node) bool {
	for _, n := range nodes {
		if n.kind != tokSpace {
			return true
		}
	}
	return false
}

func afterName(nodes []node, i int, name string) bool {
	for k := i - 1; k >= 0; k-- {
		if nodes[k].kind == tokSpace {
			continue
		}
		return nodes[k].kind == tokName && nodes[k].text == name
	}
	return false
}

func afterDot(nodes []node, i int) bool {
	for k := i - 1; k >= 0; k-- {
		if nodes[k].kind == tokSpace {
			continue
		}
		return nodes[k].kind == tokOp && nodes[k].text == "."
	}
	return false
}

// writeGroup writes the contents of a bracket group: comma-separated
// elements, each of which may be a conditional expression after an optional
// "key:" or "name=" prefix.
func (w *tagWriter) writeGroup(nodes []node) {
	out := w.out
	start := 0
	for i := 0; i <= len(nodes); i++ {
		if i < len(nodes) && !(nodes[i].kind == tokOp && nodes[i].text == ",") {
			continue
		}
		elem := nodes[start:i]
		p := 0
		for k, n := range elem {
			if n.kind == tokOp && (n.text == ":" || n.text == "=") {
				p = k + 1
			}
			if n.kind == tokName && n.text == "if" {
				break
			}
		}
		w.writeNodes(elem[:p])
		w.writeExpression(elem[p:])
		if i < len(nodes) {
			out.WriteString(nodes[i].text)
		}
		start = i + 1
	}
}

// writeExpression writes an expression, spelling a conditional at its top
// level as ((cond and [yes]) or [no])[0].
func (w *tagWriter) writeExpression(nodes []node) {
	out := w.out
	at := -1
	for i, n := range nodes {
		if n.kind == tokName && n.text == "if" {
			at = i
			break
		}
	}
	if at < 0 {
		w.writeNodes(nodes)
		return
	}
	yes := nodes[:at]
	rest := nodes[at+1:]
	var cond, no []node
	cond = rest
	for i, n := range rest {
		if n.kind == tokName && n.text == "else" {
			cond, no = rest[:i], rest[i+1:]
			break
		}
	}
	// fnSoft marks it for the rewriter, which drops the call (see rewriter).
	out.WriteString(" " + fnSoft + "((((")
	w.writeNodes(cond)
	out.WriteString(") and [")
	w.writeNodes(yes)
	out.WriteString("]) or [")
	if no == nil {
		out.WriteString(undefinedName)
	} else {
		w.writeExpression(no)
	}
	out.WriteString("])[0]) ")
}

// keywords are the names that are operators or parts of tags, never
// operands.
var keywords = map[string]bool{
	"and": true, "or": true, "not": true, "in": true, "is": true, "if": true, "else": true, "recursive": true,
}

func isOperand(n node) bool {
	switch n.kind {
	case tokOpen, tokString, tokNumber:
		return true
	case tokName:
		return !keywords[n.text]
	}
	return false
}

func isOp(n node, texts ...string) bool {
	return n.kind == tokOp && slices.Contains(texts, n.text)
}

// prevCode and nextCode find the nearest node that is not white space.
func prevCode(nodes []node, i int) int {
	for i--; i >= 0 && nodes[i].kind == tokSpace; i-- {
	}
	return i
}

func nextCode(nodes []node, i int) int {
	for ; i < len(nodes) && nodes[i].kind == tokSpace; i++ {
	}
	return i
}

// groupTests puts each test (x is name arg) in parentheses together with
// its operand. Jinja2 binds a test to the operand right before it, after
// its attributes, calls and filters, as tightly as a filter (1 + 2 is odd
// tests 2); gonja binds it to the whole comparison before it.
func (w *tagWriter) groupTests(nodes []node) []node {
	for i := 0; i < len(nodes); i++ {
		if nodes[i].kind != tokName || nodes[i].text != "is" || afterDot(nodes, i) {
			continue
		}
		start := testOperandStart(nodes, i)
		end, hasArg := testEnd(nodes, i)
		if start < 0 || end < 0 {
			continue
		}
		// A test without argument followed by another is, Jinja2 rejects.
		if n := nextCode(nodes, end); n < len(nodes) && nodes[n].kind == tokName && nodes[n].text == "is" &&
			!hasArg && w.err == nil {
			w.err = fmt.Errorf("TemplateSyntaxError: You cannot chain multiple tests with is")
		}
		if start == nextCode(nodes, 0) && nextCode(nodes, end) == len(nodes) {
			// The test is all there is: nothing to set apart.
			continue
		}
		group := node{tok: tok{tokOpen, "("}, group: slices.Clone(nodes[start:end]), close: &tok{tokClose, ")"}}
		rest := slices.Clone(nodes[end:])
		nodes = append(append(slices.Clone(nodes[:start]), group), rest...)
		i = start
	}
	return nodes
}

// testOperandStart finds where the operand of the test at i begins: an
// operand with its trailing .attr, [item], (call) and |filter parts, and a
// unary sign before it.
func testOperandStart(nodes []node, i int) int {
	pos := prevCode(nodes, i)
	if pos < 0 || !isOperand(nodes[pos]) {
		return -1
	}
	start := pos
	for {
		start = pos
		p := prevCode(nodes, pos)
		if p < 0 {
			break
		}
		switch {
		case isOp(nodes[p], ".", "|"):
			pos = prevCode(nodes, p)
			if pos < 0 || !isOperand(nodes[pos]) {
				return -1
			}
			continue
		case nodes[pos].kind == tokOpen && isOperand(nodes[p]):
			// A call or subscript of what precedes it.
			pos = p
			continue
		}
		break
	}
	if p := prevCode(nodes, start); p >= 0 && isOp(nodes[p], "-", "+") {
		if pp := prevCode(nodes, p); pp < 0 || !isOperand(nodes[pp]) {
			start = p
		}
	}
	return start
}

// testEnd finds where the test at i ends: after is, an optional not, the
// test name and its argument, which is a call's parentheses or one operand
// with its attributes, items and calls. It reports whether there was an
// argument; end is -1 when there is no test name.
func testEnd(nodes []node, i int) (end int, hasArg bool) {
	k := nextCode(nodes, i+1)
	if k < len(nodes) && nodes[k].kind == tokName && nodes[k].text == "not" {
		k = nextCode(nodes, k+1)
	}
	if k >= len(nodes) || nodes[k].kind != tokName {
		return -1, false
	}
	end = k + 1
	a := nextCode(nodes, end)
	if a >= len(nodes) {
		return end, false
	}
	if nodes[a].kind == tokOpen && nodes[a].text == "(" {
		return a + 1, true
	}
	if !isOperand(nodes[a]) {
		return end, false
	}
	end = a + 1
	for {
		n := nextCode(nodes, end)
		switch {
		case n < len(nodes) && nodes[n].kind == tokOpen && nodes[n].text != "{":
			end = n + 1
		case n+1 < len(nodes) && isOp(nodes[n], "."):
			m := nextCode(nodes, n+1)
			if m >= len(nodes) || !isOperand(nodes[m]) {
				return end, true
			}
			end = m + 1
		default:
			return end, true
		}
	}
}
