package main

import (
	"context"
	"encoding/hex"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/relock-go/relock"
	"github.com/relock-go/relock/internal/keys"
	"github.com/relock-go/relock/internal/redistest"
	"github.com/relock-go/relock/internal/redistest/relocktest"
)

// inspect shows a semaphore (its available permits and the relock clients queued for
// permits, with their processes) and a count-down latch (its count and its waiting
// clients), and unlock --force refuses both and changes nothing. Guards against a
// semaphore's or a latch's key passing for "not a lock (the key holds a string)" with its
// waiters unseen, against the queue showing clients that are not queued, and against the
// operator's tool deleting a semaphore's permits as if they were a lock.
func TestInspectSemaphoreAndLatch(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		rc := b.Client(t)
		holder := relocktest.New(t, b, relock.WithWatchdogTimeout(time.Minute))
		waiter := relocktest.New(t, b, relock.WithWatchdogTimeout(time.Minute))

		sem := holder.Semaphore("builds")
		if ok, err := sem.TrySetPermits(ctx, 1); !ok || err != nil {
			t.Fatalf("TrySetPermits: %v, %v", ok, err)
		}
		if err := sem.Acquire(ctx, 1); err != nil {
			t.Fatal(err)
		}
		wctx, stop := context.WithCancel(ctx)
		defer stop()
		waited := async(func() error { return waiter.Semaphore("builds").Acquire(wctx, 1) })
		redistest.Eventually(t, 10*time.Second, "the waiter queued", func() bool {
			return len(inspectJSON(t, b.Addr, "builds").PermitWaiters) == 1
		})
		r := inspectJSON(t, b.Addr, "builds")
		if r.Kind != "semaphore" || r.Count == nil || *r.Count != 0 || len(r.PermitWaiters) != 1 ||
			r.PermitWaiters[0].Owner != waiter.ID() || r.PermitWaiters[0].ExpiresInMs <= 0 ||
			(r.PermitWaiters[0].Client == nil) != (b.Mini != nil) { // miniredis has no CLIENT LIST
			t.Errorf("inspect --json builds: %+v; want a semaphore with 0 permits and %s queued, live, with its process", r, waiter.ID())
		}
		out, err := relockCmd(t, b.Addr, "", "inspect", "builds")
		if err != nil || !strings.Contains(out, "builds: semaphore, 0 permits available") || !strings.Contains(out, "queue 1  relock client "+waiter.ID()) {
			t.Errorf("inspect builds: %v\n%s", err, out)
		}
		before := redistest.Snapshot(t, rc, "builds")
		out, err = relockCmd(t, b.Addr, "", "unlock", "--force", "-y", "builds")
		if err == nil || !strings.Contains(err.Error(), "not a lock") || !strings.Contains(err.Error(), "nothing was changed") {
			t.Errorf("unlock --force -y builds: %v; want a refusal\n%s", err, out)
		}
		if after := redistest.Snapshot(t, rc, "builds"); after != before {
			t.Errorf("unlock --force changed the semaphore:\nbefore %s\nafter  %s", before, after)
		}
		if err := sem.Release(ctx, 1); err != nil {
			t.Fatal(err)
		}
		await(t, "the waiter's Acquire", waited)
		if r := inspectJSON(t, b.Addr, "builds"); len(r.PermitWaiters) != 0 || r.Count == nil || *r.Count != 0 {
			t.Errorf("after the waiter got its permit, inspect: %+v; want no queue and 0 permits", r)
		}

		latch := holder.CountDownLatch("ready")
		if ok, err := latch.TrySetCount(ctx, 2); !ok || err != nil {
			t.Fatalf("TrySetCount: %v, %v", ok, err)
		}
		if r := inspectJSON(t, b.Addr, "ready"); r.Kind != "count" || r.Count == nil || *r.Count != 2 {
			t.Errorf("inspect --json ready with nobody waiting: %+v; want kind count, 2", r)
		}
		// A count with nobody waiting is a bare string, a semaphore's or a latch's: still
		// nobody holds it, and the operator's tool must not delete it.
		before = redistest.Snapshot(t, rc, "ready")
		out, err = relockCmd(t, b.Addr, "", "unlock", "--force", "-y", "ready")
		if err == nil || !strings.Contains(err.Error(), "not a lock") || !strings.Contains(err.Error(), "nothing was changed") {
			t.Errorf("unlock --force -y ready (a latch nobody waits on): %v; want a refusal\n%s", err, out)
		}
		if after := redistest.Snapshot(t, rc, "ready"); after != before {
			t.Errorf("unlock --force changed the latch:\nbefore %s\nafter  %s", before, after)
		}
		awaited := async(func() error { return waiter.CountDownLatch("ready").Await(wctx) })
		redistest.Eventually(t, 10*time.Second, "the latch's waiter subscribed", func() bool {
			return inspectJSON(t, b.Addr, "ready").Subscribers == 1
		})
		out, err = relockCmd(t, b.Addr, "", "inspect", "ready")
		if err != nil || !strings.Contains(out, "ready: count-down latch, count 2") || !strings.Contains(out, "waiting clients  1 (subscribed to the latch's channel)") {
			t.Errorf("inspect ready: %v\n%s", err, out)
		}
		for range 2 {
			if err := latch.CountDown(ctx); err != nil {
				t.Fatal(err)
			}
		}
		await(t, "the latch's Await", awaited)
	})
}

