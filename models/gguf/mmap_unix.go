//go:build unix

package gguf

import (
	"os"

	"golang.org/x/sys/unix"
)

// mapFile maps the whole file read-only; where mmap fails (some file
// systems) it falls back to reading the file into memory. mapped says
// which.
func mapFile(fh *os.File, size int64) (b []byte, unmap func() error, mapped bool, err error) {
	if int64(int(size)) != size {
		return nil, nil, false, os.ErrInvalid
	}
	b, err = unix.Mmap(int(fh.Fd()), 0, int(size), unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		b, unmap, err = readFile(fh, size)
		return b, unmap, false, err
	}
	return b, func() error { return unix.Munmap(b) }, true, nil
}

// adviseDontNeed drops the pages of a mapping from the process's resident
// memory; they stay in the page cache and come back when touched. It is
// only a hint: errors are ignored.
func adviseDontNeed(b []byte) {
	if len(b) > 0 {
		_ = unix.Madvise(b, unix.MADV_DONTNEED)
	}
}

// adviseWillNeed asks the kernel to start reading the tensor data ahead of
// the first forward pass. It is only a hint: errors are ignored.
func adviseWillNeed(b []byte) {
	if len(b) == 0 {
		return
	}
	// madvise wants a page-aligned start: widen to the page.
	page := os.Getpagesize()
	base := unsafeAddr(b)
	skip := int(base % uintptr(page))
	full := unsafeSliceBack(b, skip)
	_ = unix.Madvise(full, unix.MADV_WILLNEED)
}
