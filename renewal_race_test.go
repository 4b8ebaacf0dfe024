package relock_test

import (
	"context"
	"fmt"
	"strconv"
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
// them; a round lands well within the lease even on a loaded machine. It runs on
// redis-server alone, whose replies take real time.
func TestReleaseDuringRenewalIsNotALoss(t *testing.T) {
	redistest.Real(t, func(t *testing.T, b *redistest.Backend) {
		rec := &recorder{}
		c := relocktest.New(t, b, relock.WithWatchdogTimeout(600*time.Millisecond), relock.WithObserver(rec))
		ctx := context.Background()
		const workers, cycles = 32, 1000

		kinds := []func(name string) (context.Context, func(context.Context) error, error){
			func(name string) (context.Context, func(context.Context) error, error) {
				mu := c.Lock(name)
				held, err := mu.Lock(ctx)
				return held, mu.Unlock, err
			},
			func(name string) (context.Context, func(context.Context) error, error) {
				mu := c.FairLock(name + ":fair")
				held, err := mu.Lock(ctx)
				return held, mu.Unlock, err
			},
			func(name string) (context.Context, func(context.Context) error, error) {
				rw := c.RWLock(name + ":rw")
				held, err := rw.RLock(ctx)
				return held, rw.RUnlock, err
			},
			func(name string) (context.Context, func(context.Context) error, error) {
				s := c.Semaphore(name + ":sem")
				held, err := s.AcquireLease(ctx, 1)
				return held, s.ReleaseLease, err
			},
		}
		errs := make(chan error, workers)
		for w := range workers {
			go func() {
				name := "race:" + strconv.Itoa(w)
				if ok, err := c.Semaphore(name+":sem").TrySetPermits(ctx, 1); err != nil || !ok {
					errs <- fmt.Errorf("worker %d: TrySetPermits: %v, %v", w, ok, err)
					return
				}
				for i := range cycles {
					held, release, err := kinds[i%len(kinds)](name)
					if err != nil {
						errs <- fmt.Errorf("worker %d, cycle %d: %w", w, i, err)
						return
					}
					// Held for 0 to 3ms, so that releases fall all over the renewal period.
					time.Sleep(time.Duration(i*7919%4) * time.Millisecond)
					if err := release(held); err != nil {
						errs <- fmt.Errorf("worker %d, cycle %d: release: %w", w, i, err)
						return
					}
					if cause := context.Cause(held); cause != context.Canceled {
						errs <- fmt.Errorf("worker %d, cycle %d: after its release the hold's context has cause %v; want context.Canceled", w, i, cause)
						return
					}
				}
				errs <- nil
			}()
		}
		for range workers {
			select {
			case err := <-errs:
				if err != nil {
					t.Error(err)
				}
			case <-time.After(60 * time.Second):
				t.Fatal("the workers did not finish within 60s")
			}
		}
		st := c.WatchdogStats()
		t.Logf("%d releases over %d renewal rounds", workers*cycles, st.Ticks)
		if lost := len(rec.snapshot().lost); st.Lost != 0 || lost != 0 {
			t.Errorf("%d holds counted lost, %d observed lost; want none: every one was released by its holder", st.Lost, lost)
		}
	})
}
