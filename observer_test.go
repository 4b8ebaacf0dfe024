package relock_test

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/relock-go/relock"
	"github.com/relock-go/relock/internal/redistest"
	"github.com/relock-go/relock/internal/redistest/relocktest"
	"github.com/relock-go/relock/observe"
	"github.com/relock-go/relock/rlock"
)

// recorder is an observer that keeps every event.
type recorder struct {
	mu          sync.Mutex
	acquired    []observe.Acquisition
	released    []observe.Hold
	lost        []observe.Hold
	abandoned   []observe.Hold
	failed      []error
	recovered   []time.Duration
	reconnected []time.Duration
}

func (r *recorder) Acquired(e observe.Acquisition) {
	r.mu.Lock()
	r.acquired = append(r.acquired, e)
	r.mu.Unlock()
}
func (r *recorder) Released(e observe.Hold) {
	r.mu.Lock()
	r.released = append(r.released, e)
	r.mu.Unlock()
}
func (r *recorder) LeaseLost(e observe.Hold) { r.mu.Lock(); r.lost = append(r.lost, e); r.mu.Unlock() }
func (r *recorder) Abandoned(e observe.Hold) {
	r.mu.Lock()
	r.abandoned = append(r.abandoned, e)
	r.mu.Unlock()
}
func (r *recorder) RenewalFailed(err error) {
	r.mu.Lock()
	r.failed = append(r.failed, err)
	r.mu.Unlock()
}
func (r *recorder) RenewalRecovered(d time.Duration) {
	r.mu.Lock()
	r.recovered = append(r.recovered, d)
	r.mu.Unlock()
}
func (r *recorder) Reconnected(d time.Duration) {
	r.mu.Lock()
	r.reconnected = append(r.reconnected, d)
	r.mu.Unlock()
}

// snapshot returns a copy of the recorder under its lock.
func (r *recorder) snapshot() recorder {
	r.mu.Lock()
	defer r.mu.Unlock()
	return recorder{acquired: append([]observe.Acquisition(nil), r.acquired...), released: append([]observe.Hold(nil), r.released...),
		lost: append([]observe.Hold(nil), r.lost...), abandoned: append([]observe.Hold(nil), r.abandoned...),
		failed: append([]error(nil), r.failed...), recovered: append([]time.Duration(nil), r.recovered...),
		reconnected: append([]time.Duration(nil), r.reconnected...)}
}

// reset forgets the events heard so far.
func (r *recorder) reset() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.acquired, r.released, r.lost, r.abandoned = nil, nil, nil, nil
	r.failed, r.recovered, r.reconnected = nil, nil, nil
}

// within fails t unless lo <= d <= hi.
func within(t *testing.T, what string, d, lo, hi time.Duration) {
	t.Helper()
	if d < lo || d > hi {
		t.Errorf("%s = %v; want between %v and %v", what, d, lo, hi)
	}
}

