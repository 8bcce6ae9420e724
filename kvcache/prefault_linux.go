package kvcache

import (
	"unsafe"

	"golang.org/x/sys/unix"
)

// prefault asks the kernel to back a new pool array with transparent huge
// pages and to fault it in now. Blocks are handed out in every decode step,
// and without this the first write to each 4 KiB page of a fresh block
// faults on the engine's thread while the other workers wait; with it the
// pool is resident from its creation, as llama.cpp's KV buffer is, and
// attention walks it with fewer TLB misses. Both are hints: a kernel that
// declines them leaves the pool as the Go heap made it.
func prefault[T byte | uint16 | float32](s []T) {
	if len(s) == 0 {
		return
	}
	b := unsafe.Slice((*byte)(unsafe.Pointer(&s[0])), len(s)*int(unsafe.Sizeof(s[0])))
	// madvise needs a page-aligned start; the heap's pages are 8 KiB, so
	// only a sliver at each end may be left out.
	page := uintptr(unix.Getpagesize())
	start := (page - uintptr(unsafe.Pointer(&b[0]))%page) % page
	if start >= uintptr(len(b)) {
		return
	}
	b = b[start:]
	b = b[:uintptr(len(b))/page*page]
	if len(b) == 0 {
		return
	}
	_ = unix.Madvise(b, unix.MADV_HUGEPAGE)
	_ = unix.Madvise(b, unix.MADV_POPULATE_WRITE)
}
