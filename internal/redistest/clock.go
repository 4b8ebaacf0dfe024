package redistest

import (
	"sync"
	"testing"
	"time"
)

// ClockAhead makes the miniredis of b keep a clock that runs fast by rate (1.01: a
// hundredth fast) from now until t's cleanup, as a server whose clock gains on the
// client's does: its TTLs, TIME and expiries follow that clock. It is set every
// millisecond; between settings the clock stands still, so it is never ahead of
// rate, only behind by up to a millisecond.
func ClockAhead(t testing.TB, b *Backend, rate float64) {
	t.Helper()
	if b.Mini == nil {
		t.Fatalf("redistest: ClockAhead needs miniredis, not %s", b.Name)
	}
	m := b.Mini
	start := time.Now()
	at := func() time.Time { return start.Add(time.Duration(float64(time.Since(start)) * rate)) }
	m.SetTime(at())
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		tick := time.NewTicker(time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
				m.SetTime(at())
			}
		}
	}()
	t.Cleanup(func() { close(stop); wg.Wait() })
}
