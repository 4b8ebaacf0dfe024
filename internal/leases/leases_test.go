package leases

import (
	"context"
	"errors"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/relock-go/relock/internal/keys"
	"github.com/relock-go/relock/internal/lockerr"
	"github.com/relock-go/relock/internal/redistest"
	"github.com/relock-go/relock/internal/script"
)

func TestMain(m *testing.M) {
	// Main also stops the Redis Cluster the "cluster" subtests share, and checks for leaked goroutines.
	os.Exit(redistest.Main(m))
}

// hold takes name for owner with the acquire script and registers it with w.
func hold(t *testing.T, w *Watchdog, rc rueidis.Client, name, owner string) context.Context {
	t.Helper()
	sent := time.Now()
	v, err := script.AcquireReply(nil, script.RLockAcquire().Exec(context.Background(), rc, []string{name, keys.Of(name).Wake}, []string{w.leaseMs, owner, "", "0"}))
	if err != nil || v[0] != 1 {
		t.Fatalf("acquire %s: %v %v", name, v, err)
	}
	g := renewedGrant(w, name, owner, v[1])
	g.Sent = sent
	held, _ := w.Acquired(new(Context), context.Background(), g)
	return held
}

// renewedGrant is the grant of a hold of name by owner at count, sent now, with the
// watchdog's lease, renewed as a plain lock's.
func renewedGrant(w *Watchdog, name, owner string, count int64) Grant {
	return Grant{Name: name, Owner: owner, Count: count, Sent: time.Now(), Lease: w.lease, Renew: true, Renewal: script.RLockRenew()}
}

