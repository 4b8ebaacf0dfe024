package rwlock_test

import (
	"context"
	"errors"
	"math"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/relock-go/relock"
	"github.com/relock-go/relock/internal/redistest"
	"github.com/relock-go/relock/internal/redistest/relocktest"
	"github.com/relock-go/relock/rlock"
	"github.com/relock-go/relock/rwlock"
)

// readers returns the reader fields of the lock's hash (every field but mode and the
// writers' "<owner>:write") with their counts.
func readers(t *testing.T, rc rueidis.Client, name string) map[string]string {
	t.Helper()
	fields, err := redistest.Do(t, rc, "HGETALL", name).AsStrMap()
	if err != nil {
		t.Fatalf("HGETALL %s: %v", name, err)
	}
	for f := range fields {
		if f == "mode" || strings.HasSuffix(f, ":write") {
			delete(fields, f)
		}
	}
	return fields
}

// onlyReader returns the one reader field of the lock's hash: the reader's owner.
func onlyReader(t *testing.T, rc rueidis.Client, name string) string {
	t.Helper()
	rs := readers(t, rc, name)
	if len(rs) != 1 {
		t.Fatalf("readers of %s: %v; want one", name, rs)
	}
	for f := range rs {
		return f
	}
	return ""
}

// timeoutKey is the timeout key of read hold k of owner on lock name.
func timeoutKey(name, owner string, k int) string {
	return "{" + name + "}:" + owner + ":rwlock_timeout:" + strconv.Itoa(k)
}

// A reader re-enters: its count goes to 2, each hold has a timeout key of its own (:1 and
// :2), and each release takes the newest one away. A re-entering reader never gives way
// to a waiting writer, even under writer preference.
func TestReadReentry(t *testing.T) {
	t.Parallel()
	redistest.EachWithCluster(t, func(t *testing.T, b *redistest.Backend) {
		c := relocktest.New(t, b)
		side := b.Client(t)
		ctx := redistest.Context(t, time.Minute)
		mu := c.RWLock("again", rwlock.WithWriterPreference())
		r, err := mu.RLock(ctx)
		if err != nil {
			t.Fatal(err)
		}
		owner := onlyReader(t, side, "again")

		// A writer comes and waits (registered as waiting: writer preference).
		wrote := startWaitingWriter(t, mu, side)
		if _, err := mu.TryRLock(relock.NewOwner(ctx)); !errors.Is(err, relock.ErrLocked) {
			t.Errorf("a new reader while a writer waits: %v; want ErrLocked", err)
		}

		if r, err = mu.TryRLock(r); err != nil {
			t.Fatalf("the reader re-entering while a writer waits: %v", err)
		}
		if n, err := mu.RHoldCount(r); n != 2 || err != nil {
			t.Errorf("RHoldCount = %d, %v; want 2", n, err)
		}
		if n, err := mu.HoldCount(r); n != 0 || err != nil {
			t.Errorf("HoldCount of a reader = %d, %v; want 0", n, err)
		}
		if n, _ := redistest.Do(t, side, "HGET", "again", owner).AsInt64(); n != 2 {
			t.Errorf("hash field %s = %d; want 2", owner, n)
		}
		for k := 1; k <= 2; k++ {
			if p := redistest.PTTL(t, side, timeoutKey("again", owner, k)); p <= 0 {
				t.Errorf("timeout key :%d: PTTL %d; want > 0", k, p)
			}
		}
		if p := redistest.PTTL(t, side, timeoutKey("again", owner, 3)); p != -2 {
			t.Errorf("timeout key :3: PTTL %d; want -2 (no such key)", p)
		}

		// Each release removes the newest hold's key.
		if err := mu.RUnlock(r); err != nil {
			t.Fatal(err)
		}
		if n, _ := mu.RHoldCount(r); n != 1 {
			t.Errorf("RHoldCount after one release = %d; want 1", n)
		}
		if p := redistest.PTTL(t, side, timeoutKey("again", owner, 2)); p != -2 {
			t.Errorf("timeout key :2 after one release: PTTL %d; want -2 (deleted)", p)
		}
		if p := redistest.PTTL(t, side, timeoutKey("again", owner, 1)); p <= 0 {
			t.Errorf("timeout key :1 after one release: PTTL %d; want > 0", p)
		}
		select {
		case err := <-wrote:
			t.Fatalf("the writer finished while a read hold was left: %v", err)
		default:
		}
		if err := mu.RUnlock(r); err != nil {
			t.Fatal(err)
		}
		if err := redistest.Recv(t, wrote, 30*time.Second, "the writer's turn"); err != nil {
			t.Fatalf("the writer after the reader left: %v", err)
		}
		if p := redistest.PTTL(t, side, timeoutKey("again", owner, 1)); p != -2 {
			t.Errorf("timeout key :1 after the last release: PTTL %d; want -2 (deleted)", p)
		}
		if err := mu.RUnlock(r); !errors.Is(err, relock.ErrNotHeld) {
			t.Errorf("a third RUnlock: %v; want ErrNotHeld", err)
		}
	})
}

// The watchdog renews a reader's hash and the timeout key of every read hold: after 2.5
// leases both of a re-entered reader's timeout keys are still there.
func TestReadTimeoutKeysRenewed(t *testing.T) {
	t.Parallel()
	const lease = 1500 * time.Millisecond
	redistest.EachWithCluster(t, func(t *testing.T, b *redistest.Backend) {
		c := relocktest.New(t, b, relock.WithWatchdogTimeout(lease))
		side := b.Client(t)
		mu := c.RWLock("renewed")
		held, err := mu.RLock(redistest.Context(t, time.Minute))
		if err != nil {
			t.Fatal(err)
		}
		if held, err = mu.RLock(held); err != nil {
			t.Fatal(err)
		}
		owner := onlyReader(t, side, "renewed")
		before := c.WatchdogStats()
		time.Sleep(lease * 5 / 2) // each key was set to expire after one lease
		if held.Err() != nil {
			t.Fatalf("read hold lost while renewed: %v", context.Cause(held))
		}
		after := c.WatchdogStats()
		t.Logf("renewals meanwhile: %d in %d rounds", after.Renewed-before.Renewed, after.Ticks-before.Ticks)
		for _, key := range []string{"renewed", timeoutKey("renewed", owner, 1), timeoutKey("renewed", owner, 2)} {
			if p := redistest.PTTL(t, side, key); p <= 0 || p > lease.Milliseconds() {
				t.Errorf("%s: PTTL %d after 2.5 leases; want in (0, %d]", key, p, lease.Milliseconds())
			}
		}
		for i := 0; i < 2; i++ {
			if err := mu.RUnlock(held); err != nil {
				t.Fatal(err)
			}
		}
		if n, _ := redistest.Do(t, side, "EXISTS", "renewed", timeoutKey("renewed", owner, 1), timeoutKey("renewed", owner, 2)).AsInt64(); n != 0 {
			t.Errorf("%d keys left after both holds were released", n)
		}
	})
}