// The observer hears each acquisition with the time its caller was blocked and what ended
// the wait, and each release with the time the lock was held: the values match what the
// callers saw, measured around their calls.
func TestObserverWaitAndHoldTimes(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		rec := &recorder{}
		c := relocktest.New(t, b, relock.WithObserver(rec))
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		mu := c.Lock("observe:times")

		holdStart := time.Now()
		held, err := mu.Lock(ctx)
		if err != nil {
			t.Fatal(err)
		}
		firstCall := time.Since(holdStart)

		const blocked = 300 * time.Millisecond
		type result struct {
			took time.Duration
			err  error
		}
		done := make(chan result, 1)
		waitStart := time.Now()
		go func() {
			w, err := mu.Lock(relock.NewOwner(ctx))
			took := time.Since(waitStart)
			if err == nil {
				err = mu.Unlock(w)
			}
			done <- result{took, err}
		}()
		redistest.Eventually(t, 10*time.Second, "the waiter never parked", func() bool { return relocktest.Waiting(c) == 1 })
		time.Sleep(blocked) // the waiter was blocked at least this long
		if err := mu.Unlock(held); err != nil {
			t.Fatal(err)
		}
		holdEnd := time.Since(holdStart)
		res := redistest.Recv(t, done, 20*time.Second, "the waiter's Lock")
		if res.err != nil {
			t.Fatal(res.err)
		}

		ev := rec.snapshot()
		if len(ev.acquired) != 2 || len(ev.released) != 2 {
			t.Fatalf("heard %d acquisitions and %d releases; want 2 and 2", len(ev.acquired), len(ev.released))
		}
		first, second := ev.acquired[0], ev.acquired[1]
		for _, a := range ev.acquired {
			if a.Lock != "observe:times" || a.Kind != observe.Lock || a.Count != 1 || !strings.HasPrefix(a.Owner, c.ID()+":") {
				t.Errorf("acquisition %+v: want lock observe:times, kind lock, count 1, an owner of client %s", a, c.ID())
			}
		}
		if first.Woken != observe.NotWaited {
			t.Errorf("the uncontended acquisition was %v; want not waited", first.Woken)
		}
		within(t, "the uncontended acquisition's wait", first.Wait, 0, firstCall)
		if second.Woken != observe.ByHandoff {
			t.Errorf("the waiter of the unlocking client heard %v; want handoff: the unlock hands it the lock", second.Woken)
		}
		within(t, "the waiter's wait", second.Wait, blocked, res.took)
		if first.Owner == second.Owner {
			t.Errorf("holder and waiter reported the same owner %s", first.Owner)
		}
		// The two releases may be heard in either order: the woken waiter can take the lock,
		// unlock it and report that before the holder's goroutine, past its Unlock's reply,
		// reports its own (a loaded machine showed it).
		var rel *observe.Hold
		for i, r := range ev.released {
			if r.Lock != "observe:times" || r.Kind != observe.Lock || r.Owner != first.Owner && r.Owner != second.Owner {
				t.Errorf("release %+v; want lock observe:times, kind lock, the holder's or the waiter's owner", r)
			}
			if r.Owner == first.Owner {
				rel = &ev.released[i]
			}
		}
		if rel == nil {
			t.Fatalf("releases %+v; none is the holder's (%s)", ev.released, first.Owner)
		}
		within(t, "the holder's hold time", rel.Held, blocked, holdEnd)
	})
}

// A re-entry is heard as an acquisition with the owner's hold count after it (observe:
// "1 for a first hold, more for a re-entry"), and only the Unlock of the owner's last hold
// is heard as a release.
func TestObserverHearsReentries(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		rec := &recorder{}
		c := relocktest.New(t, b, relock.WithObserver(rec))
		ctx := redistest.Context(t, 30*time.Second)
		mu := c.Lock("observe:reentry")
		held, err := mu.Lock(ctx)
		if err != nil {
			t.Fatal(err)
		}
		again, err := mu.Lock(held)
		if err != nil {
			t.Fatal(err)
		}
		if err := mu.Unlock(again); err != nil {
			t.Fatal(err)
		}
		if ev := rec.snapshot(); len(ev.released) != 0 {
			t.Errorf("heard releases %+v after the Unlock of one of two holds; want none", ev.released)
		}
		if err := mu.Unlock(held); err != nil {
			t.Fatal(err)
		}
		ev := rec.snapshot()
		if len(ev.acquired) != 2 || ev.acquired[0].Count != 1 || ev.acquired[1].Count != 2 {
			t.Errorf("acquisitions %+v; want two, with hold counts 1 and 2", ev.acquired)
		} else if ev.acquired[0].Owner != ev.acquired[1].Owner || ev.acquired[1].Woken != observe.NotWaited {
			t.Errorf("the re-entry %+v: want the first hold's owner %s, not waited", ev.acquired[1], ev.acquired[0].Owner)
		}
		if len(ev.released) != 1 || ev.released[0].Owner != ev.acquired[0].Owner {
			t.Errorf("releases %+v; want one, of the owner's last hold", ev.released)
		}
	})
}

