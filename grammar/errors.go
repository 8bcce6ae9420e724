package grammar

import "fmt"

// SyntaxError says where and why the text of a grammar (GBNF source, a
// regular expression) cannot be read, so that a server can hand the user
// the place to fix rather than a bare refusal. It wraps ErrGrammar.
type SyntaxError struct {
	// Lang is the language of the text: "gbnf" or "regex".
	Lang string
	// Line is the 1-based line of the fault; 0 for a regular expression,
	// whose Column counts from its start across any newlines.
	Line int
	// Column is the 1-based column, in characters; 0 when the fault has
	// no one place (a missing root rule).
	Column int
	// Msg is the reason.
	Msg string
}

func (e *SyntaxError) Error() string {
	switch {
	case e.Line > 0:
		return fmt.Sprintf("%v: %s: line %d, column %d: %s", ErrGrammar, e.Lang, e.Line, e.Column, e.Msg)
	case e.Column > 0:
		return fmt.Sprintf("%v: %s: column %d: %s", ErrGrammar, e.Lang, e.Column, e.Msg)
	}
	return fmt.Sprintf("%v: %s: %s", ErrGrammar, e.Lang, e.Msg)
}

// Unwrap makes errors.Is(err, ErrGrammar) hold.
func (e *SyntaxError) Unwrap() error { return ErrGrammar }

// RuleError says which rule of a grammar makes it unusable (it matches no
// finite string, or is left-recursive), so that the user can find it in
// what they wrote. It wraps ErrGrammar.
type RuleError struct {
	// Rule is the rule's name; "" for the root expression given to
	// Compile.
	Rule string
	// Line is the 1-based line of the rule's definition in GBNF source,
	// 0 when there is none.
	Line int
	// Msg is the reason.
	Msg string
}

func (e *RuleError) Error() string {
	switch {
	case e.Rule == "":
		return fmt.Sprintf("%v: the root expression %s", ErrGrammar, e.Msg)
	case e.Line > 0:
		return fmt.Sprintf("%v: gbnf: line %d: rule %q %s", ErrGrammar, e.Line, e.Rule, e.Msg)
	}
	return fmt.Sprintf("%v: rule %q %s", ErrGrammar, e.Rule, e.Msg)
}

// Unwrap makes errors.Is(err, ErrGrammar) hold.
func (e *RuleError) Unwrap() error { return ErrGrammar }
