package api

import (
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ruvllm/ruvllm/internal/httpcheck"
)

// TestReadmeExamples runs the README's curl examples as they are pasted
// against a test server, the default model's name put in for the served
// one: each answers 200 with JSON (issue 34: the README's examples must
// keep working).
func TestReadmeExamples(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	fs := newFakeServer(t, Options{}, nil)
	fs.eng.script = scriptOf(t, fs.tok, "▁Hello", "▁world", "!")
	n := 0
	inBlock := false
	for _, line := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(line, "```") {
			inBlock = !inBlock
			continue
		}
		if !inBlock || !strings.HasPrefix(line, "curl ") {
			continue
		}
		n++
		t.Run(line, func(t *testing.T) {
			args, err := shellWords(line)
			if err != nil {
				t.Fatal(err)
			}
			var url, body string
			var header []string
			for i := 1; i < len(args); i++ {
				switch a := args[i]; {
				case a == "-s":
				case a == "-H" && i+1 < len(args):
					k, v, _ := strings.Cut(args[i+1], ":")
					header = append(header, k, strings.TrimSpace(v))
					i++
				case a == "-d" && i+1 < len(args):
					body = args[i+1]
					i++
				case strings.HasPrefix(a, "localhost:8080"):
					url = fs.URL + strings.TrimPrefix(a, "localhost:8080")
				default:
					t.Fatalf("curl argument %q is not one this test knows", a)
				}
			}
			body = strings.ReplaceAll(body, `"qwen2.5-0.5b-instruct-q4_k_m"`, `"fake-model"`)
			method := "GET"
			if body != "" {
				method = "POST"
			}
			resp, out := doRaw(t, method, url, body, header...)
			if resp.StatusCode != 200 || !strings.HasPrefix(resp.Header.Get("Content-Type"), "application/json") {
				t.Errorf("%d %s: %s", resp.StatusCode, resp.Header.Get("Content-Type"), out)
			}
		})
	}
	if n < 5 {
		t.Errorf("the README has %d curl examples; the protocols' five were expected", n)
	}
}

// shellWords splits a command line as a POSIX shell does for words in
// single quotes and plain words (what the README's examples use).
func shellWords(s string) ([]string, error) {
	var out []string
	var cur strings.Builder
	in, quoted := false, false
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case quoted:
			if c == '\'' {
				quoted = false
			} else {
				cur.WriteByte(c)
			}
		case c == '\'':
			quoted, in = true, true
		case c == ' ' || c == '\t':
			if in {
				out = append(out, cur.String())
				cur.Reset()
				in = false
			}
		case c == '#':
			if !in {
				return out, nil
			}
			cur.WriteByte(c)
		default:
			cur.WriteByte(c)
			in = true
		}
	}
	if quoted {
		return nil, os.ErrInvalid
	}
	if in {
		out = append(out, cur.String())
	}
	return out, nil
}

// doRaw sends a request as curl does: a body with curl's default
// Content-Type (a form) unless a header says otherwise.
func doRaw(t *testing.T, method, url, body string, header ...string) (*http.Response, []byte) {
	t.Helper()
	if body != "" {
		header = append([]string{"Content-Type", "application/x-www-form-urlencoded"}, header...)
	}
	return httpcheck.Do(t, method, url, body, header...)
}
