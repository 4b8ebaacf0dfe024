package leases

import (
	"context"
	"errors"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/relock-go/relock/internal/lockerr"
	"github.com/relock-go/relock/internal/redistest"
	"github.com/relock-go/relock/internal/script"
)

// stall is a logger's handler that holds up the watchdog's loop in its report of a failed
// renewal round, as a slow log sink or a descheduled goroutine would: entered closes when
// the loop is held there, and the loop goes on when release closes, or after 5s at most.
type stall struct {
	entered, release chan struct{}
	once             sync.Once
	left             atomic.Bool // the loop went on from the handler
}

func newStall() *stall { return &stall{entered: make(chan struct{}), release: make(chan struct{})} }

func (s *stall) Enabled(context.Context, slog.Level) bool { return true }
func (s *stall) WithAttrs([]slog.Attr) slog.Handler       { return s }
func (s *stall) WithGroup(string) slog.Handler            { return s }
func (s *stall) Handle(_ context.Context, r slog.Record) error {
	if !strings.Contains(r.Message, "renewal failed") {
		return nil
	}
	s.once.Do(func() { close(s.entered) })
	select {
	case <-s.release:
	case <-time.After(5 * time.Second):
	}
	s.left.Store(true)
	return nil
}

// waitEntered waits, bounded, until the watchdog's loop is held in the handler.
func (s *stall) waitEntered(t *testing.T) {
	t.Helper()
	select {
	case <-s.entered:
	case <-time.After(10 * time.Second):
		t.Fatal("no failed renewal round was logged within 10s")
	}
}

// A hold's context that is asked whether it is still live (Err), or why it ended
// (context.Cause), looks at the hold's local deadline itself: once the lease has run out,
// it says the hold ended (cause ErrLeaseLost) even while the watchdog's loop, which would
// end it, has not run (a paused process resumes with the holder's goroutine first; a loop
// late by a scheduling delay lets another client take the lock the moment Redis expires
// it).
func TestContextSeesTheDeadlineWhileTheLoopIsHeldUp(t *testing.T) {
	b := redistest.Mini(t)
	rc := b.Client(t)
	w := newWatchdog(rc, 3*time.Second, false, nil)
	defer w.Close()
	s := newStall()
	w.SetLogger(slog.New(s))
	defer close(s.release)
	hold(t, w, rc, "renewed", "o:1") // gives the loop a round to fail
	b.Mini.SetError("LOADING Redis is loading the dataset in memory")
	s.waitEntered(t)

	const lease = 100 * time.Millisecond
	fixed := func(name string) context.Context {
		t.Helper()
		ctx, ok := w.Acquired(new(Context), context.Background(), Grant{Name: name, Owner: "o:1", Who: "o:1", Count: 1,
			Sent: time.Now(), Lease: lease, Renewal: script.RLockRenew()})
		if !ok {
			t.Fatalf("the fixed-lease hold of %s was refused", name)
		}
		if err := ctx.Err(); err != nil {
			t.Fatalf("the fixed-lease hold of %s ended as it was taken: %v", name, context.Cause(ctx))
		}
		return ctx
	}
	asked, caused := fixed("asked"), fixed("caused")
	time.Sleep(lease + 50*time.Millisecond)
	if s.left.Load() {
		t.Skip("the loop was held up for less than the lease: nothing to check")
	}
	if cause := context.Cause(caused); !errors.Is(cause, lockerr.ErrLeaseLost) {
		t.Errorf("Cause, asked first, of a hold whose lease ran out 50ms ago, with the watchdog's loop held up: %v; want ErrLeaseLost", cause)
	}
	if err := asked.Err(); !errors.Is(err, context.Canceled) {
		t.Errorf("Err of a hold whose lease ran out 50ms ago, with the watchdog's loop held up: %v; want context.Canceled", err)
	}
	if cause := context.Cause(asked); !errors.Is(cause, lockerr.ErrLeaseLost) {
		t.Errorf("cause after Err: %v; want ErrLeaseLost", cause)
	}
}

// Close waits for the renewal loop to end: when it returns, the loop has returned too,
// even when the loop was busy as Close was called.
func TestCloseJoinsTheLoop(t *testing.T) {
	b := redistest.Mini(t)
	rc := b.Client(t)
	w := newWatchdog(rc, 900*time.Millisecond, false, nil)
	s := newStall()
	w.SetLogger(slog.New(s))
	hold(t, w, rc, "renewed", "o:1")
	b.Mini.SetError("LOADING Redis is loading the dataset in memory")
	s.waitEntered(t)
	go func() {
		time.Sleep(100 * time.Millisecond)
		close(s.release)
	}()
	w.Close()
	if !s.left.Load() {
		t.Error("Close returned while the renewal loop was still running")
	}
	select {
	case <-w.done:
	default:
		t.Error("Close returned before the renewal loop ended")
	}
}

