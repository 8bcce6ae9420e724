package gguf

import (
	"io"
	"os"
	"unsafe"
)

// readFile is the fallback where mapping is not available: the file is read
// into memory once.
func readFile(fh *os.File, size int64) ([]byte, func() error, error) {
	b := make([]byte, size)
	if _, err := io.ReadFull(io.NewSectionReader(fh, 0, size), b); err != nil {
		return nil, nil, err
	}
	return b, func() error { return nil }, nil
}

func unsafeAddr(b []byte) uintptr { return uintptr(unsafe.Pointer(unsafe.SliceData(b))) }

// unsafeSliceBack extends b backwards by n bytes that belong to the same
// mapping (the start of its page).
func unsafeSliceBack(b []byte, n int) []byte {
	p := unsafe.Add(unsafe.Pointer(unsafe.SliceData(b)), -n)
	return unsafe.Slice((*byte)(p), len(b)+n)
}
