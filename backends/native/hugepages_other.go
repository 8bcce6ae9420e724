//go:build !linux

package native

// offHeapBytes returns n zeroed bytes and a function that frees them: a
// mapping outside the heap, on huge pages, is asked for only on Linux
// (hugepages_linux.go).
func offHeapBytes(n int) ([]byte, func()) { return make([]byte, n), func() {} }
