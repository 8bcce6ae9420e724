package native

import (
	"fmt"
	"runtime"
	"testing"
	"unsafe"
)

// TestHugePageBytes checks the arena of the packed weights: n zeroed bytes,
// no more (a write past them would land in the slack), starting on a huge
// page on Linux when n spans one.
func TestHugePageBytes(t *testing.T) {
	for _, n := range []int{1, 4096, hugePage - 1, hugePage, 3*hugePage + 12345} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			b := hugePageBytes(n)
			if len(b) != n || cap(b) != n {
				t.Fatalf("len %d cap %d, want %d", len(b), cap(b), n)
			}
			for i, v := range b {
				if v != 0 {
					t.Fatalf("byte %d is %d", i, v)
				}
			}
			at := uintptr(unsafe.Pointer(&b[0])) % hugePage
			if runtime.GOOS == "linux" && n >= hugePage && at != 0 {
				t.Errorf("starts %d bytes into a huge page", at)
			}
			b[n-1] = 1 // the whole length is writable
		})
	}
}
