package sona

import (
	"time"

	"golang.org/x/sys/unix"
)

// threadCPUTime is the CPU time the calling thread has used: of a
// goroutine locked to its thread, the time it ran, without the time other
// processes held the CPU.
func threadCPUTime() time.Duration {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_THREAD_CPUTIME_ID, &ts); err != nil {
		return 0
	}
	return time.Duration(ts.Nano())
}
