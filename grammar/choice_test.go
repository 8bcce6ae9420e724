package grammar

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
)

func TestChoice(t *testing.T) {
	tests := []struct {
		name    string
		options []string
		no      []string
	}{
		{"one", []string{"positive"}, []string{"", "positiv", "positive ", "Positive"}},
		{"labels", []string{"positive", "negative", "neutral"}, []string{"", "ne", "neg", "positivenegative", "neutrals"}},
		{"prefixes of each other", []string{"a", "ab", "abc", "b"}, []string{"", "abcd", "ba", "bb", "ac"}},
		{"duplicates", []string{"x", "y", "x"}, []string{"", "xy", "xx"}},
		{"unicode and JSON", []string{"日本", "日本語", `{"a": 1}`, "é\n"}, []string{"日", "語", `{"a": 2}`, "é"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			g, err := Choice(tc.options)
			if err != nil {
				t.Fatal(err)
			}
			checkStrings(t, g, tc.options, tc.no)
		})
	}
}

// TestChoiceIsDeterministic checks that many options sharing prefixes keep
// the automaton at one parse stack for each byte that may come next (ten
// digits here), where a plain alternative of the options would hold one
// for each option still possible.
func TestChoiceIsDeterministic(t *testing.T) {
	var options []string
	for i := range 2000 {
		options = append(options, fmt.Sprintf("item-%d", i))
	}
	g, err := Choice(options)
	if err != nil {
		t.Fatal(err)
	}
	v := NewVocabulary([]string{"x"}, nil)
	for _, o := range []string{"item-0", "item-1999", "item-12", "item-123"} {
		m := NewMatcher(g, v)
		for i := 0; i < len(o); i++ {
			if n := len(m.a.states[m.cur].stacks); n > 10 {
				t.Fatalf("%d parse stacks after %q", n, o[:i])
			}
			m.AcceptBytes(o[i : i+1])
		}
		if !m.Matched() {
			t.Errorf("%q does not match", o)
		}
	}
	if fullMatch(g, "item-2000") || fullMatch(g, "item-") {
		t.Error("a string that is no option matches")
	}
}

func TestChoiceErrors(t *testing.T) {
	tests := []struct {
		name    string
		options []string
		msg     string
	}{
		{"nil", nil, "empty"},
		{"empty list", []string{}, "empty"},
		{"empty string", []string{""}, "option 0 is the empty string"},
		{"empty among others", []string{"a", "b", ""}, "option 2 is the empty string"},
		{"invalid UTF-8", []string{"ok", "\xff"}, "option 1 is not valid UTF-8"},
		{"too large", []string{strings.Repeat("a", MaxElements/2+1), strings.Repeat("b", MaxElements/2+1)}, "more than"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			g, err := Choice(tc.options)
			if g != nil || !errors.Is(err, ErrGrammar) || !strings.Contains(err.Error(), tc.msg) {
				t.Errorf("Choice: %v, want an ErrGrammar saying %q", err, tc.msg)
			}
		})
	}
}

func TestChoiceMatcher(t *testing.T) {
	options := []string{"yes", "no", "maybe", "yes please", "né"}
	checkMatcher(t, []matcherCase{
		{"options", func() (*Grammar, error) { return Choice(options) }, "yesnoambpl \xC3\xA9",
			func(s string) bool { return slices.Contains(options, s) }},
	})
}
