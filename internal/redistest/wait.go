package redistest

import (
	"testing"
	"time"
)

// Recv returns the next value received from ch (the zero value once ch is closed), and
// fails t if none comes within d. Tests wait through it rather than with a bare receive,
// so that a bug that keeps the sender from answering fails the test at once instead of
// hanging it until the test binary's timeout. Call it from the test's goroutine only.
func Recv[T any](t testing.TB, ch <-chan T, d time.Duration, what string) T {
	t.Helper()
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case v := <-ch:
		return v
	case <-timer.C:
		t.Fatalf("nothing within %v: %s", d, what)
		panic("unreachable")
	}
}
