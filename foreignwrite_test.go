package relock_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/relock-go/relock"
	"github.com/relock-go/relock/internal/redistest"
	"github.com/relock-go/relock/internal/redistest/relocktest"
)

// The tests in this file hold the lease-truth rule against writes to a lock's key that no
// relock call made (another program, an operator): once Redis lets another owner in, the
// first hold's context ends with ErrLeaseLost, within a renewal round or two.

// A renewed hold whose hash another writer gave a "mode" it does not have (a write hold's
// mode set to read, a plain lock's hash given a read mode) lets a reader of another owner
// in: the first hold's context must then end with ErrLeaseLost, within a renewal round or
// two, and not live on beside the reader while renewals go on answering "held".
func TestHoldEndsWhenAModeLetsAReaderIn(t *testing.T) {
	t.Parallel()
	const lease = 1500 * time.Millisecond // the watchdog's: a round every 500ms
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		for _, k := range []holdKind{kindWrite, kindRLock, kindFair, kindSpin} {
			t.Run(k.name, func(t *testing.T) {
				c := relocktest.New(t, b, relock.WithWatchdogTimeout(lease))
				other := relocktest.New(t, b)
				side := b.Client(t)
				n := "foreign-mode:" + k.name
				held, err := k.lock(c, redistest.Context(t, time.Minute), n, 0)
				if err != nil {
					t.Fatal(err)
				}
				redistest.MustDo(t, side, "HSET", n, "mode", "read")
				r, err := kindRead.lock(other, relock.NewOwner(redistest.Context(t, time.Minute)), n, time.Minute)
				if err != nil {
					// The reader was kept out: the hold still excludes others.
					t.Logf("the reader of another owner was refused: %v", err)
					return
				}
				defer func() { _ = kindRead.unlock(other, r, n) }()
				// Room for a loaded machine: two leases, six renewal rounds.
				select {
				case <-held.Done():
				case <-time.After(2 * lease):
					t.Fatalf("a reader of another owner holds %s, and the %s hold's context is live %v later; want it ended with ErrLeaseLost", n, k.name, 2*lease)
				}
				if cause := context.Cause(held); !errors.Is(cause, relock.ErrLeaseLost) {
					t.Fatalf("the %s hold ended with %v; want ErrLeaseLost", k.name, cause)
				}
			})
		}
	})
}
