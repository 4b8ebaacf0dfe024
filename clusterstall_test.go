package relock_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/relock-go/relock"
	"github.com/relock-go/relock/internal/hub"
	"github.com/relock-go/relock/internal/redistest"
	"github.com/relock-go/relock/internal/redistest/relocktest"
)

// One master of a cluster stops answering (SIGSTOP, as a node stuck or cut off) while
// holds on every master are renewed, the others serve their slots meanwhile
// (cluster-require-full-coverage no), and they have lost their script cache
// (a restart, a failover, SCRIPT FLUSH), so their renewals first meet NOSCRIPT and are
// sent again with EVAL: the holds on the masters that answer are renewed all along, and
// their contexts stay live; only the silent master's hold may end. Guards against a
// renewal round whose resend waits for the silent master's reply to the first send,
// and so runs out of time for every master, ending every hold of the client.
func TestClusterSilentMasterLeavesOtherHoldsRenewed(t *testing.T) {
	cl := startServingCluster(t)
	const lease = 1500 * time.Millisecond // renewed every 500ms
	c := relocktest.New(t, cl, relock.WithWatchdogTimeout(lease))
	names, helds := holdOnEveryMaster(t, c, cl, "silent-")
	for _, m := range cl.Masters() {
		if err := m.Do(t, "SCRIPT", "FLUSH").Error(); err != nil {
			t.Fatal(err)
		}
	}
	silent := cl.MasterOf(cl.Slot(names[0]))
	silent.Pause(t)
	othersStayHeld(t, names, helds, 4*lease, func() { silent.Resume(t) })
	cl.WaitHealthy(t, 30*time.Second)
	unlockOthers(t, c, names, helds)
}

// The client's connection to one master is being dialled again, with no deadline but the
// dial timeout, when the holds' renewal round comes: rueidis's own cluster refresh does
// so, within a second of a connection to a master failing, and a call to that master
// waits for that dial whatever its own context says. The master has stopped answering
// (SIGSTOP), so the dial's handshake waits out its timeout, a minute here. The holds on
// the other masters are renewed all along: a renewal round ends by its own deadline,
// whatever a call to one master is held up by. Guards against a round that waits for
// every master's call to return, which here keeps the watchdog from renewing anything
// for a minute, and so ends every hold of the client. It runs with holds on every master,
// and again with holds on two of them only: a round of two slots' calls is as much a
// round of several as a round of three.
func TestClusterMasterBeingDialledLeavesOtherHoldsRenewed(t *testing.T) {
	cl := startServingCluster(t)
	var d redistest.Dials
	rc := cl.ClientWith(t, d.Tune)
	const lease = 1500 * time.Millisecond // renewed every 500ms
	c := relocktest.On(t, rc, relock.WithWatchdogTimeout(lease))
	for _, masters := range []int{3, 2} {
		prefix := fmt.Sprintf("dialled-%d-", masters)
		names, helds := holdOnEveryMaster(t, c, cl, prefix)
		// The holds beyond the first masters are given up before the master falls silent.
		for i := masters; i < len(names); i++ {
			if err := c.Lock(names[i]).Unlock(helds[i]); err != nil {
				t.Fatal(err)
			}
		}
		names, helds = names[:masters], helds[:masters]
		resume := d.RedialPaused(t, rc, cl.MasterOf(cl.Slot(names[0])))
		othersStayHeld(t, names, helds, 4*lease, resume)
		cl.WaitHealthy(t, 30*time.Second)
		unlockOthers(t, c, names, helds)
	}
}