// A waiter woken by another client's unlock, and then got the lock by its own attempt, is
// reported woken by a message.
func TestObserverWokenByMessage(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		rec := &recorder{}
		holder, c := relocktest.New(t, b), relocktest.New(t, b, relock.WithObserver(rec))
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		held, err := holder.Lock("observe:message").Lock(ctx)
		if err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() {
			w, err := c.Lock("observe:message").Lock(ctx)
			if err == nil {
				err = c.Lock("observe:message").Unlock(w)
			}
			done <- err
		}()
		redistest.Eventually(t, 10*time.Second, "the waiter never parked", func() bool { return relocktest.Waiting(c) == 1 })
		if err := holder.Lock("observe:message").Unlock(held); err != nil {
			t.Fatal(err)
		}
		if err := redistest.Recv(t, done, 20*time.Second, "the waiter's Lock"); err != nil {
			t.Fatal(err)
		}
		ev := rec.snapshot()
		if len(ev.acquired) != 1 {
			t.Fatalf("heard %d acquisitions; want 1", len(ev.acquired))
		}
		if got := ev.acquired[0].Woken; got != observe.ByMessage {
			t.Errorf("the waiter woken by another client's unlock heard %v; want message", got)
		}
	})
}

// A waiter whose wait ends because the holder's fixed lease ran out, with no unlock
// message, is reported woken by the lease.
func TestObserverWokenByLease(t *testing.T) {
	t.Parallel()
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		rec := &recorder{}
		c := relocktest.New(t, b, relock.WithObserver(rec))
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if _, err := c.Lock("observe:lease", rlock.WithLease(time.Second)).Lock(ctx); err != nil { // never unlocked
			t.Fatal(err)
		}
		start := time.Now()
		w, err := c.Lock("observe:lease").Lock(relock.NewOwner(ctx))
		took := time.Since(start)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Lock("observe:lease").Unlock(w)
		ev := rec.snapshot()
		if len(ev.acquired) != 2 {
			t.Fatalf("heard %d acquisitions; want 2", len(ev.acquired))
		}
		if got := ev.acquired[1]; got.Woken != observe.ByLease {
			t.Errorf("the waiter after a lease ran out heard %v; want lease", got.Woken)
		}
		within(t, "its wait", ev.acquired[1].Wait, 0, took)
	})
}

// A hold found lost is reported with its lock and how long it was held; so is an
// abandoned one.
func TestObserverLostAndAbandoned(t *testing.T) {
	t.Parallel()
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		rec := &recorder{}
		c := relocktest.New(t, b, relock.WithObserver(rec), relock.WithWatchdogTimeout(abandonLease))
		ctx := context.Background() // the abandoned hold's: nothing else may keep it reachable
		start := time.Now()
		held, err := c.Lock("observe:lost").Lock(redistest.Context(t, time.Minute))
		if err != nil {
			t.Fatal(err)
		}
		redistest.MustDo(t, b.Client(t), "DEL", "observe:lost")
		select {
		case <-held.Done():
		case <-time.After(2 * abandonLease):
			t.Fatal("the hold's context did not end after its key was deleted")
		}
		took := time.Since(start)
		if !errors.Is(context.Cause(held), relock.ErrLeaseLost) {
			t.Errorf("cause %v; want ErrLeaseLost", context.Cause(held))
		}
		ev := rec.snapshot()
		if len(ev.lost) != 1 || ev.lost[0].Lock != "observe:lost" || ev.lost[0].Kind != observe.Lock {
			t.Fatalf("heard lost %+v; want the one hold of observe:lost", ev.lost)
		}
		within(t, "the lost hold's time", ev.lost[0].Held, 0, took)
		if len(ev.released) != 0 {
			t.Errorf("a lost hold was also reported released: %+v", ev.released)
		}

		func() {
			if _, err := c.RWLock("observe:abandoned").Lock(ctx); err != nil {
				t.Fatal(err)
			}
		}()
		collect(t, "the dropped hold was never reported abandoned", func() bool { return len(rec.snapshot().abandoned) == 1 })
		if got := rec.snapshot().abandoned[0]; got.Lock != "observe:abandoned" || got.Kind != observe.Write {
			t.Errorf("abandoned %+v; want the write hold of observe:abandoned", got)
		}
		if got := rec.snapshot().released; len(got) != 0 {
			t.Errorf("a lost or abandoned hold was reported released: %+v", got)
		}
	})
}