// One renewal call renews at most 100 holds: 100 holds of one kind (outside a cluster)
// take one call a round, and 101 take two.
func TestRenewalCallsOfAHundred(t *testing.T) {
	for _, c := range []struct{ holds, calls int }{{100, 1}, {101, 2}} {
		t.Run(strconv.Itoa(c.holds), func(t *testing.T) {
			b := redistest.Mini(t)
			rc := b.Client(t)
			// A lease with room for the acquisitions before the first round on a loaded machine.
			w := newWatchdog(rc, 3*time.Second, false, nil)
			defer w.Close()
			for i := range c.holds {
				hold(t, w, rc, "batch:"+strconv.Itoa(i), "o:1")
			}
			waitRounds(t, w, 1)
			before := w.Stats()
			waitRounds(t, w, before.Ticks+1)
			after := w.Stats()
			rounds := after.Ticks - before.Ticks
			if calls := after.Calls - before.Calls; calls != uint64(c.calls)*rounds {
				t.Errorf("%d holds: %d calls in %d rounds; want %d a round", c.holds, calls, rounds, c.calls)
			}
			if renewed := after.Renewed - before.Renewed; renewed != uint64(c.holds)*rounds {
				t.Errorf("%d holds: %d renewals in %d rounds", c.holds, renewed, rounds)
			}
		})
	}
}

// Released returns only once no renewal of the hold can be sent any more: a round in
// flight that carries the hold (Redis paused) has ended when Released returns.
func TestReleasedWaitsForTheRoundInFlight(t *testing.T) {
	redistest.Real(t, func(t *testing.T, b *redistest.Backend) {
		rc := b.Client(t)
		w := newWatchdog(rc, 1500*time.Millisecond, false, nil)
		defer w.Close()
		hold(t, w, rc, "inflight", "o:1")
		waitRounds(t, w, 1)
		inFlight, resume := pauseInRound(t, b, w)
		w.Released("inflight", "o:1")
		if inFlight() {
			t.Error("Released returned while a renewal round carrying the hold was in flight")
		}
		resume()
	})
}

// releaser is a lock that the watchdog hands back at Closing.
type releaser struct{}

func (releaser) ReleaseAll(context.Context, string) error { return nil }

// Closing returns the holds known, with their locks, for the client to release, and from
// then on refuses a new hold (ok false, its context ended with ErrClosed: the caller must
// release what it took), while a re-entry of a known hold is still recorded.
func TestClosingRefusesNewHolds(t *testing.T) {
	rc := redistest.Mini(t).Client(t)
	w := newWatchdog(rc, 30*time.Second, false, nil)
	defer w.Close()
	grant := func(name string, count int64) Grant {
		return Grant{Name: name, Owner: "o:1", Who: "o:1", Count: count, Sent: time.Now(), Lease: w.lease, Renew: true,
			Renewal: script.RLockRenew(), Lock: releaser{}}
	}
	held, ok := w.Acquired(new(Context), context.Background(), grant("kept", 1))
	if !ok {
		t.Fatal("a hold was refused before Closing")
	}
	known := w.Closing()
	if len(known) != 1 || known[0].Owner != "o:1" || known[0].Lock == nil {
		t.Errorf("Closing returned %+v; want the one hold known, with its lock", known)
	}
	late, ok := w.Acquired(new(Context), context.Background(), grant("late", 1))
	if ok {
		t.Error("a hold taken after Closing was accepted: nobody would release it")
	}
	if cause := context.Cause(late); !errors.Is(cause, lockerr.ErrClosed) {
		t.Errorf("the refused hold's context: cause %v; want ErrClosed", cause)
	}
	if w.Holds("late", "o:1") {
		t.Error("the refused hold is in the table")
	}
	again, ok := w.Acquired(new(Context), held, grant("kept", 2))
	if !ok || again.Err() != nil {
		t.Errorf("a re-entry of a known hold after Closing: ok %v, context %v; want it recorded", ok, context.Cause(again))
	}
}

