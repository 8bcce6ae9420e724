package native

import (
	"crypto/sha256"
	"encoding/hex"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ruvllm/ruvllm/backends"
	"github.com/ruvllm/ruvllm/internal/testmodel"
)

// moeDir holds a recent llama.cpp's runs of the tiny mixtures of experts
// (testdata/families/moe/README.md). Their files are not committed: synth
// writes them again, byte for byte, on any machine.
var moeDir = filepath.Join(familyDir, "moe")

// moeFile synthesizes the file a reference names ("tiny-qwen3moe-Q4_K_M.gguf":
// shape tiny-qwen3moe, type Q4_K_M) and checks that it is the file llama.cpp
// ran, by its SHA-256.
func moeFile(t *testing.T, name, sha string) string {
	t.Helper()
	base := strings.TrimSuffix(name, ".gguf")
	i := strings.LastIndex(base, "-")
	if i < 0 || !strings.HasPrefix(base, "tiny-") {
		t.Fatalf("reference of a file %s synth cannot name", name)
	}
	ft := base[i+1:]
	shape := base[:i]
	if ft == "MOE" { // MXFP4_MOE
		j := strings.LastIndex(shape, "-")
		shape, ft = base[:j], base[j+1:]
	}
	path := testmodel.Synth(t, shape, ft)
	if got := fileSHA256(t, path); got != sha {
		t.Fatalf("synth wrote %s with SHA-256 %s, llama.cpp ran %s", name, got, sha)
	}
	return path
}

func fileSHA256(t *testing.T, path string) string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(h.Sum(nil))
}

// TestMoEParity replays the recent llama.cpp's runs of the tiny mixtures of
// experts (qwen3moe, gpt-oss) in every file type, as TestFamilyParity
// replays the dense families': teacher-forced, the same tokens, logits
// within ruleOtherBuild's bound and top-5 probabilities within 0.02.
func TestMoEParity(t *testing.T) {
	files, _ := filepath.Glob(filepath.Join(moeDir, "*", "*.logits.json"))
	if len(files) == 0 {
		t.Fatalf("no reference runs in %s", moeDir)
	}
	for _, file := range files {
		model := filepath.Base(filepath.Dir(file))
		prompt := strings.TrimSuffix(filepath.Base(file), ".logits.json")
		t.Run(model+"/"+prompt, func(t *testing.T) {
			ref := readReference(t, file)
			b, _, _ := openFile(t, moeFile(t, ref.ModelFile, ref.ModelSHA256), backends.Options{Threads: 2})
			checkReference(t, b, ref, ruleFor(model, ref))
		})
	}
}
