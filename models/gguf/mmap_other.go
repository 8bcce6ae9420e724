//go:build !unix

package gguf

import "os"

func mapFile(fh *os.File, size int64) ([]byte, func() error, error) { return readFile(fh, size) }

func adviseWillNeed([]byte) {}