// Do and RDo take the lock, run the function with the hold's context, and release the
// lock whatever the function does: return nil, return an error, or panic.
func TestDoAndRDo(t *testing.T) {
	redistest.EachWithCluster(t, func(t *testing.T, b *redistest.Backend) {
		c := relocktest.New(t, b)
		side := b.Client(t)
		ctx := redistest.Context(t, time.Minute)
		mu := c.RWLock("done")
		free := func(what string) {
			t.Helper()
			if locked, err := mu.IsLocked(ctx); locked || err != nil {
				t.Errorf("after %s: IsLocked = %v, %v; want false", what, locked, err)
			}
		}

		ran := false
		err := mu.Do(ctx, func(ctx context.Context) error {
			ran = true
			if n, err := mu.HoldCount(ctx); n != 1 || err != nil {
				t.Errorf("HoldCount inside Do = %d, %v; want 1", n, err)
			}
			if mode, _ := redistest.Do(t, side, "HGET", "done", "mode").ToString(); mode != "write" {
				t.Errorf("mode inside Do = %q; want write", mode)
			}
			if _, err := mu.TryRLock(relock.NewOwner(ctx)); !errors.Is(err, relock.ErrLocked) {
				t.Errorf("another reader inside Do: %v; want ErrLocked", err)
			}
			return nil
		})
		if err != nil || !ran {
			t.Fatalf("Do = %v (ran %v)", err, ran)
		}
		free("Do")

		ran = false
		err = mu.RDo(ctx, func(ctx context.Context) error {
			ran = true
			if n, err := mu.RHoldCount(ctx); n != 1 || err != nil {
				t.Errorf("RHoldCount inside RDo = %d, %v; want 1", n, err)
			}
			// Another owner reads at the same time; a writer may not enter.
			if err := mu.RDo(relock.NewOwner(ctx), func(context.Context) error {
				if rs := readers(t, side, "done"); len(rs) != 2 {
					t.Errorf("readers inside two RDo = %v; want 2", rs)
				}
				return nil
			}); err != nil {
				t.Errorf("a second reader's RDo: %v", err)
			}
			if _, err := mu.TryLock(relock.NewOwner(ctx)); !errors.Is(err, relock.ErrLocked) {
				t.Errorf("a writer inside RDo: %v; want ErrLocked", err)
			}
			return nil
		})
		if err != nil || !ran {
			t.Fatalf("RDo = %v (ran %v)", err, ran)
		}
		free("RDo")

		// The function's error comes back, and the lock is released.
		boom := errors.New("boom")
		if err := mu.Do(ctx, func(context.Context) error { return boom }); !errors.Is(err, boom) {
			t.Errorf("Do of a failing function = %v; want %v", err, boom)
		}
		free("a failing Do")
		if err := mu.RDo(ctx, func(context.Context) error { return boom }); !errors.Is(err, boom) {
			t.Errorf("RDo of a failing function = %v; want %v", err, boom)
		}
		free("a failing RDo")

		// A panic goes on up, and the lock is released on its way.
		for name, run := range map[string]func(context.Context, func(context.Context) error, ...rwlock.Option) error{"Do": mu.Do, "RDo": mu.RDo} {
			func() {
				defer func() {
					if r := recover(); r != "panicked" {
						t.Errorf("%s: recovered %v; want the function's panic", name, r)
					}
				}()
				_ = run(ctx, func(context.Context) error { panic("panicked") })
				t.Errorf("%s returned after its function panicked", name)
			}()
			free("a panicking " + name)
		}

		// A Do that cannot get the lock does not run its function.
		r, err := mu.RLock(ctx)
		if err != nil {
			t.Fatal(err)
		}
		ran = false
		err = mu.Do(ctx, func(context.Context) error { ran = true; return nil }, rlock.WithWaitTimeout(200*time.Millisecond))
		if !errors.Is(err, context.DeadlineExceeded) || ran {
			t.Errorf("Do while a reader holds = %v (ran %v); want DeadlineExceeded, not run", err, ran)
		}
		if err := mu.RUnlock(r); err != nil {
			t.Fatal(err)
		}
	})
}

