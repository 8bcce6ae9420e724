package native

import (
	"unsafe"

	"golang.org/x/sys/unix"
)

// hugePageBytes returns n zeroed bytes that start on a huge-page boundary
// and that the kernel is asked to back with transparent huge pages
// (MADV_HUGEPAGE, which counts where the system's setting is "madvise",
// as it commonly is). Decode streams the interleaved weights once per
// token: on 4 KiB pages each 4 KiB costs a TLB miss and a page walk, on
// 2 MiB pages one in 512 does. The advice is a hint; a kernel that
// declines it leaves ordinary pages. The bytes are untouched Go heap
// memory until written, so the first write faults the huge pages in.
func hugePageBytes(n int) []byte {
	if n < hugePage {
		return make([]byte, n)
	}
	b := make([]byte, n+hugePage)
	skip := (hugePage - int(uintptr(unsafe.Pointer(&b[0]))%hugePage)) % hugePage
	b = b[skip : skip+n : skip+n]
	_ = unix.Madvise(b[:n/hugePage*hugePage], unix.MADV_HUGEPAGE)
	return b
}
