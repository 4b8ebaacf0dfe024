package retry_test

import (
	"context"
	"errors"
	"os"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/relock-go/relock/internal/lockerr"
	"github.com/relock-go/relock/internal/redistest"
	"github.com/relock-go/relock/internal/retry"
)

func TestMain(m *testing.M) {
	os.Exit(redistest.Main(m))
}

// replies are real error replies of a Redis (a miniredis): the refusals of a command unrun
// until the server or the cluster is ready, and an answer (WRONGTYPE).
type replies struct {
	refusals []error // LOADING, CLUSTERDOWN, TRYAGAIN
	answer   error   // WRONGTYPE
}

func redisReplies(t *testing.T) replies {
	t.Helper()
	b := redistest.Mini(t)
	rc := b.Client(t)
	ctx := redistest.Context(t, 30*time.Second)
	var r replies
	for _, refusal := range []string{
		"LOADING Redis is loading the dataset in memory",
		"CLUSTERDOWN The cluster is down",
		"TRYAGAIN Multiple keys request during rehashing of slot",
	} {
		b.Mini.SetError(refusal)
		// A write: rueidis itself sends a read-only command again while it is refused.
		err := rc.Do(ctx, rc.B().Set().Key("k").Value("v").Build()).Error()
		b.Mini.SetError("")
		if !retry.Refused(err) {
			t.Fatalf("%q: Refused(%v) = false", refusal, err)
		}
		r.refusals = append(r.refusals, err)
	}
	redistest.MustDo(t, rc, "SET", "string", "v")
	r.answer = rc.Do(ctx, rc.B().Hget().Key("string").Field("f").Build()).Error()
	if _, ok := rueidis.IsRedisErr(r.answer); !ok {
		t.Fatalf("HGET of a string: %v, want a Redis error", r.answer)
	}
	return r
}

// failing returns a call that fails with err the first fails times and then succeeds, and
// the count of its calls.
func failing(err error, fails int) (f func() error, calls *int) {
	calls = new(int)
	return func() error {
		if *calls++; *calls <= fails {
			return err
		}
		return nil
	}, calls
}

// Do sends a call again when it never got an answer (a connection's failure, a deadline of
// rueidis's own) or when Redis refused the command unrun until it is ready (LOADING,
// CLUSTERDOWN, TRYAGAIN); an answer (a Redis error, relock's ErrNotSynced) and a closed
// client end it at once, with that error. (docs/design.md: internal/retry, and "What bounds
// these retries".)
func TestDoSendsAgainOnlyWhatMayBeSentAgain(t *testing.T) {
	r := redisReplies(t)
	ctx := redistest.Context(t, 30*time.Second)
	for _, c := range []struct {
		name  string
		err   error
		again bool
	}{
		{"LOADING", r.refusals[0], true},
		{"CLUSTERDOWN", r.refusals[1], true},
		{"TRYAGAIN", r.refusals[2], true},
		{"a broken connection", errors.New("read tcp: connection reset by peer"), true},
		{"a deadline of rueidis's own", context.DeadlineExceeded, true},
		{"WRONGTYPE", r.answer, false},
		{"ErrNotSynced", lockerr.ErrNotSynced, false},
		{"a closed client", rueidis.ErrClosing, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			f, calls := failing(c.err, 2)
			err := retry.Do(ctx, f)
			switch {
			case c.again && (err != nil || *calls != 3):
				t.Errorf("Do of a call that failed twice with %v: %v after %d calls; want nil after 3", c.err, err, *calls)
			case !c.again && (err != c.err || *calls != 1):
				t.Errorf("Do of a call that failed with %v: %v after %d calls; want that error after 1", c.err, err, *calls)
			}
			if retry.Lost(c.err) != c.again {
				t.Errorf("Lost(%v) = %v, want %v", c.err, !c.again, c.again)
			}
		})
	}
	if retry.Lost(nil) {
		t.Error("Lost(nil) = true")
	}
}

// Final ends Do at once with the error it marks, unwrapped: a lost call's error too.
func TestDoReturnsAFinalErrorUnwrapped(t *testing.T) {
	ctx := redistest.Context(t, 30*time.Second)
	lost := errors.New("read tcp: connection reset by peer")
	f, calls := failing(retry.Final(lost), 2)
	if err := retry.Do(ctx, f); err != lost || *calls != 1 {
		t.Errorf("Do of a call that failed with Final(%v): %v after %d calls; want the error itself after 1", lost, err, *calls)
	}
	if err := retry.Final(nil); err != nil {
		t.Errorf("Final(nil) = %v", err)
	}
}

// Refusals sends a call again only when Redis refused it unrun: a call whose reply was lost
// may have run, and is not sent again.
func TestRefusalsSendsAgainOnlyRefusals(t *testing.T) {
	r := redisReplies(t)
	ctx := redistest.Context(t, 30*time.Second)
	for _, refusal := range r.refusals {
		f, calls := failing(refusal, 2)
		if err := retry.Refusals(ctx, f); err != nil || *calls != 3 {
			t.Errorf("Refusals of a call refused twice (%v): %v after %d calls; want nil after 3", refusal, err, *calls)
		}
	}
	for _, failure := range []error{errors.New("read tcp: connection reset by peer"), context.DeadlineExceeded, r.answer} {
		f, calls := failing(failure, 2)
		if err := retry.Refusals(ctx, f); err != failure || *calls != 1 {
			t.Errorf("Refusals of a call that failed with %v: %v after %d calls; want that error after 1", failure, err, *calls)
		}
	}
}