// TTL reports the lease of a hold in either mode, and ErrNotHeld to anyone who holds
// nothing.
func TestTTL(t *testing.T) {
	redistest.EachWithCluster(t, func(t *testing.T, b *redistest.Backend) {
		const lease = 10 * time.Second // the watchdog timeout
		c := relocktest.New(t, b, relock.WithWatchdogTimeout(lease))
		ctx := redistest.Context(t, time.Minute)
		mu := c.RWLock("timed")
		notHeld := func(ctx context.Context, who string) {
			t.Helper()
			if d, err := mu.TTL(ctx); !errors.Is(err, relock.ErrNotHeld) {
				t.Errorf("TTL of %s = %v, %v; want ErrNotHeld", who, d, err)
			}
		}
		within := func(ctx context.Context, who string, most time.Duration) {
			t.Helper()
			if d, err := mu.TTL(ctx); err != nil || d <= 0 || d > most {
				t.Errorf("TTL of %s = %v, %v; want in (0, %v]", who, d, err, most)
			}
		}
		notHeld(ctx, "a context without owner")

		r, err := mu.RLock(ctx)
		if err != nil {
			t.Fatal(err)
		}
		within(r, "a reader", lease)
		notHeld(relock.NewOwner(ctx), "another owner while a reader holds")
		if err := mu.RUnlock(r); err != nil {
			t.Fatal(err)
		}
		// A released hold's context is done: keep its owner, drop its end.
		notHeld(context.WithoutCancel(r), "a reader that left")

		w, err := mu.Lock(ctx, rlock.WithLease(5*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		within(w, "a writer on a 5s lease", 5*time.Second)
		notHeld(relock.NewOwner(ctx), "another owner while a writer holds")
		if err := mu.Unlock(w); err != nil {
			t.Fatal(err)
		}
		notHeld(context.WithoutCancel(w), "a writer that left")

		r, err = mu.RLock(ctx, rlock.WithLease(4*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		within(r, "a reader on a 4s lease", 4*time.Second)
		if err := mu.RUnlock(r); err != nil {
			t.Fatal(err)
		}
	})
}

// ForceUnlock deletes the lock in either mode, whoever holds it, and wakes every waiter at
// once: they get in long before the holder's lease would have let them.
func TestForceUnlock(t *testing.T) {
	redistest.EachWithCluster(t, func(t *testing.T, b *redistest.Backend) {
		// The holders' lease, and so the waiters' time bound, is the default 30s: waiters
		// that get in within their 20s were woken.
		c1, c2 := relocktest.New(t, b), relocktest.New(t, b)
		side := b.Client(t)
		ctx := redistest.Context(t, time.Minute)
		mu := c1.RWLock("forced")
		if ok, err := mu.ForceUnlock(ctx); ok || err != nil {
			t.Fatalf("ForceUnlock of no lock = %v, %v; want false", ok, err)
		}
		// wait starts n waiters on c2, readers or writers, and returns their outcomes.
		wait := func(n int, write bool) chan error {
			done := make(chan error, n)
			for i := 0; i < n; i++ {
				go func() {
					wctx, cancel := context.WithTimeout(ctx, 20*time.Second)
					defer cancel()
					m := c2.RWLock("forced")
					lock, unlock := m.RLock, m.RUnlock
					if write {
						lock, unlock = m.Lock, m.Unlock
					}
					h, err := lock(wctx)
					if err == nil {
						err = unlock(h)
					}
					done <- err
				}()
			}
			return done
		}
		collect := func(done chan error, n int, what string) {
			t.Helper()
			for i := 0; i < n; i++ {
				if err := redistest.Recv(t, done, 30*time.Second, what+" after ForceUnlock"); err != nil {
					t.Errorf("%s after ForceUnlock: %v", what, err)
				}
			}
		}

		// Write mode: two readers and a writer wait.
		w, err := mu.Lock(ctx)
		if err != nil {
			t.Fatal(err)
		}
		readersDone, writerDone := wait(2, false), wait(1, true)
		redistest.Eventually(t, 10*time.Second, "the waiters did not park", func() bool { return c2.PubSubStats().Waiting == 3 })
		if ok, err := c2.RWLock("forced").ForceUnlock(ctx); !ok || err != nil {
			t.Fatalf("ForceUnlock of a write lock = %v, %v; want true", ok, err)
		}
		collect(readersDone, 2, "a waiting reader")
		collect(writerDone, 1, "a waiting writer")
		if err := mu.Unlock(w); !errors.Is(err, relock.ErrNotHeld) {
			t.Errorf("the forced-out writer's Unlock: %v; want ErrNotHeld", err)
		}
		if !errors.Is(context.Cause(w), relock.ErrLeaseLost) {
			t.Errorf("the forced-out writer's context: %v; want ErrLeaseLost", context.Cause(w))
		}

		// Read mode: two readers hold, a writer waits.
		r1, err := mu.RLock(ctx)
		if err != nil {
			t.Fatal(err)
		}
		r2, err := mu.RLock(relock.NewOwner(ctx))
		if err != nil {
			t.Fatal(err)
		}
		writerDone = wait(1, true)
		redistest.Eventually(t, 10*time.Second, "the writer did not park", func() bool { return c2.PubSubStats().Waiting == 1 })
		if ok, err := mu.ForceUnlock(ctx); !ok || err != nil {
			t.Fatalf("ForceUnlock of a read lock = %v, %v; want true", ok, err)
		}
		collect(writerDone, 1, "a waiting writer")
		for _, r := range []context.Context{r1, r2} {
			if err := mu.RUnlock(r); !errors.Is(err, relock.ErrNotHeld) {
				t.Errorf("a forced-out reader's RUnlock: %v; want ErrNotHeld", err)
			}
		}
		if st := c2.PubSubStats(); st.TimedOut != 0 {
			t.Errorf("waiters' stats %+v: a wait ran to its time bound", st)
		}
		if n, _ := redistest.Do(t, side, "EXISTS", "forced").AsInt64(); n != 0 {
			t.Error("the lock is left after everyone left")
		}
	})
}

// ForceUnlock wakes every waiter: on the lock's channel it publishes "1", the message after
// which every waiter may try (readers can all enter), as a writer's last unlock does, and
// not "0", after which a client wakes one waiter (a Redisson client's other waiting readers
// would sleep out the forced holder's lease).
func TestForceUnlockPublishesOne(t *testing.T) {
	t.Parallel()
	redistest.EachWithCluster(t, func(t *testing.T, b *redistest.Backend) {
		c := relocktest.New(t, b)
		ctx := redistest.Context(t, time.Minute)
		mu := c.RWLock("forced-one")
		if _, err := mu.Lock(ctx); err != nil {
			t.Fatal(err)
		}
		heard := b.Listen(t, "redisson_rwlock:{forced-one}")
		if ok, err := mu.ForceUnlock(ctx); !ok || err != nil {
			t.Fatalf("ForceUnlock of a write lock = %v, %v; want true", ok, err)
		}
		var releases []string
		if !redistest.Await(10*time.Second, func() bool {
			releases = releaseMessages(heard)
			return len(releases) > 0
		}) {
			t.Fatalf("after 10s: nothing published by ForceUnlock (messages %q)", heard.Messages())
		}
		if releases[0] != "1" {
			t.Errorf("ForceUnlock published %q; want \"1\", every waiter may try (messages %q)", releases[0], heard.Messages())
		}
	})
}

// Writers of a lock taken WithFencing get a token that grows with every first-level write
// acquisition, by any client; re-entry and read holds taken by the writer keep it; readers
// and locks without fencing get none.
func TestWriterFencing(t *testing.T) {
	redistest.EachWithCluster(t, func(t *testing.T, b *redistest.Backend) {
		c1, c2 := relocktest.New(t, b), relocktest.New(t, b)
		side := b.Client(t)
		ctx := redistest.Context(t, time.Minute)
		fenced := []*rwlock.RWMutex{c1.RWLock("fenced", rlock.WithFencing()), c2.RWLock("fenced", rlock.WithFencing())}
		counter := func() int64 {
			n, _ := redistest.Do(t, side, "GET", "redisson_lock_token:{fenced}").AsInt64()
			return n
		}
		var last int64
		var tokens []int64
		for i := 0; i < 4; i++ {
			mu := fenced[i%2]
			w, err := mu.Lock(ctx)
			if err != nil {
				t.Fatal(err)
			}
			tok, ok := mu.Token(w)
			if !ok || tok <= last {
				t.Fatalf("write %d: token %d (%v); want one above %d", i, tok, ok, last)
			}
			tokens = append(tokens, tok)
			if n := counter(); n != tok {
				t.Errorf("write %d: counter %d; want the token %d", i, n, tok)
			}
			again, err := mu.Lock(w)
			if err != nil {
				t.Fatal(err)
			}
			if n, _ := mu.HoldCount(again); n != 2 {
				t.Errorf("write %d: HoldCount after re-entry = %d; want 2", i, n)
			}
			if got, ok := mu.Token(again); !ok || got != tok {
				t.Errorf("write %d: token after re-entry %d (%v); want %d", i, got, ok, tok)
			}
			read, err := mu.RLock(again)
			if err != nil {
				t.Fatal(err)
			}
			if got, ok := mu.Token(read); !ok || got != tok {
				t.Errorf("write %d: token beside the writer's read hold %d (%v); want %d", i, got, ok, tok)
			}
			if n := counter(); n != tok {
				t.Errorf("write %d: counter %d after re-entry; want %d", i, n, tok)
			}
			for _, release := range []func() error{func() error { return mu.RUnlock(read) }, func() error { return mu.Unlock(again) }, func() error { return mu.Unlock(w) }} {
				if err := release(); err != nil {
					t.Fatal(err)
				}
			}
			if got, ok := mu.Token(w); ok {
				t.Errorf("write %d: token %d after release; want none", i, got)
			}
			last = tok
		}
		t.Logf("tokens %v", tokens)

		// Readers carry no token and do not move the counter.
		r, err := fenced[0].RLock(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if tok, ok := fenced[0].Token(r); ok {
			t.Errorf("a reader's token %d; want none", tok)
		}
		if err := fenced[0].RUnlock(r); err != nil {
			t.Fatal(err)
		}
		// Nor does a writer of the lock without fencing, which has no token.
		plain := c1.RWLock("fenced")
		w, err := plain.Lock(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if tok, ok := plain.Token(w); ok {
			t.Errorf("token %d without fencing; want none", tok)
		}
		if err := plain.Unlock(w); err != nil {
			t.Fatal(err)
		}
		if n := counter(); n != last {
			t.Errorf("counter %d after a reader and an unfenced writer; want %d", n, last)
		}
		// Fencing as an option of one call.
		w, err = plain.Lock(ctx, rlock.WithFencing())
		if err != nil {
			t.Fatal(err)
		}
		if tok, ok := plain.Token(w); !ok || tok != last+1 {
			t.Errorf("token of a call WithFencing %d (%v); want %d", tok, ok, last+1)
		}
		if err := plain.Unlock(w); err != nil {
			t.Fatal(err)
		}
	})
}

// After a downgrade (Lock, RLock with the write hold's context, Unlock), the read hold is
// alive in Redis and renewed, but the context RLock returned must stay live too.
func TestDowngradedReaderKeepsItsContext(t *testing.T) {
	t.Parallel()
	const lease = 1500 * time.Millisecond
	redistest.EachWithCluster(t, func(t *testing.T, b *redistest.Backend) {
		c := relocktest.New(t, b, relock.WithWatchdogTimeout(lease))
		mu := c.RWLock("downgraded")
		w, err := mu.Lock(redistest.Context(t, time.Minute))
		if err != nil {
			t.Fatal(err)
		}
		r, err := mu.RLock(w)
		if err != nil {
			t.Fatal(err)
		}
		if err := mu.Unlock(w); err != nil {
			t.Fatal(err)
		}
		t.Logf("right after the downgrade: read ctx err %v, watchdog %+v", r.Err(), c.WatchdogStats())
		time.Sleep(lease * 5 / 3) // a few renewal rounds
		n, _ := mu.RHoldCount(context.WithoutCancel(r))
		t.Logf("after %v: read holds in Redis %d; read ctx cause %v; watchdog %+v", lease*5/3, n, context.Cause(r), c.WatchdogStats())
		if n != 1 {
			t.Fatalf("read holds %d; want 1", n)
		}
		if r.Err() != nil {
			t.Errorf("the downgraded reader's context ended (cause %v) while its read hold is held and renewed", context.Cause(r))
		}
		_ = mu.RUnlock(r)
	})
}

// A reader that releases its last hold while other readers remain must be forgotten by
// the watchdog at once, as when it was the last reader: its context ends with
// context.Canceled and no renewal is sent for it any more.
func TestReaderReleasedBesideOthers(t *testing.T) {
	t.Parallel()
	const lease = 1500 * time.Millisecond
	redistest.EachWithCluster(t, func(t *testing.T, b *redistest.Backend) {
		c := relocktest.New(t, b, relock.WithWatchdogTimeout(lease))
		mu := c.RWLock("beside")
		ctx := redistest.Context(t, time.Minute)
		r1, err := mu.RLock(relock.NewOwner(ctx))
		if err != nil {
			t.Fatal(err)
		}
		r2, err := mu.RLock(relock.NewOwner(ctx))
		if err != nil {
			t.Fatal(err)
		}
		if err := mu.RUnlock(r1); err != nil {
			t.Fatal(err)
		}
		st := c.WatchdogStats()
		t.Logf("after r1's RUnlock: r1 ctx err %v; watchdog %+v", r1.Err(), st)
		if st.Holds != 1 {
			t.Errorf("watchdog knows %d holds after r1 released; want 1 (r2)", st.Holds)
		}
		if !errors.Is(r1.Err(), context.Canceled) {
			t.Errorf("r1's context after its RUnlock: %v; want context.Canceled", r1.Err())
		}
		time.Sleep(lease * 5 / 3)
		st = c.WatchdogStats()
		t.Logf("later: r1 cause %v; watchdog %+v", context.Cause(r1), st)
		if st.Lost != 0 {
			t.Errorf("watchdog counted %d lost holds; want 0 (r1 was released, not lost)", st.Lost)
		}
		_ = mu.RUnlock(r2)
	})
}

// startWaitingWriter starts a writer of an owner of its own on mu, which must be taken
// WithWriterPreference and held, and returns once the writer is registered as waiting.
// The writer takes the lock when its turn comes (within 20s) and releases it; the channel
// gets its error.
func startWaitingWriter(t *testing.T, mu *rwlock.RWMutex, side rueidis.Client) <-chan error {
	t.Helper()
	wrote := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		w, err := mu.Lock(relock.NewOwner(ctx))
		if err == nil {
			err = mu.Unlock(w)
		}
		wrote <- err
	}()
	writers := "relock_rwlock_writers:{" + mu.Name() + "}"
	redistest.Eventually(t, 10*time.Second, "the writer did not register as waiting", func() bool {
		n, _ := redistest.Do(t, side, "ZCARD", writers).AsInt64()
		return n == 1
	})
	return wrote
}

// Waiting writers of one lock may refresh at different periods (each RWLock handle sets
// its own). One with a short period that waits beside one with a long period, and then
// gives up, must not take the writers' zset with it: the patient writer still waits, and
// while it does, new readers under writer preference wait too (docs/operations.md:
// the zset expires two refresh periods after the last writer's refresh).
func TestShortRefreshKeepsLongerWriters(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		c := relocktest.New(t, b)
		side := b.Client(t)
		ctx := redistest.Context(t, time.Minute)
		pref := rwlock.WithWriterPreference()
		const hastyRefresh = 20 * time.Millisecond
		reader, err := c.RWLock("writers-mixed").RLock(ctx)
		if err != nil {
			t.Fatal(err)
		}
		patient := startWaitingWriter(t, c.RWLock("writers-mixed", pref, rwlock.WithRefreshPeriod(20*time.Second)), side)
		hastyCtx, leave := context.WithCancel(ctx)
		left := make(chan error, 1)
		go func() {
			_, err := c.RWLock("writers-mixed", pref, rwlock.WithRefreshPeriod(hastyRefresh)).Lock(relock.NewOwner(hastyCtx))
			left <- err
		}()
		redistest.Eventually(t, 10*time.Second, "the hasty writer did not register as waiting", func() bool {
			n, _ := redistest.Do(t, side, "ZCARD", "relock_rwlock_writers:{writers-mixed}").AsInt64()
			return n == 2
		})
		leave()
		if err := redistest.Recv(t, left, 10*time.Second, "the hasty writer's return"); !errors.Is(err, context.Canceled) {
			t.Fatalf("hasty writer: %v, want context.Canceled", err)
		}
		time.Sleep(10 * 2 * hastyRefresh) // ten of the hasty writer's entry lifetimes
		if n, _ := redistest.Do(t, side, "ZCARD", "relock_rwlock_writers:{writers-mixed}").AsInt64(); n != 1 {
			t.Fatalf("after the hasty writer left, the writers' zset has %d entries; want the patient writer's", n)
		}
		if _, err := c.RWLock("writers-mixed", pref).TryRLock(relock.NewOwner(ctx)); !errors.Is(err, relock.ErrLocked) {
			t.Fatalf("a new reader while the patient writer waits: %v; want ErrLocked", err)
		}
		if err := c.RWLock("writers-mixed").RUnlock(reader); err != nil {
			t.Fatal(err)
		}
		if err := redistest.Recv(t, patient, 30*time.Second, "the patient writer's turn"); err != nil {
			t.Fatalf("the patient writer: %v", err)
		}
	})
}

// A waiting writer that died holds readers back only until its entry runs out: the
// readers come back then by themselves, since no unlock will ever announce that its turn
// has passed.
func TestDeadWriterReleasesReaders(t *testing.T) {
	t.Parallel()
	redistest.EachWithCluster(t, func(t *testing.T, b *redistest.Backend) {
		c := relocktest.New(t, b) // 30s watchdog: a reader sleeping a lease would miss the bound below
		side := b.Client(t)
		// A writer's entry, as a dead waiting writer leaves it: live for one more second
		// by the server's clock.
		deadline := redistest.Millis(t, side) + 1000
		if err := redistest.Do(t, side, "ZADD", "relock_rwlock_writers:{ghost}", strconv.FormatInt(deadline, 10), "dead-owner:write").Error(); err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		mu := c.RWLock("ghost", rwlock.WithWriterPreference())
		start := time.Now()
		r, err := mu.RLock(ctx)
		if err != nil {
			t.Fatalf("reader behind a dead writer: %v", err)
		}
		t.Logf("reader in after %v (the dead writer's entry ran out after 1s)", time.Since(start).Round(time.Millisecond))
		if err := mu.RUnlock(r); err != nil {
			t.Fatal(err)
		}
	})
}

// A waiting writer's entry lives two refresh periods from its last refresh, not a lease
// (WithWriterPreference: a writer that dies stops holding readers back within two
// periods): its deadline, in Redis time, is never further off than that.
func TestWaitingWriterEntryLivesTwoRefreshPeriods(t *testing.T) {
	t.Parallel()
	const period = 500 * time.Millisecond
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		c := relocktest.New(t, b) // 30s lease: far beyond two periods
		side := b.Client(t)
		mu := c.RWLock("entry-life", rwlock.WithWriterPreference(), rwlock.WithRefreshPeriod(period))
		r, err := mu.RLock(relock.NewOwner(redistest.Context(t, time.Minute)))
		if err != nil {
			t.Fatal(err)
		}
		wrote := startWaitingWriter(t, mu, side)
		for i := 0; i < 3; i++ {
			writers := "relock_rwlock_writers:{entry-life}"
			v, err := redistest.Do(t, side, "ZRANGE", writers, "0", "-1").AsStrSlice()
			if err != nil || len(v) != 1 {
				t.Fatalf("writers zset while one writer waits: %q %v", v, err)
			}
			deadline, err := redistest.Do(t, side, "ZSCORE", writers, v[0]).AsFloat64()
			now := redistest.Millis(t, side)
			if err != nil {
				t.Fatal(err)
			}
			if left := time.Duration(int64(deadline)-now) * time.Millisecond; left > 2*period {
				t.Fatalf("the waiting writer's entry runs out in %v; want at most two refresh periods (%v)", left, 2*period)
			}
			time.Sleep(period)
		}
		if err := mu.RUnlock(r); err != nil {
			t.Fatal(err)
		}
		if err := redistest.Recv(t, wrote, 30*time.Second, "the writer's turn"); err != nil {
			t.Fatalf("writer: %v", err)
		}
	})
}

// A read hold taken with the context of its owner's write hold, on a longer fixed lease,
// raises the hash's expiry, and the write field lives as long as the hash (a write hold has
// no key of its own). The write hold is then held longer than its own lease: its context
// must stay live as long as Redis keeps it, and its Unlock must release it.
func TestReadHoldBesideWriteKeepsTheWriteHold(t *testing.T) {
	t.Parallel()
	const writeLease, readLease = time.Second, 5 * time.Second
	redistest.EachWithCluster(t, func(t *testing.T, b *redistest.Backend) {
		c := relocktest.New(t, b)
		mu := c.RWLock("beside-write")
		w, err := mu.Lock(redistest.Context(t, time.Minute), rlock.WithLease(writeLease))
		if err != nil {
			t.Fatal(err)
		}
		r, err := mu.RLock(w, rlock.WithLease(readLease))
		if err != nil {
			t.Fatal(err)
		}
		time.Sleep(writeLease * 2) // past the write hold's own lease, well within the read hold's
		n, err := mu.HoldCount(context.WithoutCancel(w))
		if err != nil {
			t.Fatal(err)
		}
		if n != 1 {
			t.Fatalf("write holds in Redis %d %v after the write lease; want 1: the read hold raised the hash's expiry", n, writeLease*2)
		}
		if w.Err() != nil {
			t.Errorf("the write hold's context ended (cause %v) while Redis keeps the hold, for the read hold beside it", context.Cause(w))
		}
		if err := mu.RUnlock(r); err != nil {
			t.Fatal(err)
		}
		if err := mu.Unlock(w); err != nil {
			t.Errorf("Unlock of the write hold kept by the read hold: %v", err)
		}
	})
}

// A read re-entry beside the owner's write hold, on a longer fixed lease than the read
// hold it re-enters, raises the hash's expiry as a first read hold does: the write hold's
// context stays live past its own lease, as Redis keeps the hold.
func TestReadReentryBesideWriteKeepsTheWriteHold(t *testing.T) {
	t.Parallel()
	const writeLease, readLease = time.Second, 5 * time.Second
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		c := relocktest.New(t, b)
		mu := c.RWLock("beside-write:reentry")
		w, err := mu.Lock(redistest.Context(t, time.Minute), rlock.WithLease(writeLease))
		if err != nil {
			t.Fatal(err)
		}
		r, err := mu.RLock(w, rlock.WithLease(writeLease))
		if err != nil {
			t.Fatal(err)
		}
		if r, err = mu.RLock(r, rlock.WithLease(readLease)); err != nil { // the re-entry
			t.Fatal(err)
		}
		time.Sleep(writeLease * 2) // past the write hold's own lease, well within the re-entry's
		n, err := mu.HoldCount(context.WithoutCancel(w))
		if err != nil {
			t.Fatal(err)
		}
		if n != 1 {
			t.Fatalf("write holds in Redis %d %v after the write lease; want 1: the read re-entry raised the hash's expiry", n, writeLease*2)
		}
		if w.Err() != nil {
			t.Errorf("the write hold's context ended (cause %v) while Redis keeps the hold, for the read re-entry beside it", context.Cause(w))
		}
		for range 2 {
			if err := mu.RUnlock(r); err != nil {
				t.Fatal(err)
			}
		}
		if err := mu.Unlock(w); err != nil {
			t.Errorf("Unlock of the write hold kept by the read re-entry: %v", err)
		}
	})
}