// inspect shows a semaphore's leased permits, by id as PermitIDs spells them, with the time
// left on their lease; a permit whose lease ran out shows as such. Guards against leased
// permits passing unseen (the count alone says 0 and nobody waits) and against ids shown
// in another spelling than the one relock and Redisson hand out.
func TestInspectLeasedPermits(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		c := relocktest.New(t, b, relock.WithWatchdogTimeout(time.Minute))
		sem := c.Semaphore("uploads")
		if ok, err := sem.TrySetPermits(ctx, 2); !ok || err != nil {
			t.Fatalf("TrySetPermits: %v, %v", ok, err)
		}
		held, err := sem.AcquireLease(ctx, 2)
		if err != nil {
			t.Fatal(err)
		}
		ids := sem.PermitIDs(held)
		r := inspectJSON(t, b.Addr, "uploads")
		if r.Kind != "semaphore" || r.Count == nil || *r.Count != 0 || len(r.Leased) != 2 {
			t.Fatalf("inspect --json uploads: %+v; want a semaphore with 0 available and 2 leased", r)
		}
		for _, p := range r.Leased {
			if !slices.Contains(ids, p.ID) || p.ExpiresInMs <= 0 || p.ExpiresInMs > 60000 || p.NoExpiry {
				t.Errorf("leased permit %+v; want one of %q with up to 60s left", p, ids)
			}
		}
		out, err := relockCmd(t, b.Addr, "", "inspect", "uploads")
		if err != nil || !strings.Contains(out, "uploads: semaphore, 0 permits available") ||
			!strings.Contains(out, "leased permit "+ids[0]+"  runs out in ") || !strings.Contains(out, "leased permit "+ids[1]) {
			t.Errorf("inspect uploads: %v\n%s", err, out)
		}
		if err := sem.ReleaseLease(held); err != nil {
			t.Fatal(err)
		}
		if r := inspectJSON(t, b.Addr, "uploads"); len(r.Leased) != 0 || r.Kind != "count" || *r.Count != 2 {
			t.Errorf("after ReleaseLease, inspect: %+v; want a count of 2 and no leased permit", r)
		}
	})
}

// A permit that Redisson's RPermitExpirableSemaphore leased without a lease time is scored
// 922337203685477 (its nonExpirableTimeout) in {<name>}:timeout: inspect shows it as leased
// without expiry (noExpiry in JSON), not as one that runs out in some centuries.
func TestInspectPermitLeasedWithoutExpiry(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		rc := b.Client(t)
		const id = "0123456789abcdef" // 16 bytes, as Redisson makes a permit id
		redistest.MustDo(t, rc, "SET", "perm", "1")
		redistest.MustDo(t, rc, "ZADD", "{perm}:timeout", "922337203685477", id)
		r := inspectJSON(t, b.Addr, "perm")
		want := hex.EncodeToString([]byte(id))
		if r.Kind != "semaphore" || len(r.Leased) != 1 || r.Leased[0].ID != want || !r.Leased[0].NoExpiry || r.Leased[0].ExpiresInMs != 0 {
			t.Errorf("inspect --json perm: %+v; want a semaphore with permit %s leased without expiry", r, want)
		}
		out, err := relockCmd(t, b.Addr, "", "inspect", "perm")
		if err != nil || !strings.Contains(out, "leased permit "+want+"  leased without expiry") {
			t.Errorf("inspect perm: %v\n%s", err, out)
		}
	})
}

// A client queued for a semaphore's permits whose process is gone (no connection is named
// after it) shows as "client not connected", and the note under the view says what that
// means, as it does for a lock's holders and waiters. Guards against a note that looks at
// the locks' holders and waiters alone.
func TestInspectPermitWaiterNotConnected(t *testing.T) {
	redistest.Real(t, func(t *testing.T, b *redistest.Backend) {
		rc := b.Client(t)
		const gone = "00000000-0000-4000-8000-00000000dead"
		names := keys.SemaphoreOf("gone-builds")
		redistest.MustDo(t, rc, "SET", names.Permits, "0")
		redistest.MustDo(t, rc, "ZADD", names.Queue, "1", gone)
		// A minute from now, in Redis's time: the entry is live, its client unconnected.
		until := time.Now().Add(time.Minute).UnixMilli()
		redistest.MustDo(t, rc, "ZADD", names.Deadlines, strconv.FormatInt(until, 10), gone)
		out, _ := inspectBinary(t, b, "gone-builds")
		if !strings.Contains(out, "queue 1  relock client "+gone) || !strings.Contains(out, "client not connected") ||
			!strings.Contains(out, "\n  not connected: no connection is named relock:<client id>:<wake code>;") {
			t.Errorf("inspect gone-builds does not say its queued client is not connected, and what that means:\n%s", out)
		}
	})
}

