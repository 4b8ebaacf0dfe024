package relock_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/relock-go/relock"
	"github.com/relock-go/relock/internal/redistest"
	"github.com/relock-go/relock/internal/redistest/relocktest"
	"github.com/relock-go/relock/rlock"
)

// The lock kinds on a 3-master cluster, with names on every master: mutual exclusion,
// re-entry, waiters woken by sharded messages, renewal, lease loss, fair order and shared
// reads. Wake-ups travel by SPUBLISH; no classic PUBLISH is sent.
func TestCluster(t *testing.T) {
	cl := redistest.StartCluster(t)
	c1 := relocktest.New(t, cl, relock.WithWatchdogTimeout(900*time.Millisecond))
	c2 := relocktest.New(t, cl, relock.WithWatchdogTimeout(900*time.Millisecond))
	side := cl.Client(t)

	for _, name := range cl.NamesOnEveryMaster(t, "cluster-lock-") {
		t.Run(name, func(t *testing.T) {
			ctx := redistest.Context(t, 2*time.Minute)
			// Mutual exclusion across two clients, with re-entry inside.
			var counter int
			var wg sync.WaitGroup
			for g := 0; g < 8; g++ {
				mu := []*relock.Client{c1, c2}[g%2].Lock(name)
				wg.Add(1)
				go func() {
					defer wg.Done()
					for s := 0; s < 20; s++ {
						held, err := mu.Lock(ctx)
						if err != nil {
							t.Error(err)
							return
						}
						if held, err = mu.Lock(held); err != nil {
							t.Error(err)
							return
						}
						v := counter
						counter = v + 1
						_ = mu.Unlock(held)
						if err := mu.Unlock(held); err != nil {
							t.Error(err)
							return
						}
					}
				}()
			}
			wg.Wait()
			if counter != 160 {
				t.Errorf("counter %d; want 160", counter)
			}

			// A waiter parked on the shard is subscribed there and woken by the unlock.
			held, err := c1.Lock(name).Lock(ctx, rlock.WithLease(time.Minute))
			if err != nil {
				t.Fatal(err)
			}
			timedOut := c2.PubSubStats().TimedOut
			got := make(chan error, 1)
			go func() {
				h, err := c2.Lock(name).Lock(ctx)
				if err == nil {
					err = c2.Lock(name).Unlock(h)
				}
				got <- err
			}()
			channel := "redisson_lock__channel:{" + name + "}"
			owner := cl.MasterOf(cl.Slot(name))
			redistest.Eventually(t, 15*time.Second, "no shard subscription for the waiter", func() bool {
				v, err := owner.Do(t, "PUBSUB", "SHARDNUMSUB", channel).ToArray()
				if err != nil || len(v) != 2 {
					return false
				}
				n, _ := v[1].AsInt64()
				return n >= 1
			})
			if err := c1.Lock(name).Unlock(held); err != nil {
				t.Fatal(err)
			}
			if err := redistest.Recv(t, got, 30*time.Second, "the waiter's turn"); err != nil {
				t.Fatal(err)
			}
			if c2.PubSubStats().TimedOut != timedOut {
				t.Error("the waiter was woken by its time bound, not by the sharded message")
			}

			// Renewal keeps a hold past its lease; deleting the key is noticed.
			hold, err := c1.Lock(name).Lock(ctx)
			if err != nil {
				t.Fatal(err)
			}
			time.Sleep(1500 * time.Millisecond)
			if hold.Err() != nil {
				t.Fatalf("hold lost while renewed: %v", context.Cause(hold))
			}
			if err := side.Do(ctx, side.B().Del().Key(name).Build()).Error(); err != nil {
				t.Fatal(err)
			}
			select {
			case <-hold.Done():
			case <-time.After(5 * time.Second):
				t.Fatal("lease loss not signalled")
			}

			// Fair order and shared reads on the same shard.
			fair, rwName := "{"+name+"}:fair", "{"+name+"}:rw" // the same shard
			fl := c1.FairLock(fair)
			first, err := fl.Lock(ctx)
			if err != nil {
				t.Fatal(err)
			}
			order := make(chan int, 3)
			for i := 0; i < 3; i++ {
				go func() {
					h, err := c2.FairLock(fair).Lock(ctx)
					if err == nil {
						order <- i
						err = c2.FairLock(fair).Unlock(h)
					}
					if err != nil {
						t.Error(err)
					}
				}()
				redistest.Eventually(t, 15*time.Second, "fair waiter not queued", func() bool {
					n, _ := side.Do(ctx, side.B().Llen().Key("redisson_lock_queue:"+fair).Build()).AsInt64()
					return n == int64(i+1)
				})
			}
			if err := fl.Unlock(first); err != nil {
				t.Fatal(err)
			}
			for i := 0; i < 3; i++ {
				if got := redistest.Recv(t, order, 30*time.Second, "the next fair grant"); got != i {
					t.Errorf("fair grant %d went to waiter %d", i, got)
				}
			}
			rw := c1.RWLock(rwName)
			r1, err := rw.RLock(relock.NewOwner(ctx))
			if err != nil {
				t.Fatal(err)
			}
			r2, err := c2.RWLock(rwName).RLock(ctx)
			if err != nil {
				t.Fatalf("second reader on the cluster: %v", err)
			}
			_ = rw.RUnlock(r1)
			_ = c2.RWLock(rwName).RUnlock(r2)
		})
	}

	var publish, spublish int64
	for _, n := range cl.Nodes() {
		st := n.CommandStats(t)
		publish += st["publish"]
		spublish += st["spublish"]
	}
	t.Logf("commands over the cluster: %d PUBLISH, %d SPUBLISH", publish, spublish)
	if publish != 0 || spublish == 0 {
		t.Errorf("%d classic PUBLISH and %d SPUBLISH; want wake-ups by sharded pub/sub only", publish, spublish)
	}
}