// A read hold that the watchdog renews, taken with the context of its owner's write hold
// on a shorter fixed lease, keeps the hash and so the write field alive past that lease:
// each renewal says so (the renewal script's 2), and the write hold's context must stay
// live as long as Redis keeps it, past the read hold's first lease too.
func TestRenewedReadHoldBesideWriteKeepsTheWriteHold(t *testing.T) {
	t.Parallel()
	const watchdog, writeLease = 2 * time.Second, 500 * time.Millisecond
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		c := relocktest.New(t, b, relock.WithWatchdogTimeout(watchdog))
		mu := c.RWLock("renewed-beside-write")
		w, err := mu.Lock(redistest.Context(t, time.Minute), rlock.WithLease(writeLease))
		if err != nil {
			t.Fatal(err)
		}
		r, err := mu.RLock(w)
		if err != nil {
			t.Fatal(err)
		}
		time.Sleep(watchdog + 3*writeLease) // past the write lease and the read hold's first lease
		if n, err := mu.HoldCount(context.WithoutCancel(w)); err != nil || n != 1 {
			t.Fatalf("write holds in Redis %d (%v) after the read hold's renewals; want 1: they kept the hash", n, err)
		}
		if w.Err() != nil {
			t.Errorf("the write hold's context ended (cause %v) while Redis keeps the hold, for the renewed read hold beside it", context.Cause(w))
		}
		if err := mu.RUnlock(r); err != nil {
			t.Fatal(err)
		}
		if err := mu.Unlock(w); err != nil {
			t.Errorf("Unlock of the write hold kept by the renewed read hold: %v", err)
		}
	})
}

