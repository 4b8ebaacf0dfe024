package redistest

import (
	"context"
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

// Context returns a context that ends after d, and at t's cleanup at the latest. Tests
// pass it to every call that may wait for a lock or a permit, so that a bug that keeps
// the wait from ending fails the test instead of hanging it until the test binary's
// timeout. d is a guard against a hang, never a measure of speed: give it room for a
// loaded machine. The context of a hold taken with it ends with it (the hold in Redis
// stays until Unlock): a hold whose context must outlive d bounds its wait with
// rlock.WithWaitTimeout instead.
func Context(t testing.TB, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), d)
	t.Cleanup(cancel)
	return ctx
}
