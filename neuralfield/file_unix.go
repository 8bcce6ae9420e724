//go:build unix

package neuralfield

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// lockDir takes the store's lock file, or fails with ErrInUse.
func lockDir(dir string) (*os.File, error) {
	f, err := os.OpenFile(filepath.Join(dir, "lock"), os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("neuralfield: %w", err)
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, unix.EWOULDBLOCK) {
			return nil, fmt.Errorf("%w: %s", ErrInUse, dir)
		}
		return nil, fmt.Errorf("neuralfield: lock %s: %w", dir, err)
	}
	return f, nil
}

func unlockDir(f *os.File) {
	_ = unix.Flock(int(f.Fd()), unix.LOCK_UN)
	f.Close()
}

// openSegment opens (or makes) segment file number n of geometry g and maps
// it. A file of another size or with a header that is not this segment's
// is remade empty: its pages were written for another geometry.
func openSegment(path string, g geometry, n uint32) (segment, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return segment{}, fmt.Errorf("neuralfield: %w", err)
	}
	fail := func(err error) (segment, error) {
		f.Close()
		return segment{}, fmt.Errorf("neuralfield: %s: %w", path, err)
	}
	st, err := f.Stat()
	if err != nil {
		return fail(err)
	}
	want := header{pageStride: uint32(g.pageStride), slots: uint32(g.slots), segment: n}
	fresh := st.Size() != g.fileBytes()
	if fresh {
		// Cut to nothing first, so that no byte of the old file survives
		// in the new geometry; then the full size, sparse.
		if err := f.Truncate(0); err != nil {
			return fail(err)
		}
		if err := f.Truncate(g.fileBytes()); err != nil {
			return fail(err)
		}
	}
	data, err := unix.Mmap(int(f.Fd()), 0, int(g.fileBytes()), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		return fail(err)
	}
	seg := segment{f: f, data: data}
	err = faultSafe(func() {
		if h, ok := parseHeader(data); !fresh && ok && h == want {
			return
		}
		// Not this segment: every entry goes, then the header is written.
		clear(data[:g.pagesAt()])
		want.put(data)
	})
	if err != nil {
		unix.Munmap(data)
		return fail(err)
	}
	return seg, nil
}

func unmapFile(b []byte) error {
	if b == nil {
		return nil
	}
	return unix.Munmap(b)
}

// adviseWillNeed asks the kernel to read b's pages ahead; a hint.
func adviseWillNeed(b []byte) {
	page := uintptr(unix.Getpagesize())
	if len(b) == 0 {
		return
	}
	// madvise needs a page-aligned start: the pages lie at aligned offsets
	// of an aligned mapping, so b starts on a page.
	_ = unix.Madvise(b[:(uintptr(len(b))+page-1)/page*page], unix.MADV_WILLNEED)
}
