package hub

import (
	"strings"
	"testing"
)

func TestParseRef(t *testing.T) {
	tests := []struct {
		in   string
		want Ref
	}{
		{"Qwen/Qwen2.5-0.5B-Instruct-GGUF/qwen2.5-0.5b-instruct-q4_k_m.gguf",
			Ref{Repo: "Qwen/Qwen2.5-0.5B-Instruct-GGUF", File: "qwen2.5-0.5b-instruct-q4_k_m.gguf"}},
		{"  bartowski/SmolLM2-360M-Instruct-GGUF/SmolLM2-360M-Instruct-Q4_K_M.gguf\n",
			Ref{Repo: "bartowski/SmolLM2-360M-Instruct-GGUF", File: "SmolLM2-360M-Instruct-Q4_K_M.gguf"}},
		{"unsloth/big-GGUF/Q8_0/big-Q8_0.gguf",
			Ref{Repo: "unsloth/big-GGUF", File: "Q8_0/big-Q8_0.gguf"}},
		{"owner/name@v1.0/model.gguf",
			Ref{Repo: "owner/name", Revision: "v1.0", File: "model.gguf"}},
		{"owner/name:Q8_0", Ref{Repo: "owner/name", Quant: "Q8_0"}},
		{"owner/name@dev:q4_k_m", Ref{Repo: "owner/name", Revision: "dev", Quant: "q4_k_m"}},
		{"owner/name", Ref{Repo: "owner/name"}},
		{"o_1/n.a-m_e/sub dir/f.gguf", Ref{Repo: "o_1/n.a-m_e", File: "sub dir/f.gguf"}},
		// As ollama writes them, and as copied from the browser.
		{"hf.co/bartowski/Qwen-GGUF:Q4_K_M", Ref{Repo: "bartowski/Qwen-GGUF", Quant: "Q4_K_M"}},
		{"hf.co/owner/name:latest", Ref{Repo: "owner/name"}},
		{"owner/name:LATEST", Ref{Repo: "owner/name"}},
		{"https://huggingface.co/owner/name/model.gguf", Ref{Repo: "owner/name", File: "model.gguf"}},
		{"https://huggingface.co/owner/name", Ref{Repo: "owner/name"}},
		{"HF.CO/owner/name/sub/f.gguf", Ref{Repo: "owner/name", File: "sub/f.gguf"}},
		{"https://huggingface.co/owner/name/blob/main/sub/f.gguf", Ref{Repo: "owner/name", File: "sub/f.gguf"}},
		{"https://huggingface.co/owner/name/resolve/v2/f.gguf?download=true", Ref{Repo: "owner/name", Revision: "v2", File: "f.gguf"}},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := ParseRef(tt.in)
			if err != nil {
				t.Fatal(err)
			}
			if got != tt.want {
				t.Errorf("ParseRef(%q) = %+v, want %+v", tt.in, got, tt.want)
			}
			again, err := ParseRef(got.String())
			if err != nil || again != got {
				t.Errorf("ParseRef(%q) = %+v, %v; want the same ref back", got.String(), again, err)
			}
		})
	}
}

func TestParseRefRejectsHostile(t *testing.T) {
	for _, in := range []string{
		"",
		"   ",
		"owner",
		"/etc/passwd",
		"../../etc/passwd",
		"owner/name/",
		"owner/name/../../../etc/passwd",
		"owner/name/a/../../b.gguf",
		"owner/name/./model.gguf",
		"owner/name/a//b.gguf",
		"owner/name//etc/passwd",
		"owner/../model.gguf",
		"../name/model.gguf",
		"./name/model.gguf",
		"owner/.hidden/model.gguf",
		"owner/name./model.gguf",
		"-owner/name/model.gguf",
		"own er/name/model.gguf",
		"owner/na..me/model.gguf",
		`owner/name/C:\Windows\system.ini`,
		`owner/name/a\..\..\b.gguf`,
		"owner/name/c:evil.gguf",
		"owner/name/a\x00b.gguf",
		"owner/name/a\nb.gguf",
		"owner/name/model.gguf.part",
		"owner/name:",
		"owner/name:Q4/K",
		"owner/name:Q4-K",
		"owner/name@/model.gguf",
		"owner/name@../model.gguf",
		"owner/name@a:b/model.gguf",
		"https://example.com/owner/name/model.gguf",
		"hf.co/owner",
		"hf.co/owner/name/blob/main/../../x.gguf",
		"https://huggingface.co/owner/name/resolve/%zz/f.gguf",
		"owner/" + strings.Repeat("n", 200) + "/model.gguf",
		"owner/name/" + strings.Repeat("f", 2000) + ".gguf",
	} {
		if r, err := ParseRef(in); err == nil {
			t.Errorf("ParseRef(%q) = %+v, want an error", in, r)
		}
	}
}

// TestParseWebRevision reads a revision with a slash from a download URL,
// which the owner/name@REV/FILE syntax cannot write.
func TestParseWebRevision(t *testing.T) {
	for _, tt := range []struct {
		in   string
		want Ref
	}{
		{"https://huggingface.co/o/n/resolve/refs%2Fpr%2F1/f.gguf", Ref{Repo: "o/n", Revision: "refs/pr/1", File: "f.gguf"}},
		{"huggingface.co/o/n/blob/main/d/f%20g.gguf", Ref{Repo: "o/n", File: "d/f g.gguf"}},
	} {
		t.Run(tt.in, func(t *testing.T) {
			got, err := ParseRef(tt.in)
			if err != nil || got != tt.want {
				t.Errorf("ParseRef(%q) = %+v, %v; want %+v", tt.in, got, err, tt.want)
			}
		})
	}
}

func TestRefValidate(t *testing.T) {
	bad := []Ref{
		{Repo: "owner/name", File: "f.gguf", Quant: "Q4_K_M"},
		{Repo: "owner/name", File: "f.gguf", Revision: "/main"},
		{Repo: "owner/name", File: "f.gguf", Revision: "a//b"},
		{Repo: "owner/name", File: "f.gguf", SHA256: strings.Repeat("A", 64)},
		{Repo: "owner/name", Quant: strings.Repeat("Q", 40)},
		{Repo: "owner", File: "f.gguf"},
	}
	for _, r := range bad {
		if err := r.Validate(); err == nil {
			t.Errorf("Validate(%+v) = nil, want an error", r)
		}
	}
	good := Ref{Repo: "owner/name", File: "d/f.gguf", Revision: "refs/pr/1", Size: 1, SHA256: strings.Repeat("a", 64)}
	if err := good.Validate(); err != nil {
		t.Errorf("Validate(%+v) = %v", good, err)
	}
}

func TestResolveURL(t *testing.T) {
	r := Ref{Repo: "owner/name", File: "sub dir/a#b?.gguf", Revision: "refs/pr/1"}
	want := "http://h/p/owner/name/resolve/refs%2Fpr%2F1/sub%20dir/a%23b%3F.gguf"
	if got := r.resolveURL("http://h/p"); got != want {
		t.Errorf("got %s, want %s", got, want)
	}
	r = Ref{Repo: "owner/name", File: "f.gguf"}
	if got, want := r.resolveURL("https://huggingface.co"), "https://huggingface.co/owner/name/resolve/main/f.gguf"; got != want {
		t.Errorf("got %s, want %s", got, want)
	}
}