// A read unlock that leaves the lock ending sooner than before (the reader that stays
// has a shorter lease) tells a waiter, which was told to sleep until the old end: should
// the reader that stays never unlock, the waiting writer gets the lock when that reader's
// lease ends, not at the old end.
func TestReadUnlockTellsWaitersOfASoonerEnd(t *testing.T) {
	t.Parallel()
	const (
		long  = time.Minute     // the reader that leaves
		short = 2 * time.Second // the reader that stays and never unlocks
	)
	redistest.EachWithCluster(t, func(t *testing.T, b *redistest.Backend) {
		c := relocktest.New(t, b)
		mu := c.RWLock("sooner")
		ctx := redistest.Context(t, 2*long)
		leaving, err := mu.RLock(relock.NewOwner(ctx), rlock.WithLease(long))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := mu.RLock(relock.NewOwner(ctx), rlock.WithLease(short)); err != nil {
			t.Fatal(err)
		}
		waiter := relocktest.New(t, b)
		wrote := make(chan error, 1)
		go func() {
			// A third of the old end: only the unlock's message brings the writer back in time.
			w := waiter.RWLock("sooner")
			h, err := w.Lock(relock.NewOwner(redistest.Context(t, long/3)))
			if err == nil {
				err = w.Unlock(h)
			}
			wrote <- err
		}()
		redistest.Eventually(t, 10*time.Second, "writer not waiting", func() bool { return waiter.PubSubStats().Waiting == 1 })
		if err := mu.RUnlock(leaving); err != nil {
			t.Fatal(err)
		}
		if err := redistest.Recv(t, wrote, time.Minute, "the writer's turn"); err != nil {
			t.Fatalf("writer behind a reader of %v that never unlocks: %v", short, err)
		}
	})
}