// A deadline in a zset is a score, which may be any double: -inf or +inf, or a number far
// beyond what a time in milliseconds holds (data written by hand, or by a tool gone wrong).
// inspect shows an entry scored -inf, or far in the past, as run out or dead, and one
// scored +inf, or far ahead, as live, with a time that reads forward, for a semaphore's
// leased permits and queued clients, for a fair lock's queue and for a read-write lock's
// waiting writers alike.
//
// Guards against scores converted to int64 unchecked: -inf and +inf become -2^63, from
// which the subtraction of the clock wraps to a huge positive number, so that a dead entry
// showed as live and every time as "in -499058h".
func TestInspectScoresBeyondTheClock(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		rc := b.Client(t)
		const past, ahead = "00000000-0000-4000-8000-0000000000aa", "00000000-0000-4000-8000-0000000000bb"
		sem := keys.SemaphoreOf("far-scores")
		redistest.MustDo(t, rc, "SET", sem.Permits, "1")
		redistest.MustDo(t, rc, "ZADD", sem.Leases, "-inf", "0123456789abcdef", "-1e300", "0123456789abcdeg")
		redistest.MustDo(t, rc, "ZADD", sem.Queue, "1", past, "2", ahead)
		redistest.MustDo(t, rc, "ZADD", sem.Deadlines, "-inf", past, "1e300", ahead)
		r := inspectJSON(t, b.Addr, "far-scores")
		if len(r.Leased) != 2 || len(r.PermitWaiters) != 2 {
			t.Fatalf("inspect --json far-scores: %+v; want 2 leased permits and 2 clients queued", r)
		}
		for _, p := range r.Leased {
			if p.ExpiresInMs > 0 || p.NoExpiry {
				t.Errorf("permit %s scored -inf or -1e300 shows expiresInMs %d, noExpiry %v; want run out", p.ID, p.ExpiresInMs, p.NoExpiry)
			}
		}
		if w := r.PermitWaiters; w[0].Owner != past || w[0].ExpiresInMs > 0 || w[1].Owner != ahead || w[1].ExpiresInMs <= 0 {
			t.Errorf("queued clients %+v; want %s dead (at or below 0) and %s live (above 0)", w, past, ahead)
		}
		out, err := relockCmd(t, b.Addr, "", "inspect", "far-scores")
		if err != nil || strings.Count(out, "ran out; the next acquisition or count puts it back") != 2 ||
			!lineWith(out, past, " dead (entry expired)") || !lineWith(out, ahead, " live, entry expires in ") ||
			strings.Contains(out, "in -") {
			t.Errorf("inspect far-scores: %v\n%s", err, out)
		}

		fair := keys.Of("far-fair")
		redistest.MustDo(t, rc, "RPUSH", fair.Queue, past, ahead)
		redistest.MustDo(t, rc, "ZADD", fair.Deadlines, "-inf", past, "+inf", ahead)
		f := inspectJSON(t, b.Addr, "far-fair")
		if q := f.Queue; len(q) != 2 || q[0].ExpiresInMs > 0 || q[1].ExpiresInMs <= 0 {
			t.Errorf("fair queue %+v; want %s dead and %s live", q, past, ahead)
		}
		out, err = relockCmd(t, b.Addr, "", "inspect", "far-fair")
		if err != nil || !lineWith(out, past, " dead (entry expired)") || !lineWith(out, ahead, " live, entry expires in ") ||
			strings.Contains(out, "in -") {
			t.Errorf("inspect far-fair: %v\n%s", err, out)
		}

		rw := keys.Of("far-writers")
		redistest.MustDo(t, rc, "ZADD", rw.Writers, "-inf", past+":write", "+inf", ahead+":write")
		w := inspectJSON(t, b.Addr, "far-writers")
		if ws := w.Writers; len(ws) != 2 || ws[0].Owner != past || ws[0].ExpiresInMs > 0 || ws[1].Owner != ahead || ws[1].ExpiresInMs <= 0 {
			t.Errorf("waiting writers %+v; want %s dead and %s live", ws, past, ahead)
		}
		out, err = relockCmd(t, b.Addr, "", "inspect", "far-writers")
		if err != nil || !lineWith(out, past, " dead (entry expired)") || !lineWith(out, ahead, " waits (new readers give way), entry expires in ") ||
			strings.Contains(out, "in -") {
			t.Errorf("inspect far-writers: %v\n%s", err, out)
		}
	})
}

// lineWith reports whether a line of out holds both what and, after it, then.
func lineWith(out, what, then string) bool {
	for _, line := range strings.Split(out, "\n") {
		if _, rest, ok := strings.Cut(line, what); ok && strings.Contains(rest, then) {
			return true
		}
	}
	return false
}