// A renewal round that finds a hold gone after the client has already replaced it (the
// owner took the lock again, first-level, while the round was in flight) leaves the new
// hold alone: it stays in the table, renewed, and its context live.
func TestRoundLeavesTheHoldThatReplacedOne(t *testing.T) {
	redistest.Real(t, func(t *testing.T, b *redistest.Backend) {
		rc := b.Client(t)
		w := newWatchdog(rc, 1500*time.Millisecond, false, nil)
		defer w.Close()
		grant := func() Grant {
			return Grant{Name: "replaced", Owner: "o:1", Who: "o:1", Count: 1, Sent: time.Now(), Lease: w.lease, Renew: true,
				Renewal: script.RLockRenew()}
		}
		// Known to the client, not in Redis: the round will find it gone.
		if _, ok := w.Acquired(new(Context), context.Background(), grant()); !ok {
			t.Fatal("the hold was refused")
		}
		_, resume := pauseInRound(t, b, w)
		ticks := w.Stats().Ticks
		next, ok := w.Acquired(new(Context), context.Background(), grant()) // first-level again: the old hold is gone
		if !ok {
			t.Fatal("the new hold was refused")
		}
		resume()
		waitRounds(t, w, ticks+1)
		if !w.Holds("replaced", "o:1") || next.Err() != nil {
			t.Errorf("after the round in flight found the old hold gone: new hold known %v, its context %v; want it kept",
				w.Holds("replaced", "o:1"), context.Cause(next))
		}
		if st := w.Stats(); st.Lost != 1 {
			t.Errorf("%d losses counted; want 1, the old hold's", st.Lost)
		}
	})
}

// A check (Check: the client's subscriber came back) whose round fails, as the first
// command after a restart may, is tried again soon, not at the next regular round: a hold
// that Redis lost ends within moments of Redis answering again.
func TestFailedCheckIsTriedAgainSoon(t *testing.T) {
	b := redistest.Mini(t)
	rc := b.Client(t)
	// A period (10s) far beyond the test's bound: only a check can end the hold in time.
	w := newWatchdog(rc, 30*time.Second, false, nil)
	defer w.Close()
	held := hold(t, w, rc, "checked", "o:1")
	b.Mini.Del("checked") // lost, as in a restart without persistence
	b.Mini.SetError("LOADING Redis is loading the dataset in memory")
	ticks := w.Stats().Ticks
	w.Check()
	waitRounds(t, w, ticks+1) // the check's round, failed
	b.Mini.SetError("")
	if held.Err() != nil {
		t.Fatalf("the hold ended in the failed check: %v", context.Cause(held))
	}
	select {
	case <-held.Done():
	case <-time.After(3 * time.Second):
		t.Fatal("the hold Redis lost was still live 3s after a failed check, with Redis answering again")
	}
	if cause := context.Cause(held); !errors.Is(cause, lockerr.ErrLeaseLost) {
		t.Errorf("cause %v; want ErrLeaseLost", cause)
	}
}

// A regular renewal round that fails (Redis refuses: LOADING) keeps its holds, and is tried
// again soon: once Redis answers again, the holds are renewed within a fraction of a
// period, not at the next regular round (docs/design.md: "renewed as soon as Redis
// answers again"). A hold taken just before a round that fails has only a period left when
// that round ends; a watchdog that waits a period more lets it end although Redis kept it.
func TestFailedRoundIsTriedAgainSoon(t *testing.T) {
	b := redistest.Mini(t)
	rc := b.Client(t)
	const lease = 6 * time.Second // a round every 2s
	w := newWatchdog(rc, lease, false, nil)
	defer w.Close()
	held := hold(t, w, rc, "renewed", "o:1")
	b.Mini.SetError("LOADING Redis is loading the dataset in memory")
	waitRounds(t, w, w.Stats().Ticks+2) // a whole round with Redis refusing, failed
	b.Mini.SetError("")
	renewed := w.Stats().Renewed
	answering := time.Now()
	// Three quarters of a period: the next regular round comes about a period after the
	// failed one started.
	for w.Stats().Renewed == renewed {
		if time.Since(answering) > w.period*3/4 {
			t.Fatalf("no renewal %v after Redis answered again, following a failed round (a round every %v)", time.Since(answering).Round(time.Millisecond), w.period)
		}
		time.Sleep(5 * time.Millisecond)
	}
	if err := held.Err(); err != nil {
		t.Fatalf("the hold ended: %v", context.Cause(held))
	}
}

// The watchdog renews every third of its lease: the rounds are due a third of the lease
// apart. (A lease long enough that the first round is not a whole period late on a loaded
// machine, which would restart the cadence.)
func TestRoundsEveryThirdOfTheLease(t *testing.T) {
	b := redistest.Mini(t)
	rc := b.Client(t)
	const lease = 3 * time.Second
	w := newWatchdog(rc, lease, false, nil)
	defer w.Close()
	hold(t, w, rc, "third", "o:1")
	dueAt := func() time.Time {
		w.mu.Lock()
		defer w.mu.Unlock()
		return w.wakeAt
	}
	first := dueAt()
	waitRounds(t, w, 1)
	var second time.Time
	redistest.Eventually(t, 10*time.Second, "the round after the first was never scheduled", func() bool {
		second = dueAt()
		return second.After(first)
	})
	if gap := second.Sub(first); gap != lease/3 {
		t.Errorf("the second round is due %v after the first; want a third of the %v lease, %v", gap, lease, lease/3)
	}
}