// failoverLoad runs a contended workload on names spread over the masters until stop is
// closed: each worker locks, checks nobody else is inside, and unlocks. It records errors
// with their times, and keeps the unlocks that found the hold gone (ErrNotHeld) apart:
// those are holds lost, not failed calls.
type failoverLoad struct {
	wg     sync.WaitGroup
	stop   chan struct{}
	lease  time.Duration // the workers' watchdog timeout
	ops    atomic.Int64
	inside map[string]*atomic.Int32
	mu     sync.Mutex
	errs   []time.Time
	msgs   []string // the errors and lost holds, with their times since start
	start  time.Time
	overl  atomic.Int64

	// notHeld counts the unlocks that met ErrNotHeld; live those of them whose hold's
	// context was still live when Unlock was called; inLease those whose whole cycle, from
	// asking for the lock to the unlock's reply, took less than one lease. The lease in
	// Redis runs from when the acquire script ran, which is after the lock was asked for,
	// so within that time the hold cannot have expired: only a lost write explains it.
	notHeld, live, inLease atomic.Int64
}

func startLoad(t *testing.T, clients []*relock.Client, names []string, lease time.Duration) *failoverLoad {
	l := &failoverLoad{stop: make(chan struct{}), lease: lease, inside: map[string]*atomic.Int32{}, start: time.Now()}
	for _, n := range names {
		l.inside[n] = new(atomic.Int32)
	}
	for w := 0; w < 12; w++ {
		name := names[w%len(names)]
		mu := clients[w%len(clients)].Lock(name)
		l.wg.Add(1)
		go func() {
			defer l.wg.Done()
			for {
				select {
				case <-l.stop:
					return
				default:
				}
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				asked := time.Now()
				held, err := mu.Lock(ctx)
				if err == nil {
					if l.inside[name].Add(1) != 1 && held.Err() == nil {
						l.overl.Add(1)
					}
					time.Sleep(time.Millisecond)
					l.inside[name].Add(-1)
					live := held.Err() == nil
					err = mu.Unlock(held)
					if errors.Is(err, relock.ErrNotHeld) {
						l.lost(name, asked, live, context.Cause(held))
						err = nil
					}
				}
				cancel()
				if err != nil {
					l.mu.Lock()
					l.errs = append(l.errs, time.Now())
					l.msgs = append(l.msgs, fmt.Sprintf("%v: %v", time.Since(l.start).Round(time.Millisecond), err))
					l.mu.Unlock()
					time.Sleep(20 * time.Millisecond)
					continue
				}
				l.ops.Add(1)
			}
		}()
	}
	return l
}

