package gguf

import (
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/ruvllm/ruvllm/kernels"
)

// rssFile is the process's resident memory backed by files, in bytes, from
// /proc/self/status.
func rssFile(t *testing.T) int64 {
	t.Helper()
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Skip("no /proc/self/status")
	}
	for line := range strings.Lines(string(b)) {
		if f := strings.Fields(line); len(f) == 3 && f[0] == "RssFile:" {
			kb, _ := strconv.ParseInt(f[1], 10, 64)
			return kb << 10
		}
	}
	t.Skip("no RssFile in /proc/self/status")
	return 0
}

// TestReleasePages maps a 32 MiB tensor, touches it (its pages become
// resident), releases the pages (they leave the resident memory) and reads
// it again, unchanged.
func TestReleasePages(t *testing.T) {
	const size = 32 << 20
	data := make([]byte, size)
	for i := range data {
		data[i] = byte(i * 7)
	}
	path := filepath.Join(t.TempDir(), "big.gguf")
	w := NewWriter()
	must(t, w.AddTensor("big", kernels.F32, []uint64{size / 4}, data))
	must(t, w.WriteFile(path))
	f, err := Open(path)
	must(t, err)
	defer f.Close()
	ti, _ := f.Tensor("big")
	touched := rssFile(t)
	if !bytes.Equal(f.TensorData(ti), data) {
		t.Fatal("the tensor reads back wrong")
	}
	touched = rssFile(t) - touched
	before := rssFile(t)
	f.ReleasePages()
	released := before - rssFile(t)
	if touched < size/2 || released < size/2 {
		t.Fatalf("reading the tensor made %d MiB resident, releasing dropped %d MiB; want about 32 each", touched>>20, released>>20)
	}
	if !bytes.Equal(f.TensorData(ti), data) {
		t.Fatal("the tensor reads back wrong after its pages were released")
	}
}

// TestReleaseRange drops the pages of one tensor of three: the resident
// memory falls by about its size, and every tensor still reads back as
// written.
func TestReleaseRange(t *testing.T) {
	const size = 16 << 20
	tensors := map[string][]byte{"a": make([]byte, 4096+68), "big": make([]byte, size), "c": make([]byte, 100)}
	w := NewWriter()
	for _, name := range []string{"a", "big", "c"} {
		data := tensors[name]
		for i := range data {
			data[i] = byte(i*13 + len(name))
		}
		must(t, w.AddTensor(name, kernels.F32, []uint64{uint64(len(data) / 4)}, data))
	}
	path := filepath.Join(t.TempDir(), "three.gguf")
	must(t, w.WriteFile(path))
	f, err := Open(path)
	must(t, err)
	defer f.Close()
	read := func() {
		for name, want := range tensors {
			ti, _ := f.Tensor(name)
			if !bytes.Equal(f.TensorData(ti), want) {
				t.Fatalf("tensor %s reads back wrong", name)
			}
		}
	}
	read()
	big, _ := f.Tensor("big")
	before := rssFile(t)
	f.ReleaseRange(f.TensorData(big))
	if released := before - rssFile(t); released < size*3/4 || released > size+(64<<10) {
		t.Fatalf("releasing a %d MiB tensor dropped %d KiB", size>>20, released>>10)
	}
	f.ReleaseRange(make([]byte, 8192)) // not the file's: ignored
	read()
}