// A renewal sets the watchdog's whole lease in Redis, and the hold's local deadline never
// lies later than the expiry it set (the lease-truth rule): right after a round, the key
// has about a lease left, and the deadline is within it.
func TestRenewalSetsTheWholeLease(t *testing.T) {
	b := redistest.Mini(t)
	rc := b.Client(t)
	const lease = 3 * time.Second
	w := newWatchdog(rc, lease, false, nil)
	defer w.Close()
	hold(t, w, rc, "renewed", "o:1")
	waitRounds(t, w, 1)
	w.mu.Lock()
	deadline := w.holds[holdKey{"renewed", "o:1"}].deadline
	w.mu.Unlock()
	asked := time.Now()
	pttl := time.Duration(redistest.PTTL(t, rc, "renewed")) * time.Millisecond
	// Redis's expiry is at least asked+pttl; a margin for the rounding of PTTL.
	if expiry := asked.Add(pttl); deadline.After(expiry.Add(100 * time.Millisecond)) {
		t.Errorf("after a round the hold's local deadline is %v past the key's expiry in Redis (PTTL %v of a %v lease)",
			deadline.Sub(expiry), pttl, lease)
	}
	if pttl < lease*2/3 {
		t.Errorf("PTTL %v right after a renewal round; want about the %v lease", pttl, lease)
	}
}

// Extend sets the lease it is given, in Redis and in the hold's deadline, whatever the
// watchdog's own lease.
func TestExtendSetsItsOwnLease(t *testing.T) {
	b := redistest.Mini(t)
	rc := b.Client(t)
	w := newWatchdog(rc, 3*time.Second, false, nil)
	defer w.Close()
	held := hold(t, w, rc, "extended", "o:1")
	const d = 20 * time.Second
	sent := time.Now()
	if err := w.Extend(context.Background(), "extended", "o:1", d); err != nil {
		t.Fatalf("Extend: %v", err)
	}
	if pttl := time.Duration(redistest.PTTL(t, rc, "extended")) * time.Millisecond; pttl < d-5*time.Second {
		t.Errorf("PTTL %v after Extend by %v; want about %v", pttl, d, d)
	}
	w.mu.Lock()
	deadline := w.holds[holdKey{"extended", "o:1"}].deadline
	w.mu.Unlock()
	if deadline.Before(Until(sent, d)) {
		t.Errorf("the hold's deadline is %v after Extend was sent; want %v, its lease less the allowance for clocks", deadline.Sub(sent), d-Allowance(d))
	}
	if held.Err() != nil {
		t.Errorf("the hold's context ended: %v", context.Cause(held))
	}
}

// pauseInRound pauses b's server and returns once a renewal round of w is in flight to it:
// inFlight reports whether one still is, and resume continues the server, as the test's
// end does if it has not.
func pauseInRound(t *testing.T, b *redistest.Backend, w *Watchdog) (inFlight func() bool, resume func()) {
	t.Helper()
	b.Server.Pause(t)
	var once sync.Once
	resume = func() { once.Do(func() { b.Server.Resume(t) }) }
	t.Cleanup(resume)
	inFlight = func() bool {
		w.mu.Lock()
		defer w.mu.Unlock()
		return w.flight != nil
	}
	redistest.Eventually(t, 10*time.Second, "no renewal round was sent to the paused server", inFlight)
	return inFlight, resume
}

// A hold that Closing found stays in the table for Close to release, even when its owner
// is abandoned meanwhile (a program that shuts down drops its holds' contexts as its calls
// fail with ErrClosed). Guards against the abandonment taking it out under Close, whose
// release then found no hold and released nothing, leaving the lock held for a lease (a
// loaded -race run of the client's TestCloseDuringCallsOfManyGoroutines found one).
func TestClosingKeepsAbandonedHoldsForClose(t *testing.T) {
	rc := redistest.Mini(t).Client(t)
	w := newWatchdog(rc, 30*time.Second, false, nil)
	defer w.Close()
	g := Grant{Name: "kept", Owner: "o:1", Who: "o:1", Count: 1, Sent: time.Now(), Lease: w.lease, Renew: true,
		Renewal: script.RLockRenew(), Lock: releaser{}}
	if _, ok := w.Acquired(new(Context), context.Background(), g); !ok {
		t.Fatal("a hold was refused before Closing")
	}
	if known := w.Closing(); len(known) != 1 {
		t.Fatalf("Closing returned %+v; want the one hold", known)
	}
	w.Abandon("o:1")
	if !w.Holds("kept", "o:1") {
		t.Fatal("the hold Closing found was abandoned under Close: Close's release would find nothing to release")
	}
	if st := w.Stats(); st.Abandoned != 0 {
		t.Errorf("abandoned %d holds while closing; want none", st.Abandoned)
	}
}
