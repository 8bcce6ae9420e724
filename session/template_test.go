package session

import (
	"reflect"
	"testing"
	"time"
)

func TestKwargs(t *testing.T) {
	on, off := true, false
	for _, tc := range []struct {
		name string
		req  Request
		want map[string]any
	}{
		{"nothing", Request{}, nil},
		{"think off", Request{Reasoning: ReasoningOptions{Think: &off}}, map[string]any{"enable_thinking": false, "thinking": false}},
		{"effort", Request{Reasoning: ReasoningOptions{Effort: "high"}}, map[string]any{"reasoning_effort": "high"}},
		{"effort none is thinking off", Request{Reasoning: ReasoningOptions{Effort: "none"}}, map[string]any{"enable_thinking": false, "thinking": false}},
		{"the server's default", Request{}, nil},
		{"the client's kwargs win", Request{Reasoning: ReasoningOptions{Think: &on}, Template: TemplateOptions{Kwargs: map[string]any{"enable_thinking": false, "x": 1}}},
			map[string]any{"enable_thinking": false, "thinking": true, "x": 1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.req.kwargs(false); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("kwargs %v, want %v", got, tc.want)
			}
		})
	}
}

func TestServerTurnsThinkingOff(t *testing.T) {
	on := true
	off := map[string]any{"enable_thinking": false, "thinking": false}
	if got := (&Request{}).kwargs(true); !reflect.DeepEqual(got, off) {
		t.Errorf("kwargs %v, want %v", got, off)
	}
	if got := (&Request{Reasoning: ReasoningOptions{Think: &on}}).kwargs(true); got["enable_thinking"] != true {
		t.Errorf("a request that thinks: kwargs %v", got)
	}
	if got := (&Request{Reasoning: ReasoningOptions{Effort: "low"}}).kwargs(true); got["enable_thinking"] != nil || got["reasoning_effort"] != "low" {
		t.Errorf("a request with an effort: kwargs %v", got)
	}
}

func TestFoldSystem(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   []Message
		want []Message
		ok   bool
	}{
		{"no system", []Message{{"role": "user", "content": "hi"}}, nil, false},
		{"into the first user turn", []Message{{"role": "system", "content": "Be brief."}, {"role": "user", "content": "hi"}, {"role": "user", "content": "again"}},
			[]Message{{"role": "user", "content": "Be brief.\n\nhi"}, {"role": "user", "content": "again"}}, true},
		{"two systems", []Message{{"role": "system", "content": "A"}, {"role": "system", "content": "B"}, {"role": "user", "content": "hi"}},
			[]Message{{"role": "user", "content": "A\n\nB\n\nhi"}}, true},
		{"no user turn", []Message{{"role": "system", "content": "A"}, {"role": "assistant", "content": "x"}},
			[]Message{{"role": "user", "content": "A"}, {"role": "assistant", "content": "x"}}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := make([]any, len(tc.in))
			for i, m := range tc.in {
				before[i] = m["content"]
			}
			got, ok := foldSystem(tc.in)
			if ok != tc.ok || (ok && !reflect.DeepEqual(got, tc.want)) {
				t.Errorf("got %v %v, want %v %v", got, ok, tc.want, tc.ok)
			}
			for i, m := range tc.in {
				if m["content"] != before[i] {
					t.Errorf("the caller's message %d changed: %v", i, m)
				}
			}
		})
	}
}

func TestContinueFinal(t *testing.T) {
	msgs := []Message{{"role": "user", "content": "hi"}, {"role": "assistant", "content": "Once upon "}}
	for _, tc := range []struct {
		name, render, want string
		ok                 bool
	}{
		{"cut after the content", "<u>hi</u><a>Once upon</a>\n", "<u>hi</u><a>Once upon", true},
		{"the last occurrence", "<u>Once upon</u><a>Once upon</a>", "<u>Once upon</u><a>Once upon", true},
		{"not written as it is", "<u>hi</u><a>ONCE</a>", "", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := continueFinal(tc.render, msgs, "messages")
			if (err == nil) != tc.ok || got != tc.want {
				t.Errorf("got %q, %v; want %q", got, err, tc.want)
			}
		})
	}
	if _, err := continueFinal("x", msgs[:1], "messages"); err == nil {
		t.Error("a user message last was continued")
	}
}

// TestClockKwargs checks the clock variables templates read: given by
// the request, they stay; read by the template, they are set in
// llama-server's layouts (Llama 3.x "26 Jul 2024", firefunction-v2
// "Jul 26 2024 15:04:05 GMT"); not read, they are left out.
func TestClockKwargs(t *testing.T) {
	now := time.Date(2024, 7, 26, 15, 4, 5, 0, time.Local)
	for _, tc := range []struct {
		name string
		kw   map[string]any
		src  string
		want map[string]any
	}{
		{"llama 3.x", nil, "Today Date: {{ date_string }}", map[string]any{"date_string": "26 Jul 2024"}},
		{"firefunction-v2", map[string]any{"a": 1}, "'Today is ' + datetime + '.'", map[string]any{"a": 1, "datetime": "Jul 26 2024 15:04:05 GMT"}},
		{"given by the request", map[string]any{"date_string": "1 Jan 2000"}, "{{ date_string }}", map[string]any{"date_string": "1 Jan 2000"}},
		{"not read", nil, "{{ messages }}", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := clockKwargs(tc.kw, tc.src, now); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("clockKwargs = %v, want %v", got, tc.want)
			}
		})
	}
}
