package semaphore_test

import (
	"context"
	"encoding/hex"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/relock-go/relock"
	"github.com/relock-go/relock/internal/redistest"
	"github.com/relock-go/relock/internal/redistest/relocktest"
	"github.com/relock-go/relock/internal/script"
	"github.com/relock-go/relock/semaphore"
)

// While the server refuses commands unrun (here TRYAGAIN, as a cluster answers for the
// whole of a slot move), the semaphore's acquisitions try again only while their context
// lives: a refused attempt is not in flight, so nothing is left to finish past the
// caller's context. Acquire, TryAcquire and AcquireLease each return an error for which
// errors.Is(err, ctx.Err()) holds, naming the semaphore, and take nothing. (They once
// went on until the client's timeout, AcquireLease twice over, and returned the refusal.)
func TestRefusedAcquisitionEndsWithTheContext(t *testing.T) {
	b := redistest.Mini(t) // a server that refuses commands unrun on demand
	c := relocktest.New(t, b, relock.WithTimeout(time.Minute))
	s := c.Semaphore("refused-past-ctx")
	mustSet(t, s, 1)
	b.Mini.SetError("TRYAGAIN Multiple keys request during rehashing of slot")
	for _, call := range []struct {
		name string
		f    func(ctx context.Context) error
	}{
		{"Acquire", func(ctx context.Context) error { return s.Acquire(ctx, 1) }},
		{"TryAcquire", func(ctx context.Context) error { _, err := s.TryAcquire(ctx, 1); return err }},
		{"AcquireLease", func(ctx context.Context) error { _, err := s.AcquireLease(ctx, 1); return err }},
	} {
		ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
		done := make(chan error, 1)
		go func() { done <- call.f(ctx) }()
		// The client's timeout is a minute: a call kept going past the caller's context
		// would still be trying.
		err := redistest.Recv(t, done, 20*time.Second, call.name+" while refused, after its context ended")
		cancel()
		var le *relock.Error
		if !errors.Is(err, context.DeadlineExceeded) || !errors.As(err, &le) || le.Name != "refused-past-ctx" {
			t.Errorf("%s while refused, its context ended: %v; want the context's error naming the semaphore", call.name, err)
		}
	}
	b.Mini.SetError("")
	wantValue(t, b.Client(t), "refused-past-ctx", "1")
}

// While the server refuses commands unrun until it is ready (LOADING after a restart,
// CLUSTERDOWN or TRYAGAIN in a failover), the semaphore's acquisitions and releases try
// again within the client's timeout instead of failing, as a lock's calls do: the refusal
// says the script never ran, so the count moves once per call.
func TestRetryWhileServerNotReady(t *testing.T) {
	t.Parallel()
	redistest.EachRefusal(t, func(t *testing.T, b *redistest.Backend, refuse func()) {
		c := relocktest.New(t, b)
		side := b.Client(t)
		s := c.Semaphore("not-ready")
		mustSet(t, s, 4)
		ctx := redistest.Context(t, time.Minute)

		refuse()
		if err := s.Acquire(ctx, 1); err != nil {
			t.Fatalf("Acquire while the server refused commands: %v", err)
		}
		wantValue(t, side, "not-ready", "3")

		refuse()
		if ok, err := s.TryAcquire(ctx, 1); !ok || err != nil {
			t.Fatalf("TryAcquire while the server refused commands = %v, %v; want true, nil", ok, err)
		}
		wantValue(t, side, "not-ready", "2")

		refuse()
		if err := s.Release(ctx, 2); err != nil {
			t.Fatalf("Release while the server refused commands: %v", err)
		}
		wantValue(t, side, "not-ready", "4")

		refuse()
		held, err := s.AcquireLease(ctx, 3)
		if err != nil {
			t.Fatalf("AcquireLease while the server refused commands: %v", err)
		}
		wantValue(t, side, "not-ready", "1")

		refuse()
		if err := s.ReleaseLease(held); err != nil {
			t.Fatalf("ReleaseLease while the server refused commands: %v", err)
		}
		wantValue(t, side, "not-ready", "4")
		if !errors.Is(held.Err(), context.Canceled) || context.Cause(held) != context.Canceled {
			t.Fatalf("the released lease's context: %v (cause %v); want context.Canceled with no cause of its own", held.Err(), context.Cause(held))
		}
	})
}

