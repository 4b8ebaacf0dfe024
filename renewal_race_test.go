package relock_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/relock-go/relock"
	"github.com/relock-go/relock/internal/redistest"
	"github.com/relock-go/relock/internal/redistest/relocktest"
)

// A hold that its holder releases ends as released, never as lost, even when a renewal
// round is in flight as the release runs: the round finds the hold gone from Redis, but
// the release, not the renewal, says how it ended. Its context's cause is
// context.Canceled, the watchdog counts no loss, and no loss is logged or observed.
//
// A short lease makes renewal rounds frequent, and many holders make releases fall inside
// them: the workers cycle until twenty rounds have run, of which some hold releases
// (dropping the releasing check made 2 to 25 holds count lost), which takes about 10s
// however loaded the machine. The lease leaves a round a second to land late on a loaded
// machine (one with 0.6s, and a round every 0.2s, lost holds for real). It runs on
// redis-server alone, whose replies take real time.
func TestReleaseDuringRenewalIsNotALoss(t *testing.T) {
	t.Parallel()
	redistest.Real(t, func(t *testing.T, b *redistest.Backend) {
		rec := &recorder{}
		c := relocktest.New(t, b, relock.WithWatchdogTimeout(1500*time.Millisecond), relock.WithObserver(rec))
		const workers, cycles, rounds = 32, 4000, 20
		var releases atomic.Int64

		cycleWorkers(t, c, "race", workers, cycles, func(name string, i int) error {
			if c.WatchdogStats().Ticks >= rounds {
				return nil // enough rounds: the rest of the cycles are done
			}
			held, release, err := takeHold(c, i%holdTurns, name)
			if err != nil {
				return err
			}
			// Held for 0 to 3ms, so that releases fall all over the renewal period.
			time.Sleep(time.Duration(i*7919%4) * time.Millisecond)
			if err := release(held); err != nil {
				return fmt.Errorf("release: %w", err)
			}
			if cause := context.Cause(held); cause != context.Canceled {
				return fmt.Errorf("after its release the hold's context has cause %v; want context.Canceled", cause)
			}
			releases.Add(1)
			return nil
		})
		st := c.WatchdogStats()
		t.Logf("%d releases over %d renewal rounds", releases.Load(), st.Ticks)
		if lost := len(rec.snapshot().lost); st.Lost != 0 || lost != 0 {
			t.Errorf("%d holds counted lost, %d observed lost; want none: every one was released by its holder", st.Lost, lost)
		}
	})
}