// The last reader to leave while a writer waits under writer preference publishes "1"
// (everyone may try), as a writer's unlock does, not "0" (one may try): a Redisson reader
// woken by a "0" that then gives way to the writer would swallow the one wake-up the
// writer needs. The reader's release is the first "0" or "1" on the channel; the writer's
// unlock follows. A "0" may come after them: when the writer's own second try, made once
// its subscription is confirmed, took the lock before the wake code that the reader's
// release sent it arrived, its client has no waiter left for the code and passes the
// wake-up on (lua/pass.lua), as the design has it.
func TestLastReaderPublishesOneToWaitingWriters(t *testing.T) {
	redistest.EachWithCluster(t, func(t *testing.T, b *redistest.Backend) {
		c := relocktest.New(t, b)
		side := b.Client(t)
		mu := c.RWLock("last", rwlock.WithWriterPreference())
		r, err := mu.RLock(redistest.Context(t, time.Minute))
		if err != nil {
			t.Fatal(err)
		}
		heard := b.Listen(t, "redisson_rwlock:{last}")
		wrote := startWaitingWriter(t, mu, side)
		if err := mu.RUnlock(r); err != nil {
			t.Fatal(err)
		}
		if err := redistest.Recv(t, wrote, 30*time.Second, "the writer's turn"); err != nil {
			t.Fatalf("writer: %v", err)
		}
		// Wake codes and lease announcements go out too; "0" and "1" are the releases'.
		var releases []string
		if !redistest.Await(10*time.Second, func() bool {
			releases = releaseMessages(heard)
			return len(releases) >= 2
		}) {
			t.Fatalf("after 10s: releases published %q; want the reader's and the writer's (messages %q)", releases, heard.Messages())
		}
		if releases[0] != "1" {
			t.Errorf("the last reader's unlock, with a writer waiting, published %q; want \"1\" (messages %v)", releases[0], heard.Messages())
		}
	})
}

