//go:build !unix

package kernels

import "time"

var start = time.Now()

// threadCPU falls back to the wall clock where there is no thread CPU
// clock.
func threadCPU() time.Duration { return time.Since(start) }
