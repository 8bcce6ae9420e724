package reasoning

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/ruvllm/ruvllm/internal/shared"
)

func TestDetect(t *testing.T) {
	tests := []struct {
		name, src string
		want      Format
	}{
		{"think tags", "{{ '<|im_start|>assistant\\n<think>\\n' }}", Think},
		{"close tag only", "{% set c = content.split('</think>')[-1] %}", Think},
		{"granite", "Write your thoughts between <think></think> and your response between <response></response>", Granite},
		{"command r7b", "start by writing <|START_THINKING|> ... close it out with <|END_THINKING|> ... write <|START_RESPONSE|>", CommandR},
		{"harmony", "{{ '<|start|>assistant<|channel|>final<|message|>' }}", Harmony},
		{"plain", "{{ '<|im_start|>' + m.role + '\\n' + m.content + '<|im_end|>' }}", None},
		{"other tags", "<seed:think></seed:think> [THINK][/THINK]", None},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := Detect(tc.src); got != tc.want {
				t.Errorf("Detect = %s, want %s", got, tc.want)
			}
		})
	}
}

// thinkers are the shared templates that think, with their format; every
// other template there must be None.
var thinkers = map[string]Format{
	"Qwen-Qwen3-0.6B":                          Think,
	"deepseek-ai-DeepSeek-R1-Distill-Qwen-32B": Think,
	"deepseek-ai-DeepSeek-V3.1":                Think,
	"ibm-granite-granite-3.3-2B-Instruct":      Granite,
	"openai-gpt-oss-120b":                      Harmony,
}

func TestDetectTemplates(t *testing.T) {
	dir := shared.Path(t, "templates")
	files, err := filepath.Glob(filepath.Join(dir, "*.jinja"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no templates in %s: %v", dir, err)
	}
	for _, file := range files {
		name := strings.TrimSuffix(filepath.Base(file), ".jinja")
		t.Run(name, func(t *testing.T) {
			src, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			if got, want := Detect(string(src)), thinkers[name]; got != want {
				t.Errorf("Detect = %s, want %s", got, want)
			}
		})
	}
}

func TestMarkers(t *testing.T) {
	for _, f := range []Format{None, Think, Granite, Harmony, CommandR} {
		for _, m := range f.Markers() {
			if !strings.HasPrefix(m, "<") || !strings.HasSuffix(m, ">") {
				t.Errorf("%s: marker %q", f, m)
			}
		}
	}
	if m := Harmony.Markers(); slices.Contains(m, hCall) || slices.Contains(m, hReturn) || !slices.Contains(m, hChannel) {
		t.Errorf("harmony markers %q", m)
	}
}
