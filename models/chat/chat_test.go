package chat

import (
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"
)

func mustParse(t *testing.T, src string) *Template {
	t.Helper()
	tpl, err := Parse(src)
	if err != nil {
		t.Fatalf("Parse(%q): %v", src, err)
	}
	return tpl
}

func TestRenderInputs(t *testing.T) {
	type tool struct {
		Name        string `json:"name"`
		Description string `json:"description"`
	}
	tests := []struct {
		name string
		src  string
		in   Input
		want string
	}{
		{"tools undefined when nil", "{{ tools is defined }}", Input{}, "False"},
		{"tools defined when empty", "{{ tools is defined }}{{ tools|length }}", Input{Tools: []any{}}, "True0"},
		{"generation prompt and tokens", "{{ bos_token }}{{ add_generation_prompt }}{{ eos_token }}",
			Input{AddGenerationPrompt: true, BOSToken: "<s>", EOSToken: "</s>"}, "<s>True</s>"},
		{"extra variables", "{{ enable_thinking }}{{ documents|length }}",
			Input{Extra: map[string]any{"enable_thinking": false, "documents": []any{"a"}}}, "False1"},
		{"extra cannot replace messages", "{{ messages|length }}",
			Input{Messages: []Message{{"role": "user"}}, Extra: map[string]any{"messages": []any{}}}, "1"},
		{"whole floats are ints", "{{ m.n }} {{ m.f }} {{ m|tojson }}",
			Input{Extra: map[string]any{"m": map[string]any{"n": float64(3), "f": 2.5}}}, `3 2.5 {"f": 2.5, "n": 3}`},
		{"null is None", "{{ messages[0].content }} {{ messages[0].content is none }} {{ messages[0].content is defined }}",
			Input{Messages: []Message{{"role": "assistant", "content": nil}}}, "None True True"},
		{"raw JSON keeps order and number kinds", "{{ t|tojson }}",
			Input{Extra: map[string]any{"t": json.RawMessage(`{"z": 1, "a": 1.0, "m": {"y": [true, null]}}`)}},
			`{"z": 1, "a": 1.0, "m": {"y": [true, null]}}`},
		{"structs go through encoding/json", "{{ tools[0]|tojson }}",
			Input{Tools: []any{tool{Name: "f", Description: "d"}}}, `{"name": "f", "description": "d"}`},
		{"typed slices and maps", "{{ x }} {{ y.k }}",
			Input{Extra: map[string]any{"x": []string{"a", "b"}, "y": map[string]int{"k": 7}}}, "['a', 'b'] 7"},
		{"strftime uses the clock", "{{ strftime_now('%Y-%m-%d %H:%M') }}",
			Input{Now: func() time.Time { return time.Date(2024, 7, 26, 13, 5, 0, 0, time.UTC) }}, "2024-07-26 13:05"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := mustParse(t, tt.src).Render(tt.in)
			if err != nil {
				t.Fatal(err)
			}
			if got != tt.want {
				t.Errorf("got %q, want %q", got, tt.want)
			}
		})
	}
}

func TestRaiseException(t *testing.T) {
	tpl := mustParse(t, "{% for m in messages %}{% if m.role == 'bad' %}{{ raise_exception('role ' + m.role + ' not supported') }}{% endif %}{% endfor %}ok")
	got, err := tpl.Render(Input{Messages: []Message{{"role": "user"}}})
	if err != nil || got != "ok" {
		t.Fatalf("Render = %q, %v", got, err)
	}
	_, err = tpl.Render(Input{Messages: []Message{{"role": "bad"}}})
	var raised *RaiseError
	if !errors.As(err, &raised) || raised.Message != "role bad not supported" {
		t.Fatalf("error %v is not RaiseError(role bad not supported)", err)
	}
	if !errors.Is(err, ErrTemplate) {
		t.Errorf("error %v does not wrap ErrTemplate", err)
	}
}

func TestStrftime(t *testing.T) {
	at := time.Date(2026, 1, 5, 9, 7, 3, 123456000, time.UTC)
	tests := map[string]string{
		"%d %b %Y":          "05 Jan 2026",
		"%A %B %-d %e":      "Monday January 5  5",
		"%H:%M:%S.%f %p %I": "09:07:03.123456 AM 09",
		"%j %U %W %w %u %V": "005 01 01 1 1 02",
		"%y %C %G %%|%Z%z":  "26 20 2026 %|",
		"%Q":                "%Q",
	}
	for format, want := range tests {
		if got := strftime(format, at); got != want {
			t.Errorf("strftime(%q) = %q, want %q", format, got, want)
		}
	}
}