func waitRounds(t *testing.T, w *Watchdog, n uint64) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for w.Stats().Ticks < n {
		if time.Now().After(deadline) {
			t.Fatalf("fewer than %d renewal rounds in 10s: %+v", n, w.Stats())
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// In a cluster a renewal call may only carry locks of one slot: 250 locks sharing a hash
// tag take three calls (100, 100, 50), and five locks in five other slots one call each.
func TestGroupsBySlot(t *testing.T) {
	redistest.EachWithCluster(t, func(t *testing.T, b *redistest.Backend) {
		rc := b.Client(t)
		// A lease long enough that 255 acquisitions on miniredis under -race (a
		// millisecond or more each) cannot outlast it before the first round, and that a
		// round (bounded by the period, a third of it) has room on a loaded machine: the
		// test counts calls and renewals, and a hold or a round lost to a slow machine
		// would skew the count.
		w := newWatchdog(rc, 6*time.Second, true, nil)
		defer w.Close()
		var ctxs []context.Context
		for i := 0; i < 250; i++ {
			ctxs = append(ctxs, hold(t, w, rc, "{orders}:"+strconv.Itoa(i), "o:1"))
		}
		for _, name := range []string{"alpha", "bravo", "charlie", "delta", "echo"} {
			ctxs = append(ctxs, hold(t, w, rc, name, "o:1"))
		}
		waitRounds(t, w, 1)
		before := w.Stats()
		waitRounds(t, w, before.Ticks+2)
		after := w.Stats()
		rounds := after.Ticks - before.Ticks
		if calls := after.Calls - before.Calls; calls != 8*rounds {
			t.Errorf("%d calls in %d rounds; want 8 a round (3 for the tagged slot, 1 for each other)", calls, rounds)
		}
		if got := after.Renewed - before.Renewed; got != 255*rounds {
			t.Errorf("%d renewals in %d rounds of 255 holds", got, rounds)
		}
		for _, ctx := range ctxs {
			if ctx.Err() != nil {
				t.Fatalf("a hold was lost: %v", context.Cause(ctx))
			}
		}
	})
}

// A failed round keeps its holds: once Redis answers again, before their deadline, they are
// renewed as if nothing happened.
func TestFailedRoundKeepsHolds(t *testing.T) {
	t.Run("miniredis errors", func(t *testing.T) {
		b := redistest.Mini(t)
		rc := b.Client(t)
		w := newWatchdog(rc, 900*time.Millisecond, false, nil)
		defer w.Close()
		ctx := hold(t, w, rc, "flaky", "o:1")
		waitRounds(t, w, 1)
		b.Mini.SetError("LOADING Redis is loading the dataset in memory")
		time.Sleep(350 * time.Millisecond) // at least one failed round
		failed := w.Stats()
		b.Mini.SetError("")
		waitRounds(t, w, failed.Ticks+2)
		if ctx.Err() != nil {
			t.Fatalf("the hold was dropped after a failed round: %v", context.Cause(ctx))
		}
		if st := w.Stats(); st.Renewed <= failed.Renewed || st.Holds != 1 {
			t.Errorf("stats %+v after recovery (%+v while failing): want renewals to resume", st, failed)
		}
	})
	redistest.Real(t, func(t *testing.T, b *redistest.Backend) {
		rc := b.Client(t)
		w := newWatchdog(rc, 1500*time.Millisecond, false, nil)
		defer w.Close()
		ctx := hold(t, w, rc, "flaky", "o:1")
		waitRounds(t, w, 1)
		renewed := w.Stats().Renewed
		b.Server.Pause(t)
		time.Sleep(700 * time.Millisecond) // a round meets the paused server
		b.Server.Resume(t)
		waitRounds(t, w, w.Stats().Ticks+2)
		if ctx.Err() != nil {
			t.Fatalf("the hold was dropped after a pause shorter than its lease: %v", context.Cause(ctx))
		}
		if w.Stats().Renewed <= renewed {
			t.Error("no renewal after the server came back")
		}
	})
}

// A renewal batch with a foreign key in it renews the others and reports only that one lost.
// (The two locks share a hash tag, so that they are one batch on a cluster too.)
func TestForeignKeyInBatch(t *testing.T) {
	redistest.EachWithCluster(t, func(t *testing.T, b *redistest.Backend) {
		rc := b.Client(t)
		// A lease with room for a loaded machine: a good hold lost to a late round would
		// leave no hold to renew, and no round to wait for.
		w := newWatchdog(rc, 3*time.Second, b.Cluster != nil, nil)
		defer w.Close()
		good := hold(t, w, rc, "{batch}:good", "o:1")
		bad := hold(t, w, rc, "{batch}:overwritten", "o:1")
		if err := rc.Do(context.Background(), rc.B().Set().Key("{batch}:overwritten").Value("x").Build()).Error(); err != nil {
			t.Fatal(err)
		}
		select {
		case <-bad.Done():
		case <-time.After(10 * time.Second):
			t.Fatal("the overwritten hold was not reported lost within 10s")
		}
		if !errors.Is(context.Cause(bad), lockerr.ErrLeaseLost) {
			t.Errorf("cause %v; want ErrLeaseLost", context.Cause(bad))
		}
		waitRounds(t, w, w.Stats().Ticks+1)
		if good.Err() != nil {
			t.Errorf("the other hold in the batch was lost too: %v", context.Cause(good))
		}
		if v, _ := rc.Do(context.Background(), rc.B().Get().Key("{batch}:overwritten").Build()).ToString(); v != "x" {
			t.Errorf("the foreign value became %q", v)
		}
	})
}

// The renewal rounds keep one cadence: a round that starts late, as a timer's wake-up or a
// busy process makes it, does not push the rounds after it later. A waiter elsewhere counts
// on a renewal landing when the lease it saw was due to end (see package pubsub).
func TestRoundsKeepTheirCadence(t *testing.T) {
	w := &Watchdog{period: 100 * time.Millisecond}
	t0 := time.Unix(1_000_000, 0)
	for _, c := range []struct {
		what      string
		next, now time.Time
		due       bool
		want      time.Time
	}{
		{"a round on time", t0, t0, true, t0.Add(100 * time.Millisecond)},
		{"a round 7ms late", t0, t0.Add(7 * time.Millisecond), true, t0.Add(100 * time.Millisecond)},
		{"a round 99ms late", t0, t0.Add(99 * time.Millisecond), true, t0.Add(100 * time.Millisecond)},
		{"a round a whole period late", t0, t0.Add(100 * time.Millisecond), true, t0.Add(200 * time.Millisecond)},
		{"a round two and a half periods late", t0, t0.Add(250 * time.Millisecond), true, t0.Add(350 * time.Millisecond)},
		{"a check 40ms before the round", t0, t0.Add(-40 * time.Millisecond), false, t0.Add(60 * time.Millisecond)},
	} {
		if got := w.following(c.next, c.now, c.due); !got.Equal(c.want) {
			t.Errorf("%s: next round at %v; want %v", c.what, got.Sub(t0), c.want.Sub(t0))
		}
	}

	// Thirty rounds each started 3ms late end where thirty on time would.
	next := t0
	for range 30 {
		next = w.following(next, next.Add(3*time.Millisecond), true)
	}
	if want := t0.Add(30 * w.period); !next.Equal(want) {
		t.Errorf("after 30 rounds each 3ms late the next is due at %v; want %v", next.Sub(t0), want.Sub(t0))
	}
}

// The running watchdog keeps that cadence: rounds made to start 20ms late (the test holds
// the watchdog's mutex across each due time) are still due a period apart.
func TestLateRoundsDoNotDelayTheNext(t *testing.T) {
	b := redistest.Mini(t)
	rc := b.Client(t)
	w := newWatchdog(rc, 600*time.Millisecond, false, nil)
	defer w.Close()
	hold(t, w, rc, "cadence", "o:1")
	dueAt := func() time.Time {
		w.mu.Lock()
		defer w.mu.Unlock()
		return w.wakeAt
	}
	const rounds = 6
	due := make([]time.Time, 0, rounds+1)
	due = append(due, dueAt())
	for range rounds {
		at, ticks := due[len(due)-1], w.Stats().Ticks
		time.Sleep(time.Until(at) - 2*time.Millisecond)
		w.mu.Lock()
		time.Sleep(20 * time.Millisecond)
		w.mu.Unlock()
		waitRounds(t, w, ticks+1)
		redistest.Eventually(t, 10*time.Second, "the next round was never scheduled", func() bool {
			return dueAt().After(at)
		})
		due = append(due, dueAt())
	}
	for i := 1; i < len(due); i++ {
		if gap := due[i].Sub(due[i-1]); gap != w.period {
			t.Errorf("round %d is due %v after the one before, which started 20ms late; want a period, %v", i, gap, w.period)
		}
	}
}

// A call's turn can outlive its hold: a renewal round may find the hold gone while an
// unlock that leaves the lock held is in flight (only a last unlock's turn keeps the round
// off its hold). What the call then says of the hold is about a hold that has ended, and
// changes nothing: the loss is counted once, and the owner's other holds are still its
// own, so that they are abandoned with it.
func TestTurnOutlivesItsHold(t *testing.T) {
	rc := redistest.Mini(t).Client(t)
	w := newWatchdog(rc, 30*time.Second, false, nil)
	defer w.Close()
	const who = "client:1"
	take := func(name string) context.Context {
		t.Helper()
		v, err := script.AcquireReply(nil, script.RLockAcquire().Exec(context.Background(), rc, []string{name, keys.Of(name).Wake}, []string{w.leaseMs, who, "", "0"}))
		if err != nil || v[0] != 1 {
			t.Fatalf("acquire %s: %v %v", name, v, err)
		}
		held, ok := w.Acquired(new(Context), context.Background(), Grant{Name: name, Owner: who, Who: who, Count: v[1],
			Sent: time.Now(), Lease: w.lease, Renew: true, Renewal: script.RLockRenew()})
		if !ok {
			t.Fatalf("hold of %s refused", name)
		}
		return held
	}
	a, b := take("a"), take("b")

	turn := w.Begin("a", who)
	if turn.Count != 1 {
		t.Fatalf("the turn on a knows %d holds, want 1", turn.Count)
	}
	w.Lost("a", who) // as a renewal round that found it gone
	turn.Lost()      // as the unlock that then found it not held
	turn.End()

	if cause := context.Cause(a); !errors.Is(cause, lockerr.ErrLeaseLost) {
		t.Errorf("a's context: %v, want ErrLeaseLost", cause)
	}
	if st := w.Stats(); st.Lost != 1 || st.Holds != 1 {
		t.Errorf("stats %+v: want the loss counted once and b still held", st)
	}
	w.Abandon(who)
	if st := w.Stats(); st.Abandoned != 1 || st.Holds != 0 {
		t.Errorf("stats %+v after the owner was abandoned: want b abandoned", st)
	}
	if b.Err() == nil {
		t.Error("b's context is live after its owner was abandoned")
	}
}

// The late requests left by an acquisition without a hold (LateLeft) are kept while a hold
// they take could still be in Redis, for the owner's next turn, and forgotten once it
// could not: an owner that never comes back leaves nothing in the table.
func TestLateLeftIsForgotten(t *testing.T) {
	b := redistest.Mini(t)
	rc := b.Client(t)
	const lease = 300 * time.Millisecond
	w := newWatchdog(rc, lease, false, nil)
	defer w.Close()
	w.LateLeft("late", "o:1", 1, lease)
	turn := w.Begin("late", "o:1")
	if turn.Late != 1 {
		t.Errorf("the owner's turn right after LateLeft has %d late requests; want 1", turn.Late)
	}
	turn.End()
	redistest.Eventually(t, 10*time.Second, "the late requests left were never forgotten", func() bool {
		w.mu.Lock()
		defer w.mu.Unlock()
		return len(w.lates) == 0
	})
	turn = w.Begin("late", "o:1")
	if turn.Late != 0 {
		t.Errorf("the owner's turn two leases on has %d late requests; want 0", turn.Late)
	}
	turn.End()
}

// Late requests count until a hold they took would have run out, counted from when they
// were sent, and passing from hold to hold does not move that: an owner that locks again
// and again does not carry a request that never ran (its unlocks would read the count
// for it) for as long as it lives.
func TestLateRequestsCountFromTheirSend(t *testing.T) {
	b := redistest.Mini(t)
	rc := b.Client(t)
	const lease = 300 * time.Millisecond
	w := newWatchdog(rc, lease, false, nil)
	defer w.Close()
	start := time.Now()
	w.LateLeft("late", "o:1", 1, lease)
	for time.Since(start) < 5*lease {
		turn := w.Begin("late", "o:1")
		late := turn.Late
		// A hold taken in the turn keeps them (Grant.Late), and leaves them when released.
		_, _ = w.Acquired(new(Context), context.Background(), Grant{Name: "late", Owner: "o:1", Who: "o:1", Count: 1,
			Sent: time.Now(), Lease: lease, Renewal: script.RLockRenew(), Late: late})
		turn.End()
		w.Released("late", "o:1")
		if late == 0 {
			return
		}
		if time.Since(start) > 3*lease {
			t.Fatalf("%v after the late request was sent, with the hold taken and released every 10ms, the owner's turn still counts %d late requests; want none past two leases", time.Since(start).Round(time.Millisecond), late)
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("the late requests never stopped counting")
}

// namesOnEveryNode returns n names, one on each master of a cluster (n is then their
// count), or n names of one server.
func namesOnEveryNode(t *testing.T, b *redistest.Backend, prefix string, n int) []string {
	t.Helper()
	if b.Cluster != nil {
		return b.Cluster.NamesOnEveryMaster(t, prefix)
	}
	var names []string
	for i := range n {
		names = append(names, prefix+strconv.Itoa(i))
	}
	return names
}

// The watchdog's statistics count every renewal call sent: a round after the servers lost
// their scripts (a restart, a failover, SCRIPT FLUSH) sends each of its calls twice, first
// met with NOSCRIPT and then sent again with EVAL, in a second round trip, on every master
// of a cluster alike; and the holds are renewed all the same.
func TestStatsCountTheCallsSentAgain(t *testing.T) {
	redistest.EachWithCluster(t, func(t *testing.T, b *redistest.Backend) {
		rc := b.Client(t)
		// A round every second: the scripts are flushed right after one round, long before
		// the next, on a loaded machine too.
		w := newWatchdog(rc, 3*time.Second, b.Cluster != nil, nil)
		defer w.Close()
		var ctxs []context.Context
		for _, name := range namesOnEveryNode(t, b, "resent-", 3) {
			ctxs = append(ctxs, hold(t, w, rc, name, "o:1"))
		}
		waitRounds(t, w, 1)
		plain := w.Stats()
		waitRounds(t, w, plain.Ticks+1)
		flushed := w.Stats()
		b.DoOnMasters(t, rc, "SCRIPT", "FLUSH")
		waitRounds(t, w, flushed.Ticks+1)
		after := w.Stats()
		calls := flushed.Calls - plain.Calls
		if got := after.Calls - flushed.Calls; got != 2*calls {
			t.Errorf("%d calls in the round after SCRIPT FLUSH; want %d, each of the round's %d calls sent twice", got, 2*calls, calls)
		}
		if got := after.Batches - flushed.Batches; got != 2 {
			t.Errorf("%d pipelined sends in the round after SCRIPT FLUSH; want 2, the calls and the calls sent again", got)
		}
		if got := after.Renewed - flushed.Renewed; got != uint64(len(ctxs)) {
			t.Errorf("%d renewals in the round after SCRIPT FLUSH; want %d, every hold", got, len(ctxs))
		}
		for _, ctx := range ctxs {
			if ctx.Err() != nil {
				t.Fatalf("a hold ended: %v", context.Cause(ctx))
			}
		}
	})
}

// A round renews each hold by its own call's answer: a hold lost in Redis (its key
// deleted) ends with ErrLeaseLost, and a hold of another slot, on another master of a
// cluster, answered in a round trip of its own, is renewed and stays live. A round that
// gave one slot's answer to another's holds would keep a lost hold's context live while
// Redis lets another owner in, and end a live one.
func TestRoundGivesEachSlotItsOwnAnswer(t *testing.T) {
	redistest.EachWithCluster(t, func(t *testing.T, b *redistest.Backend) {
		rc := b.Client(t)
		w := newWatchdog(rc, 3*time.Second, b.Cluster != nil, nil)
		defer w.Close()
		names := namesOnEveryNode(t, b, "answer-", 2)
		lost := hold(t, w, rc, names[0], "o:1")
		var live []context.Context
		for _, name := range names[1:] {
			live = append(live, hold(t, w, rc, name, "o:1"))
		}
		redistest.MustDo(t, rc, "DEL", names[0])
		before := w.Stats()
		select {
		case <-lost.Done():
		case <-time.After(10 * time.Second):
			t.Fatal("the hold whose key was deleted was not found lost within 10s")
		}
		if !errors.Is(context.Cause(lost), lockerr.ErrLeaseLost) {
			t.Errorf("the deleted hold ended with %v; want ErrLeaseLost", context.Cause(lost))
		}
		// One more round, or a live hold ending (which leaves no round to wait for).
		next := w.Stats().Ticks + 1
		redistest.Eventually(t, 10*time.Second, "a renewal round after the lost hold ended", func() bool {
			for _, ctx := range live {
				if ctx.Err() != nil {
					return true
				}
			}
			return w.Stats().Ticks >= next
		})
		for i, ctx := range live {
			if ctx.Err() != nil {
				t.Errorf("%s, held in Redis, ended: %v", names[i+1], context.Cause(ctx))
			}
		}
		if got := w.Stats().Renewed - before.Renewed; got < uint64(len(live)) {
			t.Errorf("%d renewals of the %d live holds", got, len(live))
		}
	})
}
