//go:build !linux

package kvcache

// prefault is a no-op where madvise's populate and huge-page hints are not
// available: pages fault in on first use.
func prefault[T byte | uint16 | float32](s []T) {}