// Renewals failing, and their recovery with how long they failed, and the subscriber
// connection coming back with how long it was down, are heard once each per episode.
func TestObserverRenewalsAndReconnects(t *testing.T) {
	t.Parallel()
	redistest.Real(t, func(t *testing.T, b *redistest.Backend) {
		rec := &recorder{}
		c := relocktest.New(t, b, relock.WithObserver(rec), relock.WithWatchdogTimeout(6*time.Second))
		ctx := redistest.Context(t, 2*time.Minute)
		held, err := c.Lock("observe:renew").Lock(ctx)
		if err != nil {
			t.Fatal(err)
		}
		// Paused for more than a renewal period (2s) and less than the lease: a round fails.
		pause := time.Now()
		b.Server.Pause(t)
		redistest.Eventually(t, 10*time.Second, "no renewal failure heard while Redis was paused", func() bool {
			return len(rec.snapshot().failed) > 0
		})
		b.Server.Resume(t)
		redistest.Eventually(t, 10*time.Second, "no recovery heard after Redis came back", func() bool {
			return len(rec.snapshot().recovered) > 0
		})
		ev := rec.snapshot()
		if len(ev.failed) != 1 || len(ev.recovered) != 1 {
			t.Errorf("heard %d failures and %d recoveries; want one of each for one outage", len(ev.failed), len(ev.recovered))
		}
		within(t, "the renewals' time down", ev.recovered[0], time.Millisecond, time.Since(pause))
		if err := held.Err(); err != nil {
			t.Fatalf("the hold ended over a pause shorter than its lease: %v", context.Cause(held))
		}

		// The subscriber connection: wait for it (a parked waiter uses it), then cut it.
		waiting := make(chan error, 1)
		wctx, cancel := context.WithTimeout(ctx, 20*time.Second)
		defer cancel()
		go func() {
			w, err := c.Lock("observe:renew").Lock(relock.NewOwner(wctx))
			if err == nil {
				err = c.Lock("observe:renew").Unlock(w)
			}
			waiting <- err
		}()
		redistest.Eventually(t, 10*time.Second, "the waiter never parked", func() bool { return relocktest.Waiting(c) == 1 })
		// The pause may have cost the subscriber connection too (a loaded machine notices
		// a silent server sooner): that reconnect is the pause's, not the cut's.
		before := len(rec.snapshot().reconnected)
		cut := time.Now()
		redistest.MustDo(t, b.Client(t), "CLIENT", "KILL", "TYPE", "pubsub")
		redistest.Eventually(t, 10*time.Second, "no reconnect heard after the subscriber connection was cut", func() bool {
			return len(rec.snapshot().reconnected) > before
		})
		within(t, "the subscriber's time down", rec.snapshot().reconnected[before], 0, time.Since(cut))
		if err := c.Lock("observe:renew").Unlock(held); err != nil {
			t.Fatal(err)
		}
		if err := redistest.Recv(t, waiting, 20*time.Second, "the waiter"); err != nil {
			t.Fatal(err)
		}
	})
}