// A call whose reply is lost may have run, and is not sent again: a second send could take
// the permits twice, or give them back twice. The call returns the connection's error, and
// the count has moved once at most.
func TestLostReplyNotSentAgain(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		proxy := redistest.StartProxy(t, b.Addr)
		c := relocktest.New(t, &redistest.Backend{Name: b.Name, Addr: proxy.Addr()})
		side := b.Client(t)
		s := c.Semaphore("lost-reply")
		mustSet(t, s, 4)
		ctx := redistest.Context(t, time.Minute)
		// The scripts loaded first, so that the faults hit the calls themselves.
		if err := s.Acquire(ctx, 1); err != nil {
			t.Fatal(err)
		}
		if err := s.Release(ctx, 1); err != nil {
			t.Fatal(err)
		}

		proxy.LoseReplyTo("lost-reply")
		_ = s.Acquire(ctx, 1) // its error, or nil were it to learn that it ran: the count is the point
		if proxy.Armed() != 0 {
			t.Fatal("the fault never fired: the test proved nothing")
		}
		if v := value(t, side, "lost-reply"); v != "3" && v != "4" {
			t.Fatalf("count %s after one Acquire(1) of 4 whose reply was lost; want 3 (it ran) or 4", v)
		}

		mustTry(t, s, 1, true) // a permit the client knows it holds
		before := value(t, side, "lost-reply")
		proxy.LoseReplyTo("lost-reply")
		_ = s.Release(ctx, 1)
		if proxy.Armed() != 0 {
			t.Fatal("the fault never fired: the test proved nothing")
		}
		n, err := strconv.Atoi(before)
		if err != nil {
			t.Fatal(err)
		}
		if v := value(t, side, "lost-reply"); v != strconv.Itoa(n+1) && v != before {
			t.Fatalf("count %s after one Release(1) from %s whose reply was lost; want %d (it ran) or %s", v, before, n+1, before)
		}
	})
}

// An Acquire whose first attempt's reply is lost returns the connection's error, and
// leaves the queue: the attempt may have run and queued its client, and that entry must
// not hold back the waiters of other clients (the client's watchdog timeout is a minute,
// far beyond the 15s bound, so the entry's running out cannot stand in).
//
// Guards against an Acquire that returns the error of its first attempt without leaving
// the queue.
func TestLostFirstAttemptLeavesTheQueue(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		const name = "sem-lost-first"
		side := b.Client(t)
		proxy := redistest.StartProxy(t, b.Addr)
		lost := relocktest.New(t, &redistest.Backend{Name: b.Name, Addr: proxy.Addr()}, relock.WithWatchdogTimeout(time.Minute))
		holder, next := relocktest.New(t, b), relocktest.New(t, b)
		ctx := context.Background()
		mustSet(t, holder.Semaphore(name), 2)
		// The scripts loaded first, so that the fault hits the attempt itself.
		mustTry(t, lost.Semaphore(name), 1, true)
		if err := lost.Semaphore(name).Release(ctx, 1); err != nil {
			t.Fatal(err)
		}
		mustTry(t, holder.Semaphore(name), 2, true)

		proxy.LoseReplyTo(name)
		if err := lost.Semaphore(name).Acquire(redistest.Context(t, 30*time.Second), 1); err == nil {
			t.Fatal("Acquire whose reply was lost returned nil with no permit free")
		}
		if proxy.Armed() != 0 {
			t.Fatal("the fault never fired: the test proved nothing")
		}
		done := acquireAsync(redistest.Context(t, 30*time.Second), next.Semaphore(name), 1)
		parked(t, next, 1, "the other client's waiter")
		if err := holder.Semaphore(name).Release(ctx, 1); err != nil {
			t.Fatal(err)
		}
		if err := redistest.Recv(t, done, 15*time.Second, "the other client's Acquire, behind the entry of an Acquire that returned"); err != nil {
			t.Fatalf("other client: %v", err)
		}
		wantValue(t, side, name, "0")
	})
}

