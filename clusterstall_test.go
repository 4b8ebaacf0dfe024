package relock_test

import (
	"context"
	"testing"
	"time"

	"github.com/relock-go/relock"
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
	cl := redistest.StartCluster(t)
	// The other masters go on serving their slots while one is down, as
	// cluster-require-full-coverage no has them do: by default the whole cluster answers
	// CLUSTERDOWN until the silent master's replica takes over.
	// Nor does the silent master's replica take over (the nodes time out after a second):
	// the master stays silent for the whole test, and no topology change comes in between.
	for _, n := range cl.Nodes() {
		if err := n.Do(t, "CONFIG", "SET", "cluster-require-full-coverage", "no").Error(); err != nil {
			t.Fatal(err)
		}
		if err := n.Do(t, "CONFIG", "SET", "cluster-replica-no-failover", "yes").Error(); err != nil {
			t.Fatal(err)
		}
	}
	const lease = 1500 * time.Millisecond // renewed every 500ms
	c := relocktest.New(t, cl, relock.WithWatchdogTimeout(lease))
	names := cl.NamesOnEveryMaster(t, "silent-")
	var helds []context.Context
	for _, n := range names {
		h, err := c.Lock(n).Lock(redistest.Context(t, time.Minute))
		if err != nil {
			t.Fatal(err)
		}
		helds = append(helds, h)
	}
	for _, m := range cl.Masters() {
		if err := m.Do(t, "SCRIPT", "FLUSH").Error(); err != nil {
			t.Fatal(err)
		}
	}
	silent := cl.MasterOf(cl.Slot(names[0]))
	silent.Pause(t)
	paused := time.Now()
	for time.Since(paused) < 4*lease {
		for i, h := range helds[1:] {
			if h.Err() != nil {
				silent.Resume(t)
				t.Fatalf("%s, on a master that answers, ended %v after another master fell silent: %v",
					names[i+1], time.Since(paused).Round(time.Millisecond), context.Cause(h))
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	silent.Resume(t)
	cl.WaitHealthy(t, 30*time.Second)
	for i, h := range helds[1:] {
		if h.Err() != nil {
			t.Errorf("%s ended: %v", names[i+1], context.Cause(h))
		}
		if err := c.Lock(names[i+1]).Unlock(h); err != nil {
			t.Errorf("Unlock of %s: %v", names[i+1], err)
		}
	}
}