// lost records an unlock of name that found the hold gone.
func (l *failoverLoad) lost(name string, asked time.Time, live bool, cause error) {
	took := time.Since(asked)
	l.notHeld.Add(1)
	if live {
		l.live.Add(1)
	}
	if took < l.lease {
		l.inLease.Add(1)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.msgs = append(l.msgs, fmt.Sprintf("%v: %s not held at unlock, %v after it was asked for (context live at unlock: %t, cause %v)",
		time.Since(l.start).Round(time.Millisecond), name, took.Round(time.Millisecond), live, cause))
}

// Manual failover (CLUSTER FAILOVER on a replica) under a contended workload: a lock held
// on the shard that fails over survives, waiters finish, nobody overlaps, no hold is lost,
// and no operation fails after a bounded retry window.
func TestClusterManualFailover(t *testing.T) {
	cl := redistest.StartCluster(t)
	// A manual failover pauses writes on the old master until the replica has caught up,
	// which on a loaded machine can take seconds: each call may take that long, and a
	// lock whose unlock failed all the same frees itself within its 3s lease.
	const lease = 3 * time.Second
	opts := []relock.Option{relock.WithTimeout(10 * time.Second), relock.WithWatchdogTimeout(lease)}
	clients := []*relock.Client{relocktest.New(t, cl, opts...), relocktest.New(t, cl, opts...)}
	// The held lock renews every 3s, so the failover falls between renewals or delays one,
	// and either way its 9s lease leaves room for a slow promotion.
	holder := relocktest.New(t, cl, relock.WithTimeout(10*time.Second), relock.WithWatchdogTimeout(9*time.Second))
	names := cl.NamesOnEveryMaster(t, "failover-")
	master := cl.MasterOf(cl.Slot(names[0]))
	replica := cl.ReplicaOf(master)
	heldName := "{" + names[0] + "}:held" // on the shard that fails over
	if cl.MasterOf(cl.Slot(heldName)) != master {
		t.Fatalf("%s is not on %s, the master that fails over", heldName, master.Addr())
	}
	held, err := holder.Lock(heldName).Lock(context.Background(), rlock.WithWaitTimeout(30*time.Second)) // a bound on the wait, not the hold
	if err != nil {
		t.Fatal(err)
	}
	field := onlyField(t, master, heldName)

	load := startLoad(t, clients, names, lease)
	time.Sleep(500 * time.Millisecond)
	before := load.ops.Load()
	start := time.Now()
	cl.Failover(t, replica)
	failedOver := time.Since(start)
	renewed := holder.WatchdogStats().Renewed
	time.Sleep(2 * time.Second)
	window := time.Since(start)
	during := load.ops.Load()
	time.Sleep(2 * time.Second)
	close(load.stop)
	load.wg.Wait()

	late := 0
	for _, at := range load.errs {
		if at.After(start.Add(window)) {
			late++
		}
	}
	t.Logf("manual failover of %s to %s done in %v (at %v); %d ops before, %d during, %d after; %d errors, %d after the %v window; %d overlaps; %d unlocks found the hold gone (%d with a live context, %d within one lease)",
		master.Addr(), replica.Addr(), failedOver.Round(time.Millisecond), start.Sub(load.start).Round(time.Millisecond),
		before, during-before, load.ops.Load()-during, len(load.errs), late, window.Round(time.Millisecond), load.overl.Load(),
		load.notHeld.Load(), load.live.Load(), load.inLease.Load())
	for _, m := range load.msgs {
		t.Log(m)
	}
	if late != 0 {
		t.Errorf("%d operations failed after the %v retry window", late, window)
	}
	if load.ops.Load() <= during {
		t.Error("no lock operation succeeded after the failover")
	}
	if load.overl.Load() != 0 {
		t.Errorf("%d overlapping holds", load.overl.Load())
	}
	// A manual failover waits until the replica has every write of the master, so no hold
	// may go missing. One that ran past its lease may have expired for want of renewal
	// while writes were paused; those are only logged above.
	if n := load.inLease.Load(); n != 0 {
		t.Errorf("%d holds of the contended workload were gone at unlock although unlocked within their lease", n)
	}

	// The held lock lives on the promoted replica and its renewal goes there.
	if got := cl.MasterOf(cl.Slot(heldName)); got != replica {
		t.Fatalf("%s is served by %s after the failover; want the promoted %s", heldName, got.Addr(), replica.Addr())
	}
	if n, err := replica.Do(t, "HEXISTS", heldName, field).AsInt64(); err != nil || n != 1 {
		t.Errorf("HEXISTS %s %s on the promoted replica = %d, %v; want 1", heldName, field, n, err)
	}
	redistest.Eventually(t, 15*time.Second, "the held lock was not renewed after the failover", func() bool {
		return holder.WatchdogStats().Renewed > renewed || held.Err() != nil
	})
	if held.Err() != nil {
		t.Fatalf("a lock held through the manual failover was lost: %v", context.Cause(held))
	}
	if err := holder.Lock(heldName).Unlock(held); err != nil {
		t.Fatalf("unlock of the lock held through the manual failover: %v", err)
	}
}

// onlyField returns the one field of the lock hash name on node: its holder's owner.
func onlyField(t *testing.T, node *redistest.Server, name string) string {
	t.Helper()
	fields, err := node.Do(t, "HKEYS", name).AsStrSlice()
	if err != nil || len(fields) != 1 {
		t.Fatalf("HKEYS %s on %s = %q, %v; want one owner", name, node.Addr(), fields, err)
	}
	return fields[0]
}

// A master killed with SIGKILL: lock service on its slots resumes once the cluster has
// failed over. The test records how long that took and whether a lock granted just before
// the kill was lost: replication is asynchronous, so it may be, and then its holder must
// learn so.
func TestClusterMasterKilled(t *testing.T) {
	cl := redistest.StartCluster(t)
	// Well above the few seconds a failover takes, so the hold cannot end by its local
	// deadline meanwhile: if it ends, the promoted replica did not have it.
	const lease = 10 * time.Second
	c := relocktest.New(t, cl, relock.WithWatchdogTimeout(lease))
	names := cl.NamesOnEveryMaster(t, "killed-")
	name, other := names[0], names[1]
	master := cl.MasterOf(cl.Slot(name))
	replica := cl.ReplicaOf(master)
	probe := "{" + name + "}:after" // the killed master's slot
	if cl.Slot(probe) != cl.Slot(name) {
		t.Fatal("the probe is not in the lock's slot")
	}
	// The owner's field is learnt from a lock on another master taken by the same owner,
	// so that nothing comes between the grant and the kill. That lock has a fixed lease,
	// so the outage, which stops renewals everywhere, cannot end it (and with it the
	// context that the hold below derives from).
	owned, err := c.Lock(other).Lock(context.Background(), rlock.WithLease(time.Minute), rlock.WithWaitTimeout(30*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	field := onlyField(t, cl.MasterOf(cl.Slot(other)), other)
	held, err := c.Lock(name).Lock(owned)
	if err != nil {
		t.Fatal(err)
	}
	killed := time.Now()
	master.Kill(t)
	var resumed time.Duration
	for deadline := time.Now().Add(30 * time.Second); ; {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		h, err := c.Lock(probe).Lock(ctx)
		cancel()
		if err == nil {
			resumed = time.Since(killed)
			_ = c.Lock(probe).Unlock(h)
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("lock service did not resume within 30s of the kill: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	cl.WaitHealthy(t, 30*time.Second)
	if got := cl.MasterOf(cl.Slot(name)); got != replica {
		t.Fatalf("%s is served by %s after the kill; want the promoted %s", name, got.Addr(), replica.Addr())
	}
	exists, err := replica.Do(t, "HEXISTS", name, field).AsInt64()
	if err != nil {
		t.Fatal(err)
	}
	kept := exists == 1
	t.Logf("master %s killed: lock service resumed after %v, on the promoted %s; the lock granted just before the kill was %s (HEXISTS %s %s = %d)",
		master.Addr(), resumed.Round(time.Millisecond), replica.Addr(), map[bool]string{true: "kept", false: "LOST"}[kept], name, field, exists)

	if kept {
		if held.Err() != nil {
			t.Fatalf("the hold is still in Redis but its context ended: %v", context.Cause(held))
		}
		if err := c.Lock(name).Unlock(held); err != nil {
			t.Fatalf("unlock of the hold that survived the failover: %v", err)
		}
		return
	}
	// Lost: the next renewal finds the owner gone, within a renewal period or two.
	select {
	case <-held.Done():
		if !errors.Is(context.Cause(held), relock.ErrLeaseLost) {
			t.Errorf("the lost hold's context ended with %v; want ErrLeaseLost", context.Cause(held))
		}
	case <-time.After(2 * lease):
		t.Error("the hold is gone in Redis but its context did not end")
	}
}

// Sentinel: the master killed with SIGKILL; the client follows the new master and locks
// work, waiters included.
func TestSentinelFailover(t *testing.T) {
	s := redistest.StartSentinel(t)
	rc := s.Client(t)
	c, err := relock.New(rc)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx := redistest.Context(t, 3*time.Minute)
	if err := c.Lock("before").Do(ctx, func(context.Context) error { return nil }); err != nil {
		t.Fatal(err)
	}
	old := s.Master()
	old.Kill(t)
	s.WaitFailover(t, old, 30*time.Second)
	var held context.Context
	redistest.Eventually(t, 15*time.Second, "no lock on the new master", func() bool {
		lctx, cancel := context.WithTimeout(ctx, time.Second)
		defer cancel()
		held, err = c.Lock("after").Lock(lctx)
		return err == nil
	})
	got := make(chan error, 1)
	go func() {
		wctx, cancel := context.WithTimeout(ctx, 20*time.Second)
		defer cancel()
		h, err := c.Lock("after").Lock(relock.NewOwner(wctx))
		if err == nil {
			err = c.Lock("after").Unlock(h)
		}
		got <- err
	}()
	redistest.Eventually(t, 15*time.Second, "waiter not parked", func() bool { return c.PubSubStats().Waiting == 1 })
	if err := c.Lock("after").Unlock(held); err != nil {
		t.Fatal(err)
	}
	if err := redistest.Recv(t, got, 30*time.Second, "the waiter's turn"); err != nil {
		t.Fatalf("waiter on the new master: %v", err)
	}
	role, _ := s.Master().Do(t, "ROLE").ToArray()
	if len(role) == 0 || !strings.EqualFold(mustString(role[0]), "master") || s.Master().Addr() == old.Addr() {
		t.Errorf("the sentinels' master %s is not a new master", s.Master().Addr())
	}
}

// On a sentinel deployment pub/sub is classic by default (WithShardedPubSub: on by default
// only for a cluster client of Redis 7 or newer, as the nodes here are): an unlock
// publishes with PUBLISH, and a waiter subscribed with SUBSCRIBE, as Redisson's clients
// are there, is woken by its message rather than by the holder's lease running out.
func TestSentinelClassicPubSubByDefault(t *testing.T) {
	s := redistest.StartSentinel(t)
	holder, err := relock.New(s.Client(t))
	if err != nil {
		t.Fatal(err)
	}
	defer holder.Close()
	waiter, err := relock.New(s.Client(t), relock.WithShardedPubSub(false)) // subscribes as Redisson does
	if err != nil {
		t.Fatal(err)
	}
	defer waiter.Close()
	master, name := s.Master(), "sentinel-classic"
	held, acquired := parkWaiter(t, holder, waiter, name, func() bool {
		return master.Subscribers(t, "NUMSUB", "redisson_lock__channel:{"+name+"}") == 1
	})
	before, st := master.CommandStats(t), waiter.PubSubStats()
	if err := holder.Lock(name).Unlock(held); err != nil {
		t.Fatal(err)
	}
	redistest.Eventually(t, 10*time.Second, "the waiter subscribed with SUBSCRIBE was not woken by the unlock's message", func() bool {
		return waiter.PubSubStats().Woken > st.Woken
	})
	if err := redistest.Recv(t, acquired, 30*time.Second, "the waiter's Lock after the unlock"); err != nil {
		t.Fatal(err)
	}
	after := master.CommandStats(t)
	if after["publish"] == before["publish"] || after["spublish"] != before["spublish"] {
		t.Errorf("the unlock sent %d PUBLISH and %d SPUBLISH; want classic PUBLISH only", after["publish"]-before["publish"], after["spublish"]-before["spublish"])
	}
}

func mustString(m rueidis.RedisMessage) string {
	s, _ := m.ToString()
	return s
}

// pubsubCounts sums, over every node of the cluster, the subscribers of channel by classic
// SUBSCRIBE (PUBSUB NUMSUB) and by SSUBSCRIBE (PUBSUB SHARDNUMSUB). Both are local to the
// node asked: a classic subscriber sits on whichever node the hub picked, a sharded one on
// a node of the channel's shard.
func pubsubCounts(t *testing.T, cl *redistest.Cluster, channel string) (classic, sharded int64) {
	t.Helper()
	for _, n := range cl.Nodes() {
		classic += n.Subscribers(t, "NUMSUB", channel)
		sharded += n.Subscribers(t, "SHARDNUMSUB", channel)
	}
	return classic, sharded
}

// commandCalls sums the calls of each of cmds over the nodes of the cluster.
func commandCalls(t *testing.T, cl *redistest.Cluster, cmds ...string) map[string]int64 {
	t.Helper()
	calls := map[string]int64{}
	for _, n := range cl.Nodes() {
		st := n.CommandStats(t)
		for _, c := range cmds {
			calls[c] += st[c]
		}
	}
	return calls
}

// WithShardedPubSub overrides the detection on a cluster of Redis 7 nodes: off, unlocks
// publish with classic PUBLISH and waiters subscribe with SUBSCRIBE; on, SPUBLISH and
// SSUBSCRIBE. Either way a parked waiter is woken by the unlock's message, not by its
// time bound, and no command of the other kind is sent.
func TestClusterShardedPubSubOption(t *testing.T) {
	cl := redistest.StartCluster(t)
	for _, sharded := range []bool{false, true} {
		t.Run(fmt.Sprintf("sharded=%t", sharded), func(t *testing.T) {
			holder := relocktest.New(t, cl, relock.WithShardedPubSub(sharded))
			waiter := relocktest.New(t, cl, relock.WithShardedPubSub(sharded))
			for _, name := range cl.NamesOnEveryMaster(t, fmt.Sprintf("option-%t-", sharded)) {
				channel := "redisson_lock__channel:{" + name + "}"
				before := commandCalls(t, cl, "publish", "spublish", "subscribe", "ssubscribe")
				st := waiter.PubSubStats()

				var classic, shard int64
				held, acquired := parkWaiter(t, holder, waiter, name, func() bool {
					classic, shard = pubsubCounts(t, cl, channel)
					return classic+shard >= 1
				})
				took := unlockForWaiter(t, holder, name, held, acquired)
				after := commandCalls(t, cl, "publish", "spublish", "subscribe", "ssubscribe")
				delta := func(c string) int64 { return after[c] - before[c] }
				now := waiter.PubSubStats()
				t.Logf("%s (master %s): subscribers NUMSUB %d, SHARDNUMSUB %d; commands %d SUBSCRIBE, %d SSUBSCRIBE, %d PUBLISH, %d SPUBLISH; waiter acquired %v after the unlock, woken +%d, timed out +%d, messages +%d",
					name, cl.MasterOf(cl.Slot(name)).Addr(), classic, shard, delta("subscribe"), delta("ssubscribe"),
					delta("publish"), delta("spublish"), took.Round(time.Millisecond), now.Woken-st.Woken, now.TimedOut-st.TimedOut, now.Messages-st.Messages)

				want, other := "publish", "spublish"
				wantSub, otherSub, subs, otherSubs := "subscribe", "ssubscribe", classic, shard
				if sharded {
					want, other = other, want
					wantSub, otherSub, subs, otherSubs = otherSub, wantSub, shard, classic
				}
				if delta(want) < 1 || delta(other) != 0 {
					t.Errorf("%d %s and %d %s; want the unlock to use %s only", delta(want), strings.ToUpper(want), delta(other), strings.ToUpper(other), strings.ToUpper(want))
				}
				if subs != 1 || otherSubs != 0 || delta(wantSub) < 1 || delta(otherSub) != 0 {
					t.Errorf("the waiter's subscription: %d by %s, %d by %s; want it by %s only", subs, strings.ToUpper(wantSub), otherSubs, strings.ToUpper(otherSub), strings.ToUpper(wantSub))
				}
				if now.TimedOut != st.TimedOut || now.Woken == st.Woken || now.Messages == st.Messages {
					t.Errorf("the waiter was not woken by the unlock message: woken +%d, timed out +%d, messages +%d",
						now.Woken-st.Woken, now.TimedOut-st.TimedOut, now.Messages-st.Messages)
				}
			}
		})
	}
}

// A waiter parked on a lock whose shard fails over (CLUSTER FAILOVER) is still woken by the
// unlock's message after the failover: the hub subscribes the channel again where it lives
// now. The hold has a one-minute lease, so a waiter that missed the message would only
// wake when its time bound, the lock's TTL, ran out.
func TestClusterShardedResubscribeAfterFailover(t *testing.T) {
	testResubscribe(t, func(cl *redistest.Cluster, master, replica *redistest.Server) {
		cl.Failover(t, replica)
	})
}

// As TestClusterShardedResubscribeAfterFailover, with the master killed (SIGKILL): the
// subscription's node is gone rather than demoted, and the hub must not keep dialling it.
func TestClusterShardedResubscribeAfterKill(t *testing.T) {
	testResubscribe(t, func(cl *redistest.Cluster, master, replica *redistest.Server) {
		master.Kill(t)
		cl.WaitHealthy(t, 30*time.Second)
	})
}

// testResubscribe parks a waiter behind a one-minute hold, fails the lock's shard over with
// fail, unlocks, and checks that the unlock's message woke the waiter.
func testResubscribe(t *testing.T, fail func(cl *redistest.Cluster, master, replica *redistest.Server)) {
	cl := redistest.StartCluster(t)
	opts := []relock.Option{relock.WithShardedPubSub(true), relock.WithTimeout(10 * time.Second)}
	// The hold must survive a killed master as well, so the replica confirms it first.
	holder := relocktest.New(t, cl, append(opts, relock.WithSyncReplicas(1, 5*time.Second))...)
	waiter := relocktest.New(t, cl, opts...)
	name := cl.NamesOnEveryMaster(t, "resubscribe-")[0]
	channel := "redisson_lock__channel:{" + name + "}"
	master := cl.MasterOf(cl.Slot(name))
	replica := cl.ReplicaOf(master)

	held, acquired := parkWaiter(t, holder, waiter, name, onShardMaster(t, master, name))
	parked := waiter.PubSubStats()

	start := time.Now()
	fail(cl, master, replica)
	failedOver := time.Since(start)
	if got := cl.MasterOf(cl.Slot(name)); got != replica {
		t.Fatalf("%s is served by %s after the failover; want the promoted %s", name, got.Addr(), replica.Addr())
	}
	// The old master dropped the subscription when it gave up the slot (or died). The new
	// one must be on the promoted master: a demoted node accepts SSUBSCRIBE too, as a
	// replica, but gets the shard's messages only once the new master has learnt of it by
	// gossip, so an unlock published before then would be lost.
	var seen string
	defer func() {
		if t.Failed() {
			t.Logf("last seen: %s", seen)
		}
	}()
	redistest.Eventually(t, 15*time.Second, "the channel was not subscribed again on the promoted master", func() bool {
		n := int64(0)
		for _, node := range cl.Nodes() {
			if node != master {
				n += node.Subscribers(t, "SHARDNUMSUB", channel)
			}
		}
		promoted, waiting := replica.Subscribers(t, "SHARDNUMSUB", channel), waiter.PubSubStats().Waiting
		seen = fmt.Sprintf("%d subscriptions on nodes other than the old master, %d on the promoted one, %d waiting", n, promoted, waiting)
		return n == 1 && promoted == 1 && waiting == 1
	})
	resubscribed := time.Since(start)
	st := waiter.PubSubStats()

	took := unlockForWaiter(t, holder, name, held, acquired)
	now := waiter.PubSubStats()
	t.Logf("failover of %s to %s done in %v, subscribed again after %v (reconnects +%d, wake-ups meanwhile +%d); waiter acquired %v after the unlock: woken +%d, timed out +%d, messages +%d",
		master.Addr(), replica.Addr(), failedOver.Round(time.Millisecond), resubscribed.Round(time.Millisecond),
		st.Reconnects-parked.Reconnects, st.Woken-parked.Woken, took.Round(time.Millisecond),
		now.Woken-st.Woken, now.TimedOut-st.TimedOut, now.Messages-st.Messages)
	if now.TimedOut != parked.TimedOut {
		t.Errorf("%d waits ended by their time bound; want the waiter woken by messages", now.TimedOut-parked.TimedOut)
	}
	if now.Messages == st.Messages || now.Woken == st.Woken {
		t.Errorf("no unlock message woke the waiter after the failover (messages +%d, woken +%d)", now.Messages-st.Messages, now.Woken-st.Woken)
	}
	// The lease would have freed the lock a minute after it was taken; a waiter woken by
	// the message is in long before.
	if took > 30*time.Second {
		t.Errorf("the waiter acquired %v after the unlock; want it woken by the unlock message", took)
	}
}

// parkWaiter has holder take the lock name for a minute, and parks a Lock of waiter's
// behind the hold until subscribed says the lock's channel is subscribed where the unlock
// will publish. It returns the hold's context, and where the waiter's Lock, and then its
// Unlock, reports: within 50 s.
func parkWaiter(t *testing.T, holder, waiter *relock.Client, name string, subscribed func() bool) (context.Context, <-chan error) {
	t.Helper()
	ctx := redistest.Context(t, 2*time.Minute)
	held, err := holder.Lock(name).Lock(ctx, rlock.WithLease(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	acquired := make(chan error, 1)
	go func() {
		wctx, cancel := context.WithTimeout(ctx, 50*time.Second)
		defer cancel()
		h, err := waiter.Lock(name).Lock(wctx)
		if err == nil {
			err = waiter.Lock(name).Unlock(h)
		}
		acquired <- err
	}()
	redistest.Eventually(t, 15*time.Second, "the waiter's channel is not subscribed", func() bool {
		return subscribed() && waiter.PubSubStats().Waiting == 1
	})
	return held, acquired
}

// onShardMaster says whether name's channel has one sharded subscriber on master.
func onShardMaster(t *testing.T, master *redistest.Server, name string) func() bool {
	return func() bool {
		return master.Subscribers(t, "SHARDNUMSUB", "redisson_lock__channel:{"+name+"}") == 1
	}
}

// unlockForWaiter releases the hold held of holder's on name, waits for the waiter that
// parkWaiter parked to report, and returns how long that took after the unlock.
func unlockForWaiter(t *testing.T, holder *relock.Client, name string, held context.Context, acquired <-chan error) time.Duration {
	t.Helper()
	unlocked := time.Now()
	if err := holder.Lock(name).Unlock(held); err != nil {
		t.Fatal(err)
	}
	if err := redistest.Recv(t, acquired, 55*time.Second, "the waiter's Lock after the unlock"); err != nil {
		t.Fatal(err)
	}
	return time.Since(unlocked)
}

// aclCluster hands out cluster clients that log in as an ACL user.
type aclCluster struct {
	cl         *redistest.Cluster
	user, pass string
}

func (a aclCluster) Client(t testing.TB) rueidis.Client {
	t.Helper()
	return a.cl.ClientWith(t, func(o *rueidis.ClientOption) {
		o.Username, o.Password = a.user, a.pass
		// The user may not ask CLUSTER SLOTS: the client learns the topology another way.
		o.ClusterOption.PreferClusterShards = true
	})
}

// A user that may not ask CLUSTER SLOTS still gets its waiters woken by an unlock under
// sharded pub/sub: the hub cannot ask the cluster where a channel's shard lives, and
// subscribes where the client's own slot map routes it, rather than look again forever.
func TestClusterShardedSlotsRefused(t *testing.T) {
	cl := redistest.StartCluster(t)
	for _, node := range cl.Nodes() {
		if err := node.Do(t, "ACL", "SETUSER", "app", "on", ">app-pass", "~*", "&*", "+@all", "-cluster|slots").Error(); err != nil {
			t.Fatal(err)
		}
	}
	src := aclCluster{cl: cl, user: "app", pass: "app-pass"}
	if rc := src.Client(t); rc.Do(context.Background(), rc.B().ClusterSlots().Build()).Error() == nil {
		t.Fatal("the user may ask CLUSTER SLOTS; the test needs it refused")
	}
	opts := []relock.Option{relock.WithShardedPubSub(true), relock.WithTimeout(10 * time.Second)}
	holder := relocktest.New(t, src, opts...)
	waiter := relocktest.New(t, src, opts...)
	name := cl.NamesOnEveryMaster(t, "refused-")[1]
	held, acquired := parkWaiter(t, holder, waiter, name, onShardMaster(t, cl.MasterOf(cl.Slot(name)), name))
	before := waiter.PubSubStats()
	took := unlockForWaiter(t, holder, name, held, acquired)
	after := waiter.PubSubStats()
	t.Logf("waiter acquired %v after the unlock: woken +%d, timed out +%d", took.Round(time.Millisecond),
		after.Woken-before.Woken, after.TimedOut-before.TimedOut)
	if after.Woken == before.Woken || after.TimedOut != before.TimedOut {
		t.Errorf("the waiter was not woken by the unlock's message (woken +%d, timed out +%d)",
			after.Woken-before.Woken, after.TimedOut-before.TimedOut)
	}
}

// A client that cannot tell the cluster's Redis version, for a user that may not ask INFO,
// uses classic pub/sub, which every version has: its waiter subscribes with SUBSCRIBE,
// the holder's unlock publishes with PUBLISH, and the waiter is woken by that message.
// Guards against a detection that takes a refused INFO for sharded pub/sub, which a
// cluster of Redis 6 nodes would refuse at every subscription.
func TestClusterVersionUnknownUsesClassicPubSub(t *testing.T) {
	cl := redistest.StartCluster(t)
	for _, node := range cl.Nodes() {
		if err := node.Do(t, "ACL", "SETUSER", "noinfo", "on", ">noinfo-pass", "~*", "&*", "+@all", "-info").Error(); err != nil {
			t.Fatal(err)
		}
	}
	src := aclCluster{cl: cl, user: "noinfo", pass: "noinfo-pass"}
	if rc := src.Client(t); rc.Do(context.Background(), rc.B().Info().Section("server").Build()).Error() == nil {
		t.Fatal("the user may ask INFO; the test needs it refused")
	}
	holder := relocktest.New(t, src, relock.WithTimeout(10*time.Second))
	waiter := relocktest.New(t, src, relock.WithTimeout(10*time.Second))
	name := cl.NamesOnEveryMaster(t, "noinfo-")[0]
	channel := "redisson_lock__channel:{" + name + "}"
	before := commandCalls(t, cl, "publish", "spublish", "ssubscribe")
	var classic, sharded int64
	held, acquired := parkWaiter(t, holder, waiter, name, func() bool {
		classic, sharded = pubsubCounts(t, cl, channel)
		return classic+sharded >= 1
	})
	st := waiter.PubSubStats()
	unlockForWaiter(t, holder, name, held, acquired)
	after, now := commandCalls(t, cl, "publish", "spublish", "ssubscribe"), waiter.PubSubStats()
	if classic != 1 || sharded != 0 {
		t.Errorf("the waiter's channel had %d SUBSCRIBE and %d SSUBSCRIBE subscribers; want one by SUBSCRIBE", classic, sharded)
	}
	if after["publish"] == before["publish"] || after["spublish"] != before["spublish"] || after["ssubscribe"] != before["ssubscribe"] {
		t.Errorf("%d PUBLISH, %d SPUBLISH and %d SSUBSCRIBE were sent; want classic pub/sub only", after["publish"]-before["publish"],
			after["spublish"]-before["spublish"], after["ssubscribe"]-before["ssubscribe"])
	}
	if now.Woken == st.Woken || now.TimedOut != st.TimedOut {
		t.Errorf("the waiter was not woken by the unlock's message (woken +%d, timed out +%d)", now.Woken-st.Woken, now.TimedOut-st.TimedOut)
	}
}

// A slot moved to another master (CLUSTER SETSLOT ... MIGRATING/IMPORTING, MIGRATE, SETSLOT
// ... NODE, as a reshard does it) while a lock of it is held and waited for under sharded
// pub/sub: the hold is renewed throughout, its context stays live, the waiter's channel is
// subscribed again on the new master, and the holder's Unlock there wakes the waiter by its
// message. (Classic pub/sub reaches every node whoever owns the slot.)
func TestClusterSlotMove(t *testing.T) {
	cl := redistest.StartCluster(t)
	const lease = 3 * time.Second // the renewed hold's; the renewals come every second
	opts := []relock.Option{relock.WithShardedPubSub(true), relock.WithTimeout(10 * time.Second),
		relock.WithWatchdogTimeout(lease)}
	holder := relocktest.New(t, cl, opts...)
	waiter := relocktest.New(t, cl, opts...)
	side := cl.Client(t)
	name := cl.NamesOnEveryMaster(t, "moved-")[0]
	renewed := "{" + name + "}:renewed" // the same slot
	slot := cl.Slot(name)
	from := cl.MasterOf(slot)
	to := cl.Masters()[0]
	if to == from {
		to = cl.Masters()[1]
	}
	channel := "redisson_lock__channel:{" + name + "}"

	// The waited-for hold has a fixed lease of a minute, so the waiter's waits end only
	// by a message (or a lost subscription's wake-up); the other is the watchdog's.
	held, acquired := parkWaiter(t, holder, waiter, name, onShardMaster(t, from, name))
	kept, err := holder.Lock(renewed).Lock(redistest.Context(t, 2*time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	live := func(stage string) {
		t.Helper()
		if kept.Err() != nil || held.Err() != nil {
			t.Fatalf("%s: a hold's context ended (%v, %v); Redis still has both", stage,
				context.Cause(kept), context.Cause(held))
		}
	}

	move := cl.StartSlotMove(t, slot, to)
	time.Sleep(lease) // renewals meet the open slot on the old master
	live("slot open")
	move.MigrateKeys(t)
	time.Sleep(lease) // renewals are redirected (ASK) to the new master
	live("keys migrated")
	move.Finish(t)
	// Three leases have passed since the watchdog's hold was taken: only its renewals,
	// on both masters, kept it.
	if p := redistest.PTTL(t, side, renewed); p <= 0 {
		t.Fatalf("the renewed hold's key: PTTL %d after the move; want it renewed", p)
	}
	live("slot moved")

	redistest.Eventually(t, 15*time.Second, "the channel was not subscribed again on the new master", func() bool {
		return to.Subscribers(t, "SHARDNUMSUB", channel) == 1 && waiter.PubSubStats().Waiting == 1
	})
	st := waiter.PubSubStats()
	took := unlockForWaiter(t, holder, name, held, acquired)
	now := waiter.PubSubStats()
	if now.TimedOut != st.TimedOut || now.Messages == st.Messages || now.Woken == st.Woken {
		t.Errorf("the waiter was not woken by the unlock's message after the move (woken +%d, timed out +%d, messages +%d)",
			now.Woken-st.Woken, now.TimedOut-st.TimedOut, now.Messages-st.Messages)
	}
	if took > 30*time.Second {
		t.Errorf("the waiter acquired %v after the unlock; want it woken by the unlock message", took)
	}
	if err := holder.Lock(renewed).Unlock(kept); err != nil {
		t.Fatalf("Unlock after the move: %v", err)
	}
	if n, err := redistest.Do(t, side, "EXISTS", name, renewed).AsInt64(); err != nil || n != 0 {
		t.Fatalf("lock keys left after both unlocks: EXISTS = %d, %v", n, err)
	}
}
