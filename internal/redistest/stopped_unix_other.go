//go:build unix && !linux

package redistest

// waitStopped cannot observe the process state portably, so Pause returns
// as soon as the signal is sent.
func waitStopped(int) error { return nil }