// A waiting writer with the longest refresh period holds new readers back, under writer
// preference: a period over a hundred years is taken as a hundred years, and the writer's
// entry lives twice that. Guards against an entry's life that overflows the server's clock
// (miniredis deletes a key whose PEXPIRE overflows at once, and readers went ahead).
func TestLongestRefreshPeriod(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		c := relocktest.New(t, b)
		side := b.Client(t)
		ctx := redistest.Context(t, 20*time.Second)
		mu := c.RWLock("forever", rwlock.WithWriterPreference(), rwlock.WithRefreshPeriod(math.MaxInt64))
		r, err := mu.RLock(relock.NewOwner(ctx))
		if err != nil {
			t.Fatal(err)
		}
		wrote := startWaitingWriter(t, mu, side)
		if _, err := mu.TryRLock(relock.NewOwner(ctx)); !errors.Is(err, relock.ErrLocked) {
			t.Errorf("TryRLock of a new reader while a writer waits: %v; want ErrLocked", err)
		}
		if err := mu.RUnlock(r); err != nil {
			t.Fatal(err)
		}
		if err := redistest.Recv(t, wrote, 10*time.Second, "the writer's turn"); err != nil {
			t.Fatalf("writer: %v", err)
		}
	})
}

// A write hold whose fixed lease runs out under its holder (RedissonReadWriteLockTest's
// testExpireWrite): another client's writer gets the lock when the lease ends, the first
// holder's context ends with ErrLeaseLost, and its Unlock fails with ErrNotHeld without
// touching the new writer's hold.
//
// Guards against a write unlock that releases whatever write hold it finds, and a write
// acquisition that takes the watchdog's lease in place of the one asked for.
func TestWriteLeaseRunsOutUnderItsHolder(t *testing.T) {
	t.Parallel()
	redistest.EachWithCluster(t, func(t *testing.T, b *redistest.Backend) {
		const name, lease = "rw:expire-write", time.Second
		c1, c2 := relocktest.New(t, b), relocktest.New(t, b) // the watchdog's lease: the default 30s
		ctx := redistest.Context(t, time.Minute)
		mu, other := c1.RWLock(name), c2.RWLock(name)
		held, err := mu.Lock(relock.NewOwner(ctx), rlock.WithLease(lease))
		if err != nil {
			t.Fatal(err)
		}
		wctx, cancel := context.WithTimeout(relock.NewOwner(ctx), 20*time.Second)
		defer cancel()
		theirs, err := other.Lock(wctx)
		if err != nil {
			t.Fatalf("a writer behind a %v write lease that runs out: %v", lease, err)
		}
		select {
		case <-held.Done():
		case <-time.After(10 * time.Second):
			t.Fatal("the first writer's context is live while another writer holds the lock")
		}
		if !errors.Is(context.Cause(held), relock.ErrLeaseLost) {
			t.Errorf("the first writer's context: %v; want ErrLeaseLost", context.Cause(held))
		}
		if err := mu.Unlock(held); !errors.Is(err, relock.ErrNotHeld) {
			t.Errorf("Unlock after the lease ran out: %v; want ErrNotHeld", err)
		}
		if n, err := other.HoldCount(theirs); n != 1 || err != nil {
			t.Errorf("the new writer's HoldCount after the old one's Unlock = %d, %v; want 1", n, err)
		}
		if err := other.Unlock(theirs); err != nil {
			t.Fatal(err)
		}
	})
}

// A name with a hash tag of its own ("{rw-tag}:abc:key", RedissonReadWriteLockTest's
// testName) is used as it is, as Redisson does: a read hold's timeout key is the name, the
// owner and ":rwlock_timeout:<k>", in the name's slot; readers of ten goroutines in two
// clients take and release it ten times each, and no key is left.
//
// Guards against wrapping such a name in a tag again ("{{rw-tag}:abc:key}:…"), whose tag
// is "{rw-tag" (another slot on a cluster, another key than Redisson's everywhere).
func TestTaggedNameReaders(t *testing.T) {
	redistest.EachWithCluster(t, func(t *testing.T, b *redistest.Backend) {
		const name = "{rw-tag}:abc:key"
		c1, c2 := relocktest.New(t, b), relocktest.New(t, b)
		side := b.Client(t)
		ctx := redistest.Context(t, time.Minute)
		r, err := c1.RWLock(name).RLock(ctx)
		if err != nil {
			t.Fatal(err)
		}
		owner := onlyReader(t, side, name)
		key := name + ":" + owner + ":rwlock_timeout:1"
		if n, _ := redistest.Do(t, side, "EXISTS", key).AsInt64(); n != 1 {
			t.Errorf("the read hold's timeout key %q does not exist", key)
		}
		if err := c1.RWLock(name).RUnlock(r); err != nil {
			t.Fatal(err)
		}
		errs := make(chan error, 10)
		for g := range 10 {
			mu := []*relock.Client{c1, c2}[g%2].RWLock(name)
			go func() {
				for range 10 {
					h, err := mu.RLock(relock.NewOwner(ctx))
					if err == nil {
						err = mu.RUnlock(h)
					}
					if err != nil {
						errs <- err
						return
					}
				}
				errs <- nil
			}()
		}
		for range 10 {
			if err := redistest.Recv(t, errs, 30*time.Second, "a reader goroutine"); err != nil {
				t.Errorf("reader: %v", err)
			}
		}
		if keys := b.Keys(t, side, "*rw-tag*"); len(keys) != 0 {
			t.Errorf("keys left: %v", keys)
		}
	})
}