// Abandon stops the resends of a refused call once its caller's context has ended, with
// that context's error (the refusal said the call never ran, so nothing is left to
// finish); while the context lives, and for any error but a refusal (a lost reply, an
// answer), it lets the call's own rule decide.
func TestAbandonOnlyRefusalsOfAnEndedCall(t *testing.T) {
	r := redisReplies(t)
	ended, cancel := context.WithCancel(context.Background())
	cancel()
	live := redistest.Context(t, 30*time.Second)
	for _, refusal := range r.refusals {
		if err := retry.Abandon(ended, refusal); !errors.Is(err, context.Canceled) || !errors.Is(err, refusal) {
			t.Errorf("Abandon of %v, the context ended: %v; want the context's error with the refusal", refusal, err)
		}
		if err := retry.Abandon(live, refusal); err != nil {
			t.Errorf("Abandon of %v, the context live: %v; want nil", refusal, err)
		}
	}
	for _, other := range []error{nil, errors.New("read tcp: connection reset by peer"), context.DeadlineExceeded, r.answer} {
		if err := retry.Abandon(ended, other); err != nil {
			t.Errorf("Abandon of %v, the context ended: %v; want nil: not a refusal", other, err)
		}
	}
}

// Every call that retries is bounded by its context: a refusal that never ends is returned
// once the context has ended, after sends with a backoff between them that doubles from
// 10ms and stays bounded (200ms), so that a call refused for a second is sent again soon
// after the server is ready.
func TestDoBacksOffUntilItsContextEnds(t *testing.T) {
	r := redisReplies(t)
	refusal := r.refusals[0]

	// The backoff: each gap at least the last doubled, from 10ms up to 200ms (a timer
	// never fires early; it may fire late on a loaded machine, which only widens a gap).
	var sends []time.Time
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	const enough = 12 // 1.5s of backoff when it stays within 200ms; 20s if it kept doubling
	err := retry.Do(ctx, func() error {
		if sends = append(sends, time.Now()); len(sends) == enough {
			return nil
		}
		return refusal
	})
	if err != nil {
		t.Fatalf("a call refused %d times was not sent a %dth time within 5s (%v): the backoff does not stay bounded; gaps %v", enough-1, enough, err, gaps(sends))
	}
	want := 10 * time.Millisecond
	for i, gap := range gaps(sends) {
		if gap < want {
			t.Errorf("gap %d between sends is %v, want at least %v; gaps %v", i, gap, want, gaps(sends))
		}
		want = min(2*want, 200*time.Millisecond)
	}

	// The context bounds the retries: a refusal that never ends is returned once it ends.
	ctx, cancel = context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- retry.Do(ctx, func() error { return refusal }) }()
	if err := redistest.Recv(t, done, 20*time.Second, "Do of a call always refused returns after its context ended"); err != refusal {
		t.Errorf("Do of a call always refused: %v, want the refusal %v", err, refusal)
	}
	if ctx.Err() == nil {
		t.Error("Do of a call always refused returned before its context ended")
	}
}

func gaps(ts []time.Time) []time.Duration {
	var d []time.Duration
	for i := 1; i < len(ts); i++ {
		d = append(d, ts[i].Sub(ts[i-1]))
	}
	return d
}

// A waiter rides out failures to get an answer while its context lives and they have lasted
// no longer than the limit (a lease), counted from the first since the last answer; an
// answer from Redis (a refusal is one to a waiter too: see Lost) or a nil error ends the
// ride, and so does an ended context. (docs/design.md: "An attempt that a waiter makes
// while it waits gets more grace".)
func TestOutageRidesWithinALease(t *testing.T) {
	r := redisReplies(t)
	lost := errors.New("read tcp: connection reset by peer")
	ctx := redistest.Context(t, 30*time.Second)
	const limit = 100 * time.Millisecond

	var o retry.Outage
	if !o.Ride(ctx, lost, limit) {
		t.Fatal("a first lost attempt is not ridden out")
	}
	if o.Ride(ctx, r.answer, limit) {
		t.Errorf("an answer (%v) is ridden out", r.answer)
	}
	ended, cancel := context.WithCancel(ctx)
	cancel()
	if o.Ride(ended, lost, limit) {
		t.Error("a lost attempt is ridden out under an ended context")
	}
	time.Sleep(2 * limit)
	if o.Ride(ctx, lost, limit) {
		t.Errorf("a lost attempt is ridden out %v after the first, past the limit %v", 2*limit, limit)
	}
	o.End() // an answer: the outage is over, the next one counts from its own start
	if !o.Ride(ctx, lost, limit) {
		t.Error("a lost attempt after an answer is not ridden out: the earlier outage still counts")
	}
}
