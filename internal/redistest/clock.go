package redistest

import (
	"sync"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2/server"
)

// ClockAhead makes the miniredis of b keep a clock that runs fast by rate (1.01: a
// hundredth fast) from now until t's cleanup, as a server whose clock gains on the
// client's does: its TTLs, TIME and expiries follow that clock.
//
// The clock is set as each command arrives, so that the command's TTLs are counted from
// the rate's time and not from a clock left behind by a starved setter: a TTL set on a
// clock that is behind runs out early by as much, once the clock catches up. A command
// that arrives while another holds miniredis (a command inside a script, or one that
// queues behind a script) keeps the clock it finds, and a setter every millisecond moves
// the clock between commands. The clock only moves forward: miniredis counts a clock set
// back and then forward again twice against every TTL. So it is never ahead of rate, and
// behind it only by the time a command waits for miniredis.
func ClockAhead(t testing.TB, b *Backend, rate float64) {
	t.Helper()
	if b.Mini == nil {
		t.Fatalf("redistest: ClockAhead needs miniredis, not %s", b.Name)
	}
	m := b.Mini
	start := time.Now()
	var (
		mu   sync.Mutex // orders the settings, so that each is later than the last
		last time.Time
	)
	now := func() time.Time { return start.Add(time.Duration(float64(time.Since(start)) * rate)) }
	set := func() {
		mu.Lock()
		defer mu.Unlock()
		// A setter held up between reading the time and setting it (a loaded machine) sets
		// a time already past: it sets it again, a few times at most.
		for range 3 {
			at := now()
			if !at.After(last) {
				return
			}
			m.SetTime(at)
			last = at
			if now().Sub(at) < time.Millisecond {
				return
			}
		}
	}
	set()
	m.Server().SetPreHook(func(*server.Peer, string, ...string) bool {
		// A command dispatched by a script runs with miniredis held by the script's own
		// goroutine: setting the clock there would wait for itself.
		if !m.TryLock() {
			return false
		}
		m.Unlock()
		set()
		return false
	})
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
				set()
			}
		}
	}()
	t.Cleanup(func() { m.Server().SetPreHook(nil); close(stop); wg.Wait() })
}
