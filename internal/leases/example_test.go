package leases_test

import (
	"context"
	"fmt"
	"log"
	"strconv"
	"time"

	"github.com/redis/rueidis"

	"github.com/relock-go/relock/embedded"
	"github.com/relock-go/relock/internal/keys"
	"github.com/relock-go/relock/internal/leases"
	"github.com/relock-go/relock/internal/redistest"
	"github.com/relock-go/relock/internal/script"
)

// waitUntil polls cond, which the example's goroutines or the watchdog make true: the
// examples wait on what they can observe, never on a fixed sleep.
func waitUntil(what string, cond func() bool) {
	if !redistest.Await(30*time.Second, cond) {
		log.Fatalf("not within 30s: %s", what)
	}
}

// acquire runs the reentrant lock's acquire script for owner, as rlock does, and returns
// the grant for the leases. fencing adds the lock's token counter.
func acquire(rc rueidis.Client, name, owner string, lease time.Duration, fencing bool) leases.Grant {
	names := keys.Of(name)
	ks := []string{name, names.Wake}
	if fencing {
		ks = append(ks, names.Token)
	}
	sent := time.Now() // before the request: the local deadline must not lie past Redis's
	reply, err := script.AcquireReply(nil, script.RLockAcquire().Exec(context.Background(), rc, ks,
		[]string{strconv.FormatInt(lease.Milliseconds(), 10), owner, "", "0"}))
	if err != nil || reply[0] != 1 {
		log.Fatalf("acquire %s for %s: %v %v", name, owner, reply, err)
	}
	return leases.Grant{Name: name, Owner: owner, Count: reply[1], Token: reply[2], Fenced: fencing,
		Sent: sent, Lease: lease, Renewal: script.RLockRenew()}
}

// A lock package's use of the watchdog, done by hand: the acquire script grants the lock,
// Acquired hands the hold over, and the watchdog renews it until it is lost. Here its key
// is deleted, as an operator's force unlock would, and the next renewal finds the owner
// gone: the hold's context ends with the cause the holder can act on.
func ExampleWatchdog() {
	srv, err := embedded.Start()
	if err != nil {
		log.Fatal(err)
	}
	defer srv.Close()
	rc := srv.Redis()
	ctx := context.Background()

	const lease = 1500 * time.Millisecond // renewed every 500ms
	w := leases.New(rc, lease, nil, nil)
	defer w.Close()

	g := acquire(rc, "orders", "client-a:1", lease, false)
	g.Renew = true
	held, _ := w.Acquired(new(leases.Context), ctx, g)

	waitUntil("a renewal", func() bool { return w.Stats().Renewed > 0 })
	fmt.Println("renewed, still held:", held.Err() == nil)

	if err := rc.Do(ctx, rc.B().Del().Key("orders").Build()).Error(); err != nil {
		log.Fatal(err)
	}
	select {
	case <-held.Done():
	case <-time.After(30 * time.Second):
		log.Fatal("the lost hold's context did not end")
	}
	fmt.Println("cause:", context.Cause(held))
	st := w.Stats()
	fmt.Println("holds:", st.Holds, "lost:", st.Lost)
	// Output:
	// renewed, still held: true
	// cause: lease lost
	// holds: 0 lost: 1
}

// A Grant with a fixed lease (Renew false) is never renewed: its hold ends by itself at the
// local deadline, counted from when the acquiring request was sent, so the holder stops
// no later than Redis lets the key expire. A fenced grant keeps its token for the holder.
func ExampleGrant() {
	srv, err := embedded.Start()
	if err != nil {
		log.Fatal(err)
	}
	defer srv.Close()
	rc := srv.Redis()

	w := leases.New(rc, 30*time.Second, nil, nil)
	defer w.Close()

	g := acquire(rc, "ledger", "client-a:1", 300*time.Millisecond, true)
	held, _ := w.Acquired(new(leases.Context), context.Background(), g)
	token, ok := w.Token("ledger", "client-a:1")
	fmt.Println("token:", token, ok)

	select {
	case <-held.Done():
	case <-time.After(30 * time.Second):
		log.Fatal("the hold's context did not end at its lease")
	}
	fmt.Println("cause:", context.Cause(held))
	st := w.Stats()
	fmt.Println("renewal calls:", st.Calls, "lost:", st.Lost)
	// Output:
	// token: 1 true
	// cause: lease lost
	// renewal calls: 0 lost: 1
}