// A renewal round renews a read hold but never looks at a write hold on a fixed lease,
// whose deadline is enough. The write field lives in the same hash as the read hold's, so
// when a round finds the owner's read hold gone (here the lock was deleted), the client
// has learnt that its write hold beside it may be gone too: it must look at once, and the
// write hold's context must end with ErrLeaseLost then, not when its own lease runs out.
func TestReadHoldLostLooksAtTheWriteHoldBesideIt(t *testing.T) {
	t.Parallel()
	const lease = 3 * time.Second // the watchdog's: a round every second
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		c := relocktest.New(t, b, relock.WithWatchdogTimeout(lease))
		mu := c.RWLock("beside-lost")
		w, err := mu.Lock(redistest.Context(t, time.Minute), rlock.WithLease(time.Minute))
		if err != nil {
			t.Fatal(err)
		}
		r, err := mu.RLock(w) // renewed by the watchdog
		if err != nil {
			t.Fatal(err)
		}
		gone, err := relocktest.New(t, b).RWLock("beside-lost").ForceUnlock(context.Background())
		if err != nil || !gone {
			t.Fatalf("ForceUnlock by another client: %v, %v; want true", gone, err)
		}
		redistest.Recv(t, r.Done(), 2*lease, "the read hold's context did not end after its lock was deleted")
		if cause := context.Cause(r); !errors.Is(cause, relock.ErrLeaseLost) {
			t.Fatalf("the read hold's context ended with cause %v; want ErrLeaseLost", cause)
		}
		// A check is one round trip; a lease is room for a loaded machine, and still far
		// below the write hold's own minute.
		redistest.Recv(t, w.Done(), lease, "the write hold's context lives on after the read hold beside it was found gone with the hash")
		if cause := context.Cause(w); !errors.Is(cause, relock.ErrLeaseLost) {
			t.Errorf("the write hold's context ended with cause %v; want ErrLeaseLost", cause)
		}
	})
}

// releaseMessages is what a listener on a read-write lock's channel heard of releases, in
// order: "0" and "1". Wake codes and lease announcements go out on the channel too.
func releaseMessages(l *redistest.Listener) []string {
	var releases []string
	for _, m := range l.Messages() {
		if m == "0" || m == "1" {
			releases = append(releases, m)
		}
	}
	return releases
}

// A release beside another reader whose count is too high for its timeout keys to be
// walked (a count no reader re-enters to: tampered data, or debris) returns at once and
// leaves that reader's hold, and the lock, as they were. (The release walked every one of
// the other reader's timeout keys, as Redisson's does, to find the longest: a count of
// 2^63-1 kept the server running the script for ever.)
func TestReleaseBesideAReaderOfCountlessHolds(t *testing.T) {
	const java = "0d2c8f0e-5b1a-4c6e-9f3d-2a7b8c9d0e1f:1"
	const count = "9223372036854775807"
	redistest.Real(t, func(t *testing.T, b *redistest.Backend) {
		c := relocktest.New(t, b)
		side := b.Client(t)
		const name = "countless"
		redistest.MustDo(t, side, "HSET", name, "mode", "read", java, count)
		redistest.MustDo(t, side, "SET", "{"+name+"}:"+java+":rwlock_timeout:"+count, "1", "PX", "60000")
		redistest.MustDo(t, side, "PEXPIRE", name, "60000")
		mu := c.RWLock(name)
		r, err := mu.RLock(redistest.Context(t, 30*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		if err := mu.RUnlock(r); err != nil {
			t.Fatalf("RUnlock beside the other reader: %v", err)
		}
		if rs := readers(t, side, name); len(rs) != 1 || rs[java] != count {
			t.Fatalf("readers after the release: %v; want the other reader's count alone", rs)
		}
		if ttl, err := redistest.Do(t, side, "PTTL", name).AsInt64(); err != nil || ttl <= 0 {
			t.Fatalf("the lock's PTTL after the release: %d, %v; want it held still", ttl, err)
		}
	})
}

// A release beside another reader whose hold lasts millions of years (beyond what a Lua
// number prints as a whole number, 10^17 ms; only another client sets such a lease) is
// answered like any other, and leaves that reader's hold and the lock as they were: the
// lock's expiry is never handed to PEXPIRE beyond 2^53 ms.
func TestReleaseBesideAReaderOfMillionsOfYears(t *testing.T) {
	const java = "0d2c8f0e-5b1a-4c6e-9f3d-2a7b8c9d0e1f:1"
	const far = "4000000000000000000" // ms
	// A real server only: miniredis keeps expiries as a time.Duration.
	redistest.Real(t, func(t *testing.T, b *redistest.Backend) {
		c := relocktest.New(t, b)
		side := b.Client(t)
		const name = "millions-reader"
		redistest.MustDo(t, side, "HSET", name, "mode", "read", java, "1")
		redistest.MustDo(t, side, "SET", "{"+name+"}:"+java+":rwlock_timeout:1", "1", "PX", far)
		redistest.MustDo(t, side, "PEXPIRE", name, far)
		mu := c.RWLock(name)
		r, err := mu.RLock(redistest.Context(t, 30*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		if err := mu.RUnlock(r); err != nil {
			t.Fatalf("RUnlock beside the other reader: %v", err)
		}
		if rs := readers(t, side, name); len(rs) != 1 || rs[java] != "1" {
			t.Fatalf("readers after the release: %v; want the other reader's hold alone", rs)
		}
		if ttl, err := redistest.Do(t, side, "PTTL", name).AsInt64(); err != nil || ttl <= 0 {
			t.Fatalf("the lock's PTTL after the release: %d, %v; want it held still", ttl, err)
		}
	})
}