// A lease call whose reply is lost may have taken the permits under ids that its caller
// never learns: nobody would renew them, and nobody could give them back. What the call
// reports must agree with Redis: an error, with nothing leased and the count as it was, or
// a lease whose permits Redis holds under the ids it carries. The client's watchdog
// timeout is a minute, so that the permits' lease running out cannot stand in.
//
// Guards against a lease call that returns the connection's error and leaves the permits
// its lost request took leased until their lease runs out.
func TestLeaseReplyLost(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		side := b.Client(t)
		proxy := redistest.StartProxy(t, b.Addr)
		c := relocktest.New(t, &redistest.Backend{Name: b.Name, Addr: proxy.Addr()}, relock.WithWatchdogTimeout(time.Minute))
		ctx := redistest.Context(t, time.Minute)
		for _, tc := range []struct {
			call string
			take func(s *semaphore.Weighted) (context.Context, error)
		}{
			{"AcquireLease", func(s *semaphore.Weighted) (context.Context, error) { return s.AcquireLease(ctx, 2) }},
			{"TryAcquireLease", func(s *semaphore.Weighted) (context.Context, error) {
				held, ok, err := s.TryAcquireLease(ctx, 2)
				if err == nil && !ok {
					err = errors.New("not taken, with 3 permits free")
				}
				return held, err
			}},
		} {
			t.Run(tc.call, func(t *testing.T) {
				name := "lease-lost:" + tc.call
				s := c.Semaphore(name)
				mustSet(t, s, 3)
				// The scripts loaded first, so that the fault hits the call itself.
				warmLeases(t, s, ctx)

				proxy.LoseReplyTo(name)
				held, err := tc.take(s)
				if proxy.Armed() != 0 {
					t.Fatal("the fault never fired: the test proved nothing")
				}
				zs := leased(t, side, name)
				if err != nil {
					if len(zs) != 0 || value(t, side, name) != "3" {
						t.Fatalf("%s(2) whose reply was lost returned %v, and Redis holds %d leased permits, count %s; want none leased and 3",
							tc.call, err, len(zs), value(t, side, name))
					}
					return
				}
				ids := s.PermitIDs(held)
				for _, id := range ids {
					if _, ok := zs[id]; !ok {
						t.Errorf("the lease's permit %s is not leased in Redis", id)
					}
				}
				if len(ids) != 2 || len(zs) != 2 {
					t.Fatalf("%s(2) whose reply was lost returned a lease of %d permits, and Redis holds %d; want 2 and 2", tc.call, len(ids), len(zs))
				}
				wantValue(t, side, name, "1")
				if err := s.ReleaseLease(held); err != nil {
					t.Fatal(err)
				}
				wantValue(t, side, name, "3")
			})
		}
	})
}

// A ReleaseLease whose reply is lost after Redis gave the permits back reports what Redis
// did: the lease released, its context ended with context.Canceled and no cause, the count
// whole again. Giving back a lease's permits is safe to send again (the return script takes
// only the ids it finds, and ids are the lease's alone), and a resend that finds none of
// them, after a first send that went out while the lease was live, finds the first send's
// work (as a lost unlock's resend does).
//
// Guards against a ReleaseLease that returns the connection's error and ends the lease's
// context as lost, while Redis released it.
func TestReleaseLeaseReplyLost(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		const name = "lease-release-lost"
		side := b.Client(t)
		proxy := redistest.StartProxy(t, b.Addr)
		c := relocktest.New(t, &redistest.Backend{Name: b.Name, Addr: proxy.Addr()}, relock.WithWatchdogTimeout(time.Minute))
		ctx := redistest.Context(t, time.Minute)
		s := c.Semaphore(name)
		mustSet(t, s, 3)
		// The scripts loaded first, so that the fault hits the call itself.
		warmLeases(t, s, ctx)
		held, err := s.AcquireLease(ctx, 2)
		if err != nil {
			t.Fatal(err)
		}
		wantValue(t, side, name, "1")

		// The channel is in the return script's keys and in no renewal's.
		proxy.LoseReplyTo("redisson_sc:{" + name + "}")
		err = s.ReleaseLease(held)
		if proxy.Armed() != 0 {
			t.Fatal("the fault never fired: the test proved nothing")
		}
		wantValue(t, side, name, "3")
		if zs := leased(t, side, name); len(zs) != 0 {
			t.Fatalf("%d permits still leased after ReleaseLease", len(zs))
		}
		if err != nil {
			t.Errorf("ReleaseLease whose reply was lost, Redis having given the permits back: %v; want nil", err)
		}
		if held.Err() == nil || context.Cause(held) != context.Canceled {
			t.Errorf("the released lease's context: %v (cause %v); want context.Canceled with no cause of its own", held.Err(), context.Cause(held))
		}
	})
}