// An acquisition that did not wait reports as its wait the round trip of its attempt
// (observe: "the round trip alone when it did not wait"). The attempt is held at a proxy
// for a known time, which the wait must cover. Guards against a wait clock started after
// the first attempt, which reports only the time parked.
func TestObserverWaitCoversTheRoundTrip(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		rec := &recorder{}
		proxy := redistest.StartProxy(t, b.Addr)
		c := relocktest.New(t, &redistest.Backend{Name: b.Name, Addr: proxy.Addr()}, relock.WithObserver(rec))
		ctx := redistest.Context(t, 30*time.Second)
		mu := c.Lock("observe:roundtrip")
		arrived, release := proxy.HoldRequest("observe:roundtrip") // the acquire script names the lock
		defer release()
		const delayed = 300 * time.Millisecond
		type result struct {
			took time.Duration
			err  error
		}
		done := make(chan result, 1)
		go func() {
			start := time.Now()
			held, err := mu.Lock(ctx)
			took := time.Since(start)
			if err == nil {
				err = mu.Unlock(held)
			}
			done <- result{took, err}
		}()
		redistest.Recv(t, arrived, 10*time.Second, "the acquire request at the proxy")
		time.Sleep(delayed)
		release()
		res := redistest.Recv(t, done, 20*time.Second, "the Lock whose request was held")
		if res.err != nil {
			t.Fatal(res.err)
		}
		ev := rec.snapshot()
		if len(ev.acquired) != 1 || ev.acquired[0].Woken != observe.NotWaited {
			t.Fatalf("acquisitions %+v; want one, not waited", ev.acquired)
		}
		within(t, "the wait of an acquisition whose request was held", ev.acquired[0].Wait, delayed, res.took)
	})
}

// Every kind of hold is heard under its kind, released by its owner: the owner its
// acquisition reported ("<client id>:<n>", the read-write lock's write hold included,
// whose hash field adds ":write"), and a semaphore's lease as kind "lease" with no
// acquisition (docs/operations.md: a hold duration, but no wait). A hold that Close
// releases is heard released too (the otel observer records every hold's end).
func TestObserverHoldsOfEveryKind(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		rec := &recorder{}
		c := relocktest.New(t, b, relock.WithObserver(rec))
		ctx := redistest.Context(t, 30*time.Second)
		rw := c.RWLock("observe:rw")
		for _, side := range []struct {
			kind   observe.Kind
			lock   func(context.Context) (context.Context, error)
			unlock func(context.Context) error
		}{
			{observe.Write, func(ctx context.Context) (context.Context, error) { return rw.Lock(ctx) }, rw.Unlock},
			{observe.Read, func(ctx context.Context) (context.Context, error) { return rw.RLock(ctx) }, rw.RUnlock},
		} {
			held, err := side.lock(relock.NewOwner(ctx))
			if err != nil {
				t.Fatal(err)
			}
			if err := side.unlock(held); err != nil {
				t.Fatal(err)
			}
			ev := rec.snapshot()
			if len(ev.acquired) != 1 || len(ev.released) != 1 {
				t.Fatalf("%s: heard acquisitions %+v and releases %+v; want one of each", side.kind, ev.acquired, ev.released)
			}
			a, r := ev.acquired[0], ev.released[0]
			if a.Lock != "observe:rw" || a.Kind != side.kind || !strings.HasPrefix(a.Owner, c.ID()+":") {
				t.Errorf("%s: acquisition %+v; want lock observe:rw, kind %s, an owner of client %s", side.kind, a, side.kind, c.ID())
			}
			if r.Lock != "observe:rw" || r.Kind != side.kind || r.Owner != a.Owner {
				t.Errorf("%s: release %+v; want lock observe:rw, kind %s, the acquisition's owner %s", side.kind, r, side.kind, a.Owner)
			}
			rec.reset()
		}

		sem := c.Semaphore("observe:sem")
		if _, err := sem.TrySetPermits(ctx, 2); err != nil {
			t.Fatal(err)
		}
		lease, err := sem.AcquireLease(ctx, 1)
		if err != nil {
			t.Fatal(err)
		}
		if err := sem.ReleaseLease(lease); err != nil {
			t.Fatal(err)
		}
		ev := rec.snapshot()
		if len(ev.acquired) != 0 {
			t.Errorf("a semaphore's lease was heard acquired: %+v; want no acquisition", ev.acquired)
		}
		if len(ev.released) != 1 || ev.released[0].Lock != "observe:sem" || ev.released[0].Kind != observe.Lease ||
			!strings.HasPrefix(ev.released[0].Owner, c.ID()+":") {
			t.Errorf("releases %+v; want one, of observe:sem, kind lease, an owner of client %s", ev.released, c.ID())
		}
		rec.reset()

		closing := relocktest.New(t, b, relock.WithObserver(rec))
		held, err := closing.Lock("observe:close").Lock(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if err := closing.Close(); err != nil {
			t.Fatal(err)
		}
		if !errors.Is(context.Cause(held), relock.ErrClosed) {
			t.Fatalf("the hold's context after Close: cause %v; want ErrClosed", context.Cause(held))
		}
		if ev := rec.snapshot(); len(ev.released) != 1 || ev.released[0].Lock != "observe:close" || ev.released[0].Kind != observe.Lock {
			t.Errorf("releases %+v after Close; want the one hold of observe:close", ev.released)
		}
	})
}

