package native

import (
	"fmt"
	"runtime"
	"testing"
	"unsafe"
)

// TestOffHeapBytes checks the arena of the packed weights and the stacks:
// n zeroed bytes, no more (a write past them would land in the slack),
// starting on a huge page on Linux when n spans one, and there outside the
// Go heap (the heap does not grow by them).
func TestOffHeapBytes(t *testing.T) {
	for _, n := range []int{1, 4096, hugePage - 1, hugePage, 3*hugePage + 12345, 64 << 20} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			b, free := offHeapBytes(n)
			defer free()
			runtime.ReadMemStats(&after)
			if len(b) != n || cap(b) != n {
				t.Fatalf("len %d cap %d, want %d", len(b), cap(b), n)
			}
			for i, v := range b {
				if v != 0 {
					t.Fatalf("byte %d is %d", i, v)
				}
			}
			at := uintptr(unsafe.Pointer(&b[0])) % hugePage
			if runtime.GOOS == "linux" && n >= hugePage {
				if at != 0 {
					t.Errorf("starts %d bytes into a huge page", at)
				}
				if grew := int64(after.HeapSys) - int64(before.HeapSys); grew >= int64(n) {
					t.Errorf("the heap grew by %d bytes for %d off it", grew, n)
				}
			}
			b[n-1] = 1 // the whole length is writable
		})
	}
}
