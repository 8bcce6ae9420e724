package native

import (
	"unsafe"

	"golang.org/x/sys/unix"
)

// offHeapBytes returns n zeroed bytes for a copy of weights and the
// function that frees them. From a huge page up they are an anonymous
// mapping outside the Go heap, so that the collector's heap goal (twice
// what is live) does not grow by the weights and let as much short-lived
// garbage pile up in a long-running server; the mapping starts on a huge
// page and the kernel is asked to back it with transparent huge pages
// (MADV_HUGEPAGE, which counts where the system's setting is "madvise", as
// it commonly is). Decode streams the copies once per token: on 4 KiB pages
// each 4 KiB costs a TLB miss and a page walk, on 2 MiB pages one in 512
// does. The advice is a hint; a kernel that declines it leaves ordinary
// pages. The pages are untouched until written, so the first write faults
// them in. Where the mapping fails, the bytes come from the heap.
func offHeapBytes(n int) ([]byte, func()) {
	if n < hugePage {
		return make([]byte, n), func() {}
	}
	m, err := unix.Mmap(-1, 0, n+hugePage, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	if err != nil {
		return make([]byte, n), func() {}
	}
	skip := (hugePage - int(uintptr(unsafe.Pointer(&m[0]))%hugePage)) % hugePage
	b := m[skip : skip+n : skip+n]
	_ = unix.Madvise(b[:n/hugePage*hugePage], unix.MADV_HUGEPAGE)
	return b, func() { _ = unix.Munmap(m) }
}
