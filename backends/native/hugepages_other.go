//go:build !linux

package native

// hugePageBytes returns n zeroed bytes: huge pages are asked for only on
// Linux (hugepages_linux.go).
func hugePageBytes(n int) []byte { return make([]byte, n) }
