//go:build !linux

package gorgonia

// lowerPriority does nothing where threads have no priority of their own
// to set; the trainer's sleeps still bound its share.
func lowerPriority() {}