// startServingCluster starts a cluster whose masters go on serving their slots while one is
// down, as cluster-require-full-coverage no has them do (by default the whole cluster
// answers CLUSTERDOWN until the silent master's replica takes over), and whose replicas
// never take over (the nodes time out after a second): a master paused stays silent for
// the whole test, and no topology change comes in between.
func startServingCluster(t *testing.T) *redistest.Cluster {
	t.Helper()
	cl := redistest.StartCluster(t)
	for _, n := range cl.Nodes() {
		if err := n.Do(t, "CONFIG", "SET", "cluster-require-full-coverage", "no").Error(); err != nil {
			t.Fatal(err)
		}
		if err := n.Do(t, "CONFIG", "SET", "cluster-replica-no-failover", "yes").Error(); err != nil {
			t.Fatal(err)
		}
	}
	return cl
}

// holdOnEveryMaster locks one name on each master of cl, the names starting with prefix,
// and returns the names and their holds' contexts.
func holdOnEveryMaster(t *testing.T, c *relock.Client, cl *redistest.Cluster, prefix string) ([]string, []context.Context) {
	t.Helper()
	names := cl.NamesOnEveryMaster(t, prefix)
	var helds []context.Context
	for _, n := range names {
		h, err := c.Lock(n).Lock(redistest.Context(t, time.Minute))
		if err != nil {
			t.Fatal(err)
		}
		helds = append(helds, h)
	}
	return names, helds
}

