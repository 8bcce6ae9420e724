package sparse

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"

	"github.com/ruvllm/ruvllm/kernels"
)

// lastLevelCache is the size in bytes of the first CPU's last-level cache,
// as Linux reports it in sysfs, read on the first product that asks; 0
// where it says nothing (other systems), which leaves every choice that
// depends on it to the memory-bound one.
var lastLevelCache = sync.OnceValue(func() int64 { return cacheSize("/sys/devices/system/cpu/cpu0/cache") })

// cacheSize reads the size of the highest-level cache listed under dir
// (index*/level and index*/size); 0 when there is none.
func cacheSize(dir string) int64 {
	entries, _ := filepath.Glob(filepath.Join(dir, "index*"))
	best, size := 0, int64(0)
	for _, e := range entries {
		level, err := strconv.Atoi(readTrimmed(filepath.Join(e, "level")))
		if err != nil || level < best {
			continue
		}
		if n := sysfsSize(readTrimmed(filepath.Join(e, "size"))); n > 0 {
			best, size = level, n
		}
	}
	return size
}

func readTrimmed(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}

// sysfsSize reads a cache size as sysfs writes it, "32768K" (or a plain
// number of bytes); 0 for anything else.
func sysfsSize(s string) int64 {
	mult := int64(1)
	if k, ok := strings.CutSuffix(s, "K"); ok {
		mult, s = 1<<10, k
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n <= 0 {
		return 0
	}
	return n * mult
}

// perTokenInCache reports whether every token of a product over m, with a
// fraction on of the inputs on, takes the sparse mat-vec whatever their
// number: a Q8_0 matrix that fits in the last-level cache (so that the
// tokens after the first read it from there), with at most 55% of its
// inputs on. On tinyllama's shape a 128-token prompt, every token forced
// through the sparse mat-vec, ran at 1.03–1.10x the dense file's speed at
// sparsity 0.5 (0.93–0.97x packing the rows back) and at 0.85–1.02x at 0.4
// (0.86–0.95x packed): 55% lies between the gain and the break-even. With
// gate and up stacked (24.5 MB in a 32 MB cache) the prompt ran at 1.23x
// dense's speed on one thread and 0.96–1.14x on two taking the mat-vecs,
// 1.03–1.04x and 0.91–1.04x packing the stack (a rule of half the cache,
// as before): the whole cache it is. Q4_0's sparse mat-vec, slower per
// weight, ran at 0.65–0.94x at 0.5, and is packed.
func perTokenInCache(m *Matrix, on float64) bool {
	return m.Type == kernels.Q8_0 && on <= 0.55 && int64(len(m.Data)) <= lastLevelCache()
}