// A ReleaseLease whose first send never ran (its connection broke before Redis read it)
// is sent again, and the resend's answer is the release's: when one of the lease's two
// permits was taken away meanwhile, or ran out without being put back yet, the resend
// gives back what is left of it, and ReleaseLease says the lease was lost (ErrNotHeld, the
// context's cause ErrLeaseLost), as a release whose reply came would
// (Weighted.ReleaseLease), rather than a whole release.
func TestReleaseLeaseResentFindsItPartlyGone(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		for _, tc := range []struct {
			how  string
			lose func(name, id string) []string // the command that takes the permit away
			back string                         // the count after ReleaseLease
		}{
			{"taken away", func(name, id string) []string { return []string{"ZREM", leasesKey(name), id} }, "2"},
			// Its id still in the zset, its lease over: given back, but not as held.
			{"run out", func(name, id string) []string { return []string{"ZADD", leasesKey(name), "XX", "1", id} }, "3"},
		} {
			t.Run(tc.how, func(t *testing.T) {
				name := "lease-release-resent:" + strings.ReplaceAll(tc.how, " ", "-")
				side := b.Client(t)
				late := redistest.NewLateRequests(b.Client(t))
				c := relocktest.On(t, late, relock.WithWatchdogTimeout(time.Minute), relock.WithLogger(nil))
				ctx := redistest.Context(t, time.Minute)
				s := c.Semaphore(name)
				mustSet(t, s, 3)
				// The scripts loaded first, so that the fault hits the call itself.
				warmLeases(t, s, ctx)
				held := acquireLease(t, s, 2)
				id, _ := hex.DecodeString(s.PermitIDs(held)[1])
				redistest.MustDo(t, side, tc.lose(name, string(id))...)

				arrived, send := late.HoldBroken(script.SemaphoreReturn().SHA1, "redisson_sc:{"+name+"}")
				defer send() // it finds none of the lease's permits then
				err := s.ReleaseLease(held)
				redistest.Arrived(t, arrived, "ReleaseLease", err)
				wantErr(t, err, relock.ErrNotHeld, name)
				wantValue(t, side, name, tc.back)
				if zs := leased(t, side, name); len(zs) != 0 {
					t.Fatalf("%d permits still leased after ReleaseLease", len(zs))
				}
				if !errors.Is(context.Cause(held), relock.ErrLeaseLost) {
					t.Errorf("the lease's context has cause %v; want ErrLeaseLost", context.Cause(held))
				}
			})
		}
	})
}

// A ReleaseLease that began while the client still counted the lease, but whose first
// send that Redis could run went out only after the lease had run out (its earlier sends
// were refused unrun, and the refused renewals let the lease lapse), and whose reply was
// then lost, cannot tell that it released anything: its resend finds none of the ids, and
// that is the lease's running out, not the lost send's doing. The answer is ErrNotHeld and
// the lease's context ends as lost (Weighted.ReleaseLease: only a resend after a first
// send made while the lease was live reports that send's release).
func TestReleaseLeaseReplyLostAfterRefusalsPastTheLease(t *testing.T) {
	t.Parallel()
	const name, lease = "lease-refused-then-lost", 300 * time.Millisecond
	b := redistest.Mini(t) // a server that refuses commands unrun on demand
	proxy := redistest.StartProxy(t, b.Addr)
	c := relocktest.New(t, &redistest.Backend{Name: b.Name, Addr: proxy.Addr()}, relock.WithWatchdogTimeout(lease))
	ctx := redistest.Context(t, time.Minute)
	s := c.Semaphore(name)
	mustSet(t, s, 3)
	// The scripts loaded first, so that the fault hits the call itself.
	warmLeases(t, s, ctx)
	held := acquireLease(t, s, 2)

	b.Mini.SetError("LOADING Redis is loading the dataset in memory")
	defer b.Mini.SetError("")
	released := make(chan error, 1)
	go func() { released <- s.ReleaseLease(held) }() // in its turn at once, then refused
	time.Sleep(3 * lease)                            // past the lease, locally and in Redis
	// The channel is in the return script's keys and in no renewal's.
	proxy.LoseReplyTo("redisson_sc:{" + name + "}")
	b.Mini.SetError("")
	err := redistest.Recv(t, released, 10*time.Second, "ReleaseLease did not return")
	if proxy.Armed() != 0 {
		t.Fatal("the fault never fired: the test proved nothing")
	}
	if !errors.Is(err, relock.ErrNotHeld) {
		t.Errorf("ReleaseLease whose first send that could run went out after the lease, its reply lost: %v; want ErrNotHeld", err)
	}
	if cause := context.Cause(held); !errors.Is(cause, relock.ErrLeaseLost) {
		t.Errorf("the lease's context: %v; want ErrLeaseLost", cause)
	}
	if n := available(t, s); n != 3 {
		t.Errorf("AvailablePermits after the lease ran out = %d; want 3", n)
	}
}

