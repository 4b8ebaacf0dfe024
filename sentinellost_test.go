package relock_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/relock-go/relock"
	"github.com/relock-go/relock/internal/redistest"
	"github.com/relock-go/relock/internal/redistest/relocktest"
)

// A Sentinel failover to a replica that lacks the holds (as replication lag loses them):
// every kind's hold, renewed by the watchdog, ends with ErrLeaseLost once its renewal on
// the new master finds it gone, within a lease of the failover; another owner then takes
// the lock, and the first owner's release fails with ErrNotHeld, naming the lock. The
// replica loses the holds by a FLUSHALL of its own (it accepts writes, and the master is
// dead, so nothing replicates it back). Guards against renewals that keep going to the
// dead master, or read its absence as an outage that keeps the holds, and against a hold
// that stays live on a new master that never had it.
func TestSentinelFailoverLosingHoldsEndsThem(t *testing.T) {
	s := redistest.StartSentinel(t)
	const wd = 3 * time.Second
	c := relocktest.On(t, s.Client(t), relock.WithWatchdogTimeout(wd))
	other := relocktest.On(t, s.Client(t))
	ctx := redistest.Context(t, 3*time.Minute)
	if ok, err := c.Semaphore("lost-sem").TrySetPermits(ctx, 1); err != nil || !ok {
		t.Fatal(ok, err)
	}
	type hold struct {
		name   string // the lock's, or the multilock's first member's
		held   context.Context
		unlock func(context.Context) error
		take   func() error
	}
	var holds []hold
	add := func(name string, held context.Context, err error, unlock func(context.Context) error, take func() error) {
		t.Helper()
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		holds = append(holds, hold{name, held, unlock, take})
	}
	h, err := c.Lock("lost-rlock").Lock(ctx)
	add("lost-rlock", h, err, c.Lock("lost-rlock").Unlock, func() error {
		h, err := other.Lock("lost-rlock").TryLock(ctx)
		if err == nil {
			err = other.Lock("lost-rlock").Unlock(h)
		}
		return err
	})
	h, err = c.FairLock("lost-fair").Lock(ctx)
	add("lost-fair", h, err, c.FairLock("lost-fair").Unlock, func() error {
		h, err := other.FairLock("lost-fair").TryLock(ctx)
		if err == nil {
			err = other.FairLock("lost-fair").Unlock(h)
		}
		return err
	})
	h, err = c.RWLock("lost-w").Lock(ctx)
	add("lost-w", h, err, c.RWLock("lost-w").Unlock, func() error {
		h, err := other.RWLock("lost-w").TryLock(ctx)
		if err == nil {
			err = other.RWLock("lost-w").Unlock(h)
		}
		return err
	})
	h, err = c.RWLock("lost-r").RLock(ctx)
	add("lost-r", h, err, c.RWLock("lost-r").RUnlock, func() error {
		h, err := other.RWLock("lost-r").TryLock(ctx)
		if err == nil {
			err = other.RWLock("lost-r").Unlock(h)
		}
		return err
	})
	h, err = c.Semaphore("lost-sem").AcquireLease(ctx, 1)
	add("lost-sem", h, err, c.Semaphore("lost-sem").ReleaseLease, func() error {
		h, ok, err := other.Semaphore("lost-sem").TryAcquireLease(ctx, 1)
		if err == nil && !ok {
			err = errors.New("no permit")
		}
		if err == nil {
			err = other.Semaphore("lost-sem").ReleaseLease(h)
		}
		return err
	})
	ml := c.MultiLock(relock.Member(c.Lock("lost-m1")), relock.Member(c.Lock("lost-m2")))
	h, err = ml.Lock(ctx)
	add("lost-m1", h, err, ml.Unlock, func() error {
		h, err := other.Lock("lost-m2").TryLock(ctx)
		if err == nil {
			err = other.Lock("lost-m2").Unlock(h)
		}
		return err
	})

	old := s.Master()
	replica := s.Replica()
	redistest.Eventually(t, 10*time.Second, "the replica does not have the holds", func() bool {
		n, _ := replica.Do(t, "EXISTS", "lost-rlock", "lost-fair", "lost-w", "lost-r", "lost-m1", "lost-m2").AsInt64()
		return n == 6
	})
	if err := replica.Do(t, "CONFIG", "SET", "replica-read-only", "no").Error(); err != nil {
		t.Fatal(err)
	}
	old.Kill(t)
	// The replica never got the holds: as if they were lost in the replication lag.
	if err := replica.Do(t, "FLUSHALL").Error(); err != nil {
		t.Fatal(err)
	}
	// The semaphore's count comes back, as an operator would restore it: only its lease
	// is lost.
	if err := replica.Do(t, "SET", "lost-sem", "1").Error(); err != nil {
		t.Fatal(err)
	}
	s.WaitFailover(t, old, 30*time.Second)
	// The renewals come every second; the lease leaves room for the client to find the new
	// master.
	deadline := time.After(wd)
	for _, h := range holds {
		select {
		case <-h.held.Done():
			if !errors.Is(context.Cause(h.held), relock.ErrLeaseLost) {
				t.Errorf("%s: the lost hold's context ended with %v; want ErrLeaseLost", h.name, context.Cause(h.held))
			}
		case <-deadline:
			t.Fatalf("%s: the hold is gone on the new master but its context is live a lease after the failover", h.name)
		}
		if err := h.take(); err != nil {
			t.Errorf("%s: another owner after the loss: %v", h.name, err)
		}
		err := h.unlock(h.held)
		if !errors.Is(err, relock.ErrNotHeld) || !strings.Contains(err.Error(), `"`+h.name+`"`) {
			t.Errorf("%s: release after the loss: %v; want ErrNotHeld naming the lock", h.name, err)
		}
	}
}