// othersStayHeld fails t if any hold but the first (the one on the silent master) ends
// within d; it calls resume then, or before failing.
func othersStayHeld(t *testing.T, names []string, helds []context.Context, d time.Duration, resume func()) {
	t.Helper()
	start := time.Now()
	for time.Since(start) < d {
		for i, h := range helds[1:] {
			if h.Err() != nil {
				resume()
				t.Fatalf("%s, on a master that answers, ended %v after another master fell silent: %v",
					names[i+1], time.Since(start).Round(time.Millisecond), context.Cause(h))
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	resume()
}

// unlockOthers checks that every hold but the first is live, and unlocks it.
func unlockOthers(t *testing.T, c *relock.Client, names []string, helds []context.Context) {
	t.Helper()
	for i, h := range helds[1:] {
		if h.Err() != nil {
			t.Errorf("%s ended: %v", names[i+1], context.Cause(h))
		}
		if err := c.Lock(names[i+1]).Unlock(h); err != nil {
			t.Errorf("Unlock of %s: %v", names[i+1], err)
		}
	}
}

// Close while the client's connection to one master is being dialled again, the master
// silent (as in TestClusterMasterBeingDialledLeavesOtherHoldsRenewed): the holds on the
// masters that answer are released within the client's timeout of Close starting, while
// the release on the silent master waits for the dial, and Close returns once that dial
// ends (the dial timeout bounds it; ten seconds here). Their contexts end with ErrClosed,
// and once the master answers again another client takes every lock. Guards against
// releases that wait for one another, which leave every other master's lock held, and
// renewed, for as long as the dial takes, and then give up on it.
func TestClusterCloseReleasesOtherMastersWhileOneIsBeingDialled(t *testing.T) {
	cl := startServingCluster(t)
	var d redistest.Dials
	rc := cl.ClientWith(t, d.Tune)
	const lease = 1500 * time.Millisecond
	const timeout = time.Second
	c := relocktest.On(t, rc, relock.WithWatchdogTimeout(lease), relock.WithTimeout(timeout))
	names, helds := holdOnEveryMaster(t, c, cl, "closing-")
	resume := d.RedialPaused(t, rc, cl.MasterOf(cl.Slot(names[0])))
	closed := make(chan error, 1)
	start := time.Now()
	go func() { closed <- c.Close() }()
	// The silent master's dial holds its release up, not the others': they are gone well
	// before the dial ends.
	redistest.Eventually(t, timeout+3*time.Second, "the locks on the masters that answer released", func() bool {
		for _, n := range names[1:] {
			// A connection of its own to the name's master: a cluster client may be
			// refreshing its view through the silent master.
			if n, err := cl.MasterOf(cl.Slot(n)).Do(t, "EXISTS", n).AsInt64(); err != nil || n != 0 {
				return false
			}
		}
		return true
	})
	t.Logf("the locks on the masters that answer released %v after Close began", time.Since(start).Round(time.Millisecond))
	err := redistest.Recv(t, closed, time.Minute, "Close while one master is being dialled")
	t.Logf("Close returned %v after %v", err, time.Since(start).Round(time.Millisecond))
	for i, h := range helds[1:] {
		if cause := context.Cause(h); !errors.Is(cause, relock.ErrClosed) {
			t.Errorf("%s, released by Close, ended with %v; want ErrClosed", names[i+1], cause)
		}
	}
	if helds[0].Err() == nil {
		t.Errorf("%s, on the silent master, is live after Close", names[0])
	}
	resume()
	cl.WaitHealthy(t, 30*time.Second)
	other := relocktest.New(t, cl)
	for _, n := range names {
		h, err := other.Lock(n).Lock(redistest.Context(t, 2*lease+10*time.Second))
		if err != nil {
			t.Fatalf("another client's Lock of %s once the master answers again: %v", n, err)
		}
		if err := other.Lock(n).Unlock(h); err != nil {
			t.Fatal(err)
		}
	}
}

// A client's waiter on one master gives up while the client's connection to that master
// is being dialled again, the master silent (as in
// TestClusterMasterBeingDialledLeavesOtherHoldsRenewed): once its channel has lingered, the
// client takes itself out of the lock's wake registry there, a call that waits for the
// dial. A waiter of the same client on another master is woken by its holder's unlock all
// the same, not by the holder's lease (30s) nor when the dial ends (40s). Guards against
// a pub/sub hub whose loop waits for that call, which its time bound does not cut short,
// and so starts no subscription for any other lock meanwhile.
func TestClusterWaiterOnAnotherMasterWokenWhileOneIsBeingDialled(t *testing.T) {
	cl := startServingCluster(t)
	var d redistest.Dials
	rc := cl.ClientWith(t, func(o *rueidis.ClientOption) {
		d.Tune(o)
		o.ConnWriteTimeout = 40 * time.Second // the dial's handshake waits as long
	})
	const lease = 30 * time.Second
	waiting := relocktest.On(t, rc, relock.WithWatchdogTimeout(lease))
	holding := relocktest.New(t, cl, relock.WithWatchdogTimeout(lease))
	names := cl.NamesOnEveryMaster(t, "woken-")
	silent, other := names[0], names[1]
	ctx := redistest.Context(t, 2*time.Minute)
	if _, err := holding.Lock(silent).Lock(ctx); err != nil {
		t.Fatal(err)
	}
	held, err := holding.Lock(other).Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	wctx, giveUp := context.WithCancel(ctx)
	gaveUp := make(chan error, 1)
	go func() { _, err := waiting.Lock(silent).Lock(wctx); gaveUp <- err }()
	redistest.Eventually(t, 10*time.Second, "the waiter on "+silent+" parked", func() bool { return relocktest.Waiting(waiting) == 1 })
	resume := d.RedialPaused(t, rc, cl.MasterOf(cl.Slot(silent)))
	defer resume()
	giveUp()
	redistest.Recv(t, gaveUp, 10*time.Second, "the waiter on "+silent+" giving up")
	time.Sleep(hub.Linger + 500*time.Millisecond) // its channel has lingered: the registry call is under way
	got := make(chan error, 1)
	go func() {
		taken, err := waiting.Lock(other).Lock(ctx)
		if err == nil {
			err = waiting.Lock(other).Unlock(taken)
		}
		got <- err
	}()
	time.Sleep(time.Second)
	unlocked := time.Now()
	if err := holding.Lock(other).Unlock(held); err != nil {
		t.Fatal(err)
	}
	if err := redistest.Recv(t, got, 3*lease, "the waiter on "+other); err != nil {
		t.Fatal(err)
	}
	if took := time.Since(unlocked); took > lease/3 {
		t.Errorf("the waiter on %s got in %v after its holder's unlock; want it woken by the unlock, well within the holder's lease of %v", other, took.Round(time.Millisecond), lease)
	}
}
