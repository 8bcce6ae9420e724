package gorgonia

import "golang.org/x/sys/unix"

// lowerPriority puts the calling thread in Linux's SCHED_IDLE class, which
// runs only when no other thread wants the CPU (weaker than any nice
// level), so that serving threads are never held up by the trainer; where
// that is refused, it takes nice 19. Failure only loses that.
func lowerPriority() {
	tid := unix.Gettid()
	attr := unix.SchedAttr{Size: unix.SizeofSchedAttr, Policy: unix.SCHED_IDLE}
	if unix.SchedSetAttr(tid, &attr, 0) != nil {
		unix.Setpriority(unix.PRIO_PROCESS, tid, 19)
	}
}
