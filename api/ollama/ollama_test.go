package ollama

import "testing"

func TestHumanCount(t *testing.T) {
	for n, want := range map[uint64]string{
		494032768: "494.03M", 7615616512: "7.6B", 8000000000: "8B", 3000000: "3M", 293000: "293K", 135: "135",
	} {
		if got := humanCount(n); got != want {
			t.Errorf("%d: %q, want %q", n, got, want)
		}
	}
}

func TestArgumentObject(t *testing.T) {
	for in, want := range map[string]string{
		`{"b": 1, "a": [1, 2]}`: `{"b":1,"a":[1,2]}`, // the model's order kept
		``:                      `{}`,
		`"{\"x\": true}"`:       `{"x":true}`, // an object given as JSON text
		`{"city": "Par`:         ``,           // cut off
		`[1]`:                   ``,
	} {
		got, ok := argumentObject(in)
		if string(got) != want || ok != (want != "") {
			t.Errorf("%q: %q %v, want %q", in, got, ok, want)
		}
	}
}

func TestModelName(t *testing.T) {
	for id, want := range map[string]string{"qwen": "qwen:latest", "qwen2.5:0.5b": "qwen2.5:0.5b", "org/m": "org/m:latest"} {
		if got := modelName(id); got != want {
			t.Errorf("%s: %s, want %s", id, got, want)
		}
	}
}
