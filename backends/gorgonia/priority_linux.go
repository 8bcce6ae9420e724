package gorgonia

import "golang.org/x/sys/unix"

// lowerPriority gives the calling thread the lowest scheduling priority
// (nice 19), so that serving threads take the CPU first when both want it.
// Failure only loses that.
func lowerPriority() {
	unix.Setpriority(unix.PRIO_PROCESS, unix.Gettid(), 19)
}
