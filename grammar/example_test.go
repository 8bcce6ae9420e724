package grammar_test

import (
	"fmt"

	"github.com/ruvllm/ruvllm/grammar"
)

// matches reports whether g matches s whole.
func matches(g *grammar.Grammar, s string) bool {
	m := grammar.NewMatcher(g, grammar.NewVocabulary([]string{"x"}, nil))
	return m.AcceptBytes(s) && m.Matched()
}

func ExampleGBNF() {
	g, err := grammar.GBNF(`
root ::= move (" " move)*
move ::= [a-h] [1-8] ("=" [QRBN])?   # a pawn move, perhaps promoting
`)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(matches(g, "e4 e5 a8=Q"), matches(g, "e9"))
	_, err = grammar.GBNF("root ::= item\nitem ::= \"x\" | item \"y\"")
	fmt.Println(err)
	// Output:
	// true false
	// grammar: gbnf: line 2: rule "item" can reach itself before matching a byte (left recursion)
}

func ExampleRegex() {
	g, err := grammar.Regex(`(?P<user>\w+)@example\.(com|org)`)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(matches(g, "zoë@example.org"), matches(g, "a b@example.com"))
	_, err = grammar.Regex(`a(?=b)`)
	fmt.Println(err)
	// Output:
	// true false
	// grammar: regex: column 2: lookaround assertions are not supported
}

func ExampleChoice() {
	g, err := grammar.Choice([]string{"positive", "negative", "neutral"})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(matches(g, "neutral"), matches(g, "neg"))
	// Output: true false
}
