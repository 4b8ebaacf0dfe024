package redistest

import (
	"testing"
	"time"
)

// Eventually fails once its bound has passed, and not before, and returns as soon as
// its condition holds. A poll without a bound would hang a test whose condition never
// comes; one that gave up early would fail a test on a slow machine.
func TestEventuallyKeepsItsBound(t *testing.T) {
	const d = 100 * time.Millisecond
	start := time.Now()
	r := runTB(t, func(tb testing.TB) { Eventually(tb, d, "the condition never held", func() bool { return false }) })
	if took := time.Since(start); took < d {
		t.Errorf("Eventually gave up after %v, before its bound of %v", took, d)
	}
	if want := "after 100ms: the condition never held"; r.fatal != want {
		t.Errorf("Eventually failed with %q; want %q", r.fatal, want)
	}

	calls := 0
	r = runTB(t, func(tb testing.TB) {
		Eventually(tb, time.Minute, "the third call", func() bool { calls++; return calls == 3 })
	})
	if r.fatal != "" || calls != 3 {
		t.Errorf("a condition that held at the third call: %d calls, failure %q; want 3 calls and no failure", calls, r.fatal)
	}
}
