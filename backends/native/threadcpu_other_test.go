//go:build !unix

package native

import "time"

var threadStart = time.Now()

// threadCPU falls back to the wall clock where there is no thread CPU
// clock.
func threadCPU() time.Duration { return time.Since(threadStart) }
