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

// WithSyncReplicas on a cluster whose lock's slot moves to another master. WAIT counts the
// replicas that have the writes of its own connection, so it must follow the acquire
// script to the node that runs it. While the slot is open, a free lock's script is
// redirected by ASK to the new master, which refuses it (TRYAGAIN: its keys are not all
// there) until the move ends: Lock fails, naming the lock, when its context ends. After
// the move, a client whose slot map still names the old master is redirected by MOVED:
// with the new master's only replica paused nothing can confirm the acquisition, and Lock
// must fail with ErrNotSynced, naming the lock, and leave it free; with the replica
// running the acquisition is confirmed. Guards against a WAIT answered by the node that
// redirected the script, whose replicas confirm writes that are not the lock's, and
// against the client's panic on the redirection of one command of the pipelined pair.
func TestClusterSyncReplicasFollowSlotMove(t *testing.T) {
	cl := redistest.StartCluster(t)
	c := relocktest.New(t, cl, relock.WithSyncReplicas(1, 300*time.Millisecond), relock.WithTimeout(10*time.Second))
	other := relocktest.New(t, cl)
	name := cl.NamesOnEveryMaster(t, "sync-move-")[0]
	slot := cl.Slot(name)
	to := cl.Masters()[0]
	if to == cl.MasterOf(slot) {
		to = cl.Masters()[1]
	}
	replica := cl.ReplicaOf(to)
	mu := c.Lock(name)

	// With the replica running an acquisition is confirmed. A replica starved of CPU for
	// 300ms (a loaded machine) may miss one deadline; the rollback leaves the lock free,
	// so try a few times.
	lockSynced := func(stage string) {
		t.Helper()
		for try := 1; ; try++ {
			held, err := mu.Lock(redistest.Context(t, time.Minute))
			if err == nil {
				if err := mu.Unlock(held); err != nil {
					t.Fatalf("%s: Unlock: %v", stage, err)
				}
				return
			}
			if !errors.Is(err, relock.ErrNotSynced) || try == 5 {
				t.Fatalf("%s: Lock with the replica running: %v", stage, err)
			}
		}
	}
	lockSynced("before the move") // the client's slot map names the old master

	move := cl.StartSlotMove(t, slot, to)
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	start := time.Now()
	_, err := c.Lock(name).Lock(ctx)
	cancel()
	t.Logf("Lock of a free lock of the open slot: %v after %v", err, time.Since(start).Round(time.Millisecond))
	if err == nil || !strings.Contains(err.Error(), name) {
		t.Fatalf("Lock of a free lock of the open slot: %v; want it to fail, naming %q, when its context ends", err, name)
	}
	move.Finish(t)

	// The client has followed only ASK redirections, which leave its slot map as it was.
	replica.Pause(t)
	held, err := mu.Lock(redistest.Context(t, time.Minute))
	replica.Resume(t)
	if err == nil {
		_ = mu.Unlock(held)
		t.Fatal("Lock confirmed with the only replica of the lock's new master paused; want ErrNotSynced")
	}
	var le *relock.Error
	if !errors.Is(err, relock.ErrNotSynced) || !errors.As(err, &le) || le.Name != name || !strings.Contains(err.Error(), name) {
		t.Fatalf("Lock with the replica paused: %v; want ErrNotSynced naming %q", err, name)
	}
	// The rollback left the lock free: another client takes it at once.
	h, err := other.Lock(name).TryLock(redistest.Context(t, time.Minute))
	if err != nil {
		t.Fatalf("TryLock after the rollback: %v", err)
	}
	if err := other.Lock(name).Unlock(h); err != nil {
		t.Fatal(err)
	}
	lockSynced("after the move")
}
