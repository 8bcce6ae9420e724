//go:build !linux

package sona

import "time"

// threadCPUTime is not measured off Linux.
func threadCPUTime() time.Duration { return 0 }
