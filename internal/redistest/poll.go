package redistest

import (
	"testing"
	"time"
)

// pollEvery is how often Eventually checks its condition: often enough that a test
// does not sit idle long once the condition holds, rarely enough to leave the machine
// to the code under test.
const pollEvery = 5 * time.Millisecond

// Eventually checks cond every few milliseconds until it holds, and fails t, saying
// what did not happen, if it still does not hold after d. Tests wait for a state of
// the system under test (a waiter parked, a key gone) through it rather than with a
// fixed sleep, so that a slow machine makes them slower, not wrong. Call it from the
// test's goroutine only.
func Eventually(t testing.TB, d time.Duration, what string, cond func() bool) {
	t.Helper()
	if !Await(d, cond) {
		t.Fatalf("after %v: %s", d, what)
	}
}

// Await checks cond every few milliseconds until it holds, for at most d, and reports
// whether it held: Eventually for an example, which has no testing.TB.
func Await(d time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(pollEvery)
	}
	return true
}