// The subscriber connection's return is heard with how long it was lost (observe: "down
// is how long it was lost"). Here its subscriptions are refused (an ACL without SUBSCRIBE)
// for a known time after the connection is cut, and the time reported must cover it; the
// other tests' outages are too short to tell a time down from none.
func TestObserverReconnectTimeDown(t *testing.T) {
	redistest.Real(t, func(t *testing.T, b *redistest.Backend) {
		admin := b.Client(t)
		redistest.MustDo(t, admin, "ACL", "SETUSER", "observed", "on", ">observed-pass", "~*", "&*", "+@all")
		rc := b.ClientWith(t, func(o *rueidis.ClientOption) { o.Username, o.Password = "observed", "observed-pass" })
		rec, logs := &recorder{}, &records{}
		c, err := relock.New(rc, relock.WithObserver(rec), relock.WithLogger(slog.New(logs)))
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		holder := relocktest.New(t, b)
		ctx := redistest.Context(t, time.Minute)
		held, err := holder.Lock("observe:down").Lock(ctx)
		if err != nil {
			t.Fatal(err)
		}
		waiting := make(chan error, 1)
		go func() {
			w, err := c.Lock("observe:down").Lock(relock.NewOwner(ctx))
			if err == nil {
				err = c.Lock("observe:down").Unlock(w)
			}
			waiting <- err
		}()
		redistest.Eventually(t, 10*time.Second, "the waiter never parked", func() bool { return relocktest.Waiting(c) == 1 })

		redistest.MustDo(t, admin, "ACL", "SETUSER", "observed", "-subscribe")
		cut := time.Now()
		redistest.MustDo(t, admin, "CLIENT", "KILL", "TYPE", "pubsub")
		// The client knows its subscriber is down once it says so: from then on, it stays
		// down for as long as SUBSCRIBE is refused.
		redistest.Eventually(t, 10*time.Second, "the subscriber's loss never logged", func() bool {
			return logs.index("WARN relock: subscriber connection down") >= 0
		})
		const refusedFor = time.Second
		time.Sleep(refusedFor)
		redistest.MustDo(t, admin, "ACL", "SETUSER", "observed", "+subscribe")
		redistest.Eventually(t, 15*time.Second, "no reconnect heard", func() bool { return len(rec.snapshot().reconnected) > 0 })
		ev := rec.snapshot()
		if len(ev.reconnected) != 1 {
			t.Errorf("heard %d reconnects for one loss; want 1", len(ev.reconnected))
		}
		within(t, "the subscriber's time down", ev.reconnected[0], refusedFor, time.Since(cut))

		if err := holder.Lock("observe:down").Unlock(held); err != nil {
			t.Fatal(err)
		}
		if err := redistest.Recv(t, waiting, 20*time.Second, "the waiter"); err != nil {
			t.Fatal(err)
		}
	})
}