// warmLeases takes a lease of one permit of s and releases it, which loads the scripts of
// leases.
func warmLeases(t *testing.T, s *semaphore.Weighted, ctx context.Context) {
	t.Helper()
	warm, err := s.AcquireLease(ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.ReleaseLease(warm); err != nil {
		t.Fatal(err)
	}
}

// A ReleaseLease whose send and first resend both fail for want of an answer (their
// connection broke before Redis read them) is sent again while the client's timeout lasts
// (Weighted.ReleaseLease), and the send that gets an answer is the release's: the lease
// is released, its permits back, its context ended with context.Canceled and no cause.
//
// Guards against a ReleaseLease that resends only once, and reports the connection's
// error while the permits stay leased.
func TestReleaseLeaseResentUntilAnswered(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		const name = "lease-release-resent-twice"
		side := b.Client(t)
		late := redistest.NewLateRequests(b.Client(t))
		c := relocktest.On(t, late, relock.WithWatchdogTimeout(time.Minute), relock.WithLogger(nil))
		ctx := redistest.Context(t, time.Minute)
		s := c.Semaphore(name)
		mustSet(t, s, 3)
		// The scripts loaded first, so that the fault hits the call itself.
		warmLeases(t, s, ctx)
		held := acquireLease(t, s, 2)

		// The send and the first resend never reach Redis; the next one does.
		var arrived []<-chan struct{}
		for range 2 {
			a, send := late.HoldBroken(script.SemaphoreReturn().SHA1, "redisson_sc:{"+name+"}")
			defer send() // it finds none of the lease's permits then
			arrived = append(arrived, a)
		}
		err := s.ReleaseLease(held)
		for _, a := range arrived {
			redistest.Arrived(t, a, "ReleaseLease", err)
		}
		if err != nil {
			t.Fatalf("ReleaseLease answered on its third send: %v; want nil", err)
		}
		wantValue(t, side, name, "3")
		if zs := leased(t, side, name); len(zs) != 0 {
			t.Fatalf("%d permits still leased after ReleaseLease", len(zs))
		}
		if held.Err() == nil || context.Cause(held) != context.Canceled {
			t.Errorf("the released lease's context: %v (cause %v); want context.Canceled with no cause of its own", held.Err(), context.Cause(held))
		}
	})
}

// A ReleaseLease that gets no answer at all within the client's timeout cannot tell
// whether Redis gave the permits back: it returns the connection's error, and the lease is
// no longer renewed, so that its permits come back within a lease (1s here) rather than
// stay leased by a lease its holder has given up; its context ends with ErrLeaseLost.
//
// Guards against a ReleaseLease that, failing, leaves the watchdog renewing the lease.
func TestReleaseLeaseUnansweredStopsRenewal(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		const name = "lease-release-unanswered"
		late := redistest.NewLateRequests(b.Client(t))
		c := relocktest.On(t, late, relock.WithWatchdogTimeout(time.Second), relock.WithTimeout(time.Second), relock.WithLogger(nil))
		ctx := redistest.Context(t, time.Minute)
		s := c.Semaphore(name)
		mustSet(t, s, 3)
		// The scripts loaded first, so that the fault hits the call itself.
		warmLeases(t, s, ctx)
		held := acquireLease(t, s, 2)

		// Every send within the client's timeout breaks before Redis reads it (more holds
		// than resends fit in a second). The held requests are never sent.
		var first <-chan struct{}
		for i := range 200 {
			a, _ := late.HoldBroken(script.SemaphoreReturn().SHA1, "redisson_sc:{"+name+"}")
			if i == 0 {
				first = a
			}
		}
		err := s.ReleaseLease(held)
		redistest.Arrived(t, first, "ReleaseLease", err)
		if err == nil || errors.Is(err, relock.ErrNotHeld) {
			t.Fatalf("ReleaseLease with no answer from Redis: %v; want the connection's error", err)
		}
		redistest.Recv(t, held.Done(), 10*time.Second, "the context of a lease whose release got no answer")
		if cause := context.Cause(held); !errors.Is(cause, relock.ErrLeaseLost) {
			t.Errorf("the lease's context has cause %v; want ErrLeaseLost", cause)
		}
		redistest.Eventually(t, 10*time.Second, "the permits of a lease no longer renewed never came back",
			func() bool { return available(t, s) == 3 })
	})
}