// A Hold is the client's record of one owner's hold, kept in step with what the scripts
// answer: a re-entry joins it (and, from the hold's context, gets that context back), an
// unlock that leaves the lock held lowers its count, and the last unlock ends it and
// cancels its context.
func ExampleHold() {
	srv, err := embedded.Start()
	if err != nil {
		log.Fatal(err)
	}
	defer srv.Close()
	rc := srv.Redis()
	ctx := context.Background()
	const owner = "client-a:1"

	w := leases.New(rc, 30*time.Second, nil, nil)
	defer w.Close()
	lock := func(parent context.Context) context.Context {
		g := acquire(rc, "orders", owner, 30*time.Second, false)
		g.Renew = true
		held, _ := w.Acquired(new(leases.Context), parent, g)
		return held
	}
	// An unlock runs in the owner's turn, so that the count it expects stays the count
	// in Redis; it tells the watchdog what it did before the turn ends.
	unlock := func() {
		turn := w.Begin("orders", owner)
		defer turn.End()
		n, err := script.RLockUnlock().Exec(ctx, rc, []string{"orders", "redisson_lock__channel:{orders}", "relock_wake:{orders}"},
			[]string{"0", owner, strconv.FormatInt(turn.Count, 10), "publish"}).AsInt64()
		switch {
		case err != nil:
			log.Fatal(err)
		case n == 0: // still held
			turn.Unlocked()
		default: // released
			turn.Released()
		}
	}

	// The count the client knows, read in the owner's turn.
	count := func() int64 {
		turn := w.Begin("orders", owner)
		defer turn.End()
		return turn.Count
	}

	held := lock(ctx)
	again := lock(held)
	fmt.Println("re-entry gets the same context:", again == held, "count:", count())

	unlock()
	fmt.Println("after one unlock:", count(), "context live:", held.Err() == nil)

	unlock()
	fmt.Println("after the last unlock:", count(), "context:", held.Err())
	// Output:
	// re-entry gets the same context: true count: 2
	// after one unlock: 1 context live: true
	// after the last unlock: 0 context: context canceled
}

// Stats shows the batching: one renewal round renews 150 holds with two script calls of
// at most 100 locks each, sent together in one round trip.
func Example_stats() {
	srv, err := embedded.Start()
	if err != nil {
		log.Fatal(err)
	}
	defer srv.Close()
	rc := srv.Redis()
	ctx := context.Background()

	// A fresh server has not seen the renewal script: its first round would answer
	// NOSCRIPT and be sent again as EVAL, two more calls. Loading it keeps rounds alike.
	if err := rc.Do(ctx, rc.B().ScriptLoad().Script(script.RLockRenew().Source).Build()).Error(); err != nil {
		log.Fatal(err)
	}
	const lease = 6 * time.Second // renewed every two seconds
	// The locks are taken first, so that the watchdog learns of all of them at once, well
	// within its first period, however slow the machine is to take them.
	grants := make([]leases.Grant, 150)
	for i := range grants {
		grants[i] = acquire(rc, "job:"+strconv.Itoa(i), "client-a:1", lease, false)
		grants[i].Renew = true
	}
	w := leases.New(rc, lease, nil, nil)
	for _, g := range grants {
		_, _ = w.Acquired(new(leases.Context), ctx, g)
	}
	waitUntil("a round of renewals", func() bool { return w.Stats().Renewed >= 150 })
	holds := w.Stats().Holds
	w.Close() // the counters stop moving
	st := w.Stats()
	fmt.Println("holds:", holds)
	fmt.Println("script calls per round:", st.Calls/st.Ticks, "round trips per round:", st.Batches/st.Ticks)
	// Output:
	// holds: 150
	// script calls per round: 2 round trips per round: 1
}
