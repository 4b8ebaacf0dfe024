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

// WithSyncReplicas with the only replica paused, for every lock kind besides the plain
// lock's Lock (rlock's own test): the fair lock, both sides of the read-write lock, the
// spin lock, a multilock, TryLock and Do. No replica can confirm the acquisition: each
// call fails with ErrNotSynced as a *relock.Error naming the lock (a multilock's first
// member), and the rollback leaves no key behind: no hold, no queue entry, no reader's
// timeout key. Guards each kind's undo of an unconfirmed grant, which releases through
// that kind's own script. A semaphore's permits, which are not waited for, are taken all
// the same.
func TestSyncReplicasEveryKindRollsBack(t *testing.T) {
	redistest.Real(t, func(t *testing.T, b *redistest.Backend) {
		_, port, _ := strings.Cut(b.Addr, ":")
		replica := redistest.StartServer(t, "--replicaof", "127.0.0.1", port)
		side := b.Client(t)
		redistest.Eventually(t, 10*time.Second, "replica not in sync", func() bool {
			info, _ := redistest.Do(t, side, "INFO", "replication").ToString()
			return strings.Contains(info, "connected_slaves:1") && strings.Contains(info, "state=online")
		})
		c := relocktest.New(t, b, relock.WithSyncReplicas(1, 200*time.Millisecond))
		ctx := redistest.Context(t, time.Minute)
		replica.Pause(t)
		defer replica.Resume(t)
		for _, k := range []struct {
			name string
			call func() error
		}{
			{"sync-fair", func() error { _, err := c.FairLock("sync-fair").Lock(ctx); return err }},
			{"sync-w", func() error { _, err := c.RWLock("sync-w").Lock(ctx); return err }},
			{"sync-r", func() error { _, err := c.RWLock("sync-r").RLock(ctx); return err }},
			{"sync-spin", func() error { _, err := c.SpinLock("sync-spin").Lock(ctx); return err }},
			{"sync-m1", func() error {
				_, err := c.MultiLock(relock.Member(c.Lock("sync-m1")), relock.Member(c.Lock("sync-m2"))).Lock(ctx)
				return err
			}},
			{"sync-try", func() error { _, err := c.Lock("sync-try").TryLock(ctx); return err }},
			{"sync-do", func() error { return c.Lock("sync-do").Do(ctx, func(context.Context) error { return nil }) }},
		} {
			err := k.call()
			var le *relock.Error
			if !errors.Is(err, relock.ErrNotSynced) || !errors.As(err, &le) || le.Name != k.name {
				t.Errorf("%s with the replica paused: %v; want ErrNotSynced naming the lock", k.name, err)
			}
			if keys, err := redistest.Do(t, side, "KEYS", "*").AsStrSlice(); err != nil || len(keys) != 0 {
				t.Fatalf("%s: keys left after the rollback: %q, %v", k.name, keys, err)
			}
		}
		// A semaphore's permits are not waited for (WithSyncReplicas's doc, as in
		// Redisson): they are taken with the replica paused.
		sem := c.Semaphore("sync-sem")
		if ok, err := sem.TrySetPermits(ctx, 2); !ok || err != nil {
			t.Fatalf("TrySetPermits: %v, %v", ok, err)
		}
		if err := sem.Acquire(ctx, 1); err != nil {
			t.Errorf("Acquire of a permit with the replica paused: %v", err)
		}
		if lease, err := sem.AcquireLease(ctx, 1); err != nil {
			t.Errorf("AcquireLease with the replica paused: %v", err)
		} else if err := sem.ReleaseLease(lease); err != nil {
			t.Errorf("ReleaseLease: %v", err)
		}
	})
}
