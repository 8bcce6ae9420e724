//go:build !unix

package gguf

import "os"

func mapFile(fh *os.File, size int64) ([]byte, func() error, bool, error) {
	b, unmap, err := readFile(fh, size)
	return b, unmap, false, err
}

func adviseWillNeed([]byte) {}

func adviseDontNeed([]byte) {}