// TestMalformedTemplates feeds broken templates: each must fail with an
// error wrapping ErrTemplate, at parse or render time, and never panic.
func TestMalformedTemplates(t *testing.T) {
	defer func(n int) { maxSteps = n }(maxSteps)
	maxSteps = 50_000 // keeps the endless-loop case quick
	bad := []string{
		"{% if %}",
		"{% if true %}x",
		"{% for %}{% endfor %}",
		"{% for x in %}{% endfor %}",
		"{% endfor %}",
		"{{ }}",
		"{{ 'unterminated }}",
		"{{ \"a\\",
		"{# unterminated comment",
		"{{ x.}}",
		"{{ x[ }}",
		"{{ x) + 1 }}",
		"{% if x] %}{% endif %}",
		"{{ (1, }}",
		"{{ f( }}",
		"{{ x|}}",
		"{{ x is }}",
		"{% set %}",
		"{% set x %}",
		"{% macro %}{% endmacro %}",
		"{% macro f( %}{% endmacro %}",
		"{% filter %}{% endfilter %}",
		"{% raw %}unterminated",
		"{% include 'other' %}",
		"{% extends 'base' %}",
		"{% do x %}",
		"{% for x in y recursive %}{{ loop(x) }}{% endfor %}",
		"{{ '\\x4' }}",
		"{{ '\\u12' }}",
		"{{ 1 + }}",
		"{{ nosuch() }}",
		"{{ 'a' | nosuchfilter }}",
		"{{ x is nosuchtest }}",
		"{% break %}",
		"{{ [1,2][5:2:0] }}",
		"{{ 1 / 0 }}",
		"{{ 1 // 0 }}",
		"{{ 'a' * 'b' }}",
		"{{ {}.nope() }}",
		"{{ messages.append(1) }}",
		"{% set ns = namespace() %}{% set ns2.x = 1 %}",
		"{% set x = 1 %}{% set x.y = 2 %}",
		"{{ range(10000000)|length }}",
		"{{ 'x' * 100000000 }}",
		"{{ 2 ** 100 }}",
		"{% macro f() %}{{ f() }}{% endmacro %}{{ f() }}",
		"{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}",
		"{% set ns = namespace(s='xxxxxxxxxxxxxxxx') %}{% for i in range(40) %}{% set ns.s = ns.s + ns.s %}{% endfor %}",
		"{{ none.x.y }}",
		"{{ undefined_thing.attr }}",
		"\x00{{\xff}}",
		"{{ " + strings.Repeat("(", 5000) + "1" + strings.Repeat(")", 5000) + " }}",
		strings.Repeat("{% if true %}", 5000) + strings.Repeat("{% endif %}", 5000),
		strings.Repeat("{% set x %}", 5000),
		"{{ 1" + strings.Repeat(" + 1", 5000) + " }}",
		strings.Repeat(" ", maxSource+1),
	}
	for _, src := range bad {
		name := src
		if len(name) > 40 {
			name = name[:40]
		}
		t.Run(name, func(t *testing.T) {
			tpl, err := Parse(src)
			if err == nil {
				_, err = tpl.Render(Input{Messages: []Message{{"role": "user", "content": "hi"}}})
			}
			if err == nil {
				t.Fatalf("no error")
			}
			if !errors.Is(err, ErrTemplate) {
				t.Errorf("error %v does not wrap ErrTemplate", err)
			}
		})
	}
}

func TestOutputLimit(t *testing.T) {
	// 6 MiB per message, 16 messages: past the 64 MiB bound on output.
	big := strings.Repeat("x", 6<<20)
	msgs := make([]Message, 16)
	for i := range msgs {
		msgs[i] = Message{"role": "user", "content": big}
	}
	_, err := mustParse(t, "{% for m in messages %}{{ m.content }}{% endfor %}").Render(Input{Messages: msgs})
	if !errors.Is(err, errOutputTooLarge) {
		t.Fatalf("error = %v, want output too large", err)
	}
}

func TestDeepInput(t *testing.T) {
	var v any = "leaf"
	for range maxDepth + 10 {
		v = []any{v}
	}
	_, err := mustParse(t, "{{ x }}").Render(Input{Extra: map[string]any{"x": v}})
	if err == nil {
		t.Fatal("no error for input nested too deeply")
	}
	raw := json.RawMessage(strings.Repeat("[", 10000) + strings.Repeat("]", 10000))
	if _, err := mustParse(t, "{{ x }}").Render(Input{Extra: map[string]any{"x": raw}}); err == nil {
		t.Fatal("no error for JSON nested too deeply")
	}
	if _, err := mustParse(t, "{{ x }}").Render(Input{Extra: map[string]any{"x": json.RawMessage(`{"a":`)}}); err == nil {
		t.Fatal("no error for truncated JSON")
	}
}

func TestConcurrentRender(t *testing.T) {
	src, _ := Builtin("llama3")
	tpl := mustParse(t, src)
	want, err := tpl.Render(Input{Messages: []Message{{"role": "user", "content": "hi"}}})
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 50 {
				got, err := tpl.Render(Input{Messages: []Message{{"role": "user", "content": "hi"}}})
				if err != nil || got != want {
					t.Errorf("concurrent render = %q, %v", got, err)
					return
				}
			}
		}()
	}
	wg.Wait()
}

// FuzzTemplate checks that no template source and no message content makes
// Parse or Render panic.
func FuzzTemplate(f *testing.F) {
	f.Add("{% for m in messages %}{{ m.content|trim }}{% endfor %}", "hi")
	f.Add("{{ (a if b else c) ~ 'x'[1:] }}", "")
	f.Add("{% set ns = namespace(x=1) %}{% set ns.x = ns.x + 1 %}{{ ns.x|tojson(indent=2) }}", "{}")
	f.Add("{%- if x is not none -%}{{- '\\n' -}}{%+ endif +%}", "\n")
	f.Add("{% macro f(a, b=1) %}{{ varargs }}{% endmacro %}{{ f(1, 2, 3) }}", "x")
	f.Add("{{ messages[0].content.split('a')[-1].strip() }}", "banana")
	f.Fuzz(func(t *testing.T, src, content string) {
		if len(src) > 2000 {
			return
		}
		tpl, err := Parse(src)
		if err != nil {
			return
		}
		_, _ = tpl.Render(Input{Messages: []Message{{"role": "user", "content": content}}, Extra: map[string]any{"x": content}})
	})
}
