//go:build !unix

package neuralfield

import (
	"errors"
	"os"
)

var errUnsupported = errors.New("neuralfield: stores need a unix system (mmap, flock)")

func lockDir(dir string) (*os.File, error) { return nil, errUnsupported }

func unlockDir(f *os.File) {}

func openSegment(path string, g geometry, n uint32) (segment, error) {
	return segment{}, errUnsupported
}

func unmapFile(b []byte) error { return nil }

func adviseWillNeed(b []byte) {}
