package api

import (
	"bytes"
	"errors"
	"mime/multipart"
	"strings"
	"testing"

	"github.com/ruvllm/ruvllm/internal/testmodel"
	"github.com/ruvllm/ruvllm/lora"
	"github.com/ruvllm/ruvllm/session"
)

// TestReadUpload reads upload bodies into a registry of the synthesized
// tiny model: fields in any order, and the refusals, each leaving nothing
// behind.
func TestReadUpload(t *testing.T) {
	m := testmodel.Tiny(t)
	dir := t.TempDir()
	reg, err := lora.NewRegistry(lora.RegistryOptions{Dir: dir, Config: m.Config, Base: m.File, BaseModel: "tiny", MaxUploadBytes: 4 << 20})
	if err != nil {
		t.Fatal(err)
	}
	am := &session.Model{ID: "tiny", Adapters: reg}
	pick := func(string) (*session.Model, error) { return am, nil }
	f := makeAdapter(t, m.Config, 2, 7)
	type field struct{ name, filename, value string }
	body := func(fields ...field) *multipart.Reader {
		var buf bytes.Buffer
		w := multipart.NewWriter(&buf)
		for _, fl := range fields {
			if fl.filename == "" {
				w.WriteField(fl.name, fl.value)
				continue
			}
			p, _ := w.CreateFormFile(fl.name, fl.filename)
			p.Write([]byte(fl.value))
		}
		w.Close()
		return multipart.NewReader(&buf, w.Boundary())
	}
	gg, cf, st := string(f.gguf), string(f.config), string(f.weights)
	cases := []struct {
		name   string
		fields []field
		want   error
	}{
		{"gguf", []field{{"name", "", "g"}, {"file", "a.gguf", gg}}, nil},
		{"peft, name last", []field{{"file", "adapter_config.json", cf}, {"file", "adapter_model.safetensors", st}, {"base_model", "", "tiny"}, {"name", "", "p"}}, nil},
		{"no name", []field{{"file", "a.gguf", gg}}, lora.ErrBadName},
		{"escaping name", []field{{"name", "", "../x"}, {"file", "a.gguf", gg}}, lora.ErrBadName},
		{"stray field", []field{{"name", "", "s"}, {"temperature", "", "1"}, {"file", "a.gguf", gg}}, lora.ErrInvalid},
		{"long field", []field{{"name", "", strings.Repeat("n", 5000)}, {"file", "a.gguf", gg}}, lora.ErrInvalid},
		{"truncated", []field{{"name", "", "t"}, {"file", "c.json", cf}, {"file", "w.safetensors", st[:len(st)/2]}}, lora.ErrInvalid},
		{"another base model", []field{{"name", "", "o"}, {"base_model", "", "llama-7b"}, {"file", "a.gguf", gg}}, lora.ErrBaseMismatch},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, info, err := readUpload(body(c.fields...), pick)
			if c.want == nil {
				if err != nil || !info.Resident {
					t.Fatalf("%+v, %v", info, err)
				}
				return
			}
			if !errors.Is(err, c.want) {
				t.Fatalf("error %v, want %v", err, c.want)
			}
		})
	}
	if got := strings.Join(dirEntries(t, dir), " "); got != "g.gguf p" {
		t.Fatalf("adapter dir holds %s", got)
	}
}
