package script_test

import (
	"context"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/relock-go/relock/internal/keys"
	"github.com/relock-go/relock/internal/redistest"
	"github.com/relock-go/relock/internal/script"
)

// semAcquire runs the semaphore's acquire script (lua/semaphore_acquire.lua) on the
// semaphore name for client, asking for n permits; join "1" queues the client when it
// cannot take them; ids, when not "", leases the permits for 30s under those ids (hex).
func semAcquire(rc rueidis.Client, name string, n int, client, join, ids string) ([]int64, error) {
	return semAcquireLiving(rc, name, n, client, join, "30000", ids)
}

// semAcquireLiving is semAcquire for a client whose queue entry lives life milliseconds.
func semAcquireLiving(rc rueidis.Client, name string, n int, client, join, life, ids string) ([]int64, error) {
	k := keys.SemaphoreOf(name)
	lease := "0"
	if ids != "" {
		lease = "30000"
	}
	return script.SemaphoreAcquire().Exec(context.Background(), rc, []string{k.Permits, k.Queue, k.Deadlines, k.Leases, k.Channel},
		[]string{strconv.Itoa(n), client, join, life, "publish", k.Waiters, lease, ids}).AsIntSlice()
}

// heard publishes an end marker on channel and returns what l heard before it, once the
// marker arrived: every message published on channel before the marker.
func heard(t *testing.T, rc rueidis.Client, l *redistest.Listener, channel string) []string {
	t.Helper()
	const end = "end-of-test-messages"
	redistest.MustDo(t, rc, "PUBLISH", channel, end)
	var got []string
	redistest.Eventually(t, 10*time.Second, "the end marker on "+channel, func() bool {
		got = l.Messages()
		return slices.Contains(got, end)
	})
	return got[:slices.Index(got, end)]
}

// A successful acquire answers {1, the permits left}, whether it found nobody waiting or
// was the client first in line.
func TestSemaphoreAcquireReplies(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		rc := b.Client(t)
		const name = "sem-replies"
		k := keys.SemaphoreOf(name)
		redistest.MustDo(t, rc, "SET", name, "5")
		if v, err := semAcquire(rc, name, 2, holder, "1", ""); err != nil || !slices.Equal(v, []int64{1, 3}) {
			t.Fatalf("acquire of 2 of 5 with nobody waiting = %v, %v; want [1 3]", v, err)
		}
		// first is first in line, with a deadline a minute ahead.
		redistest.MustDo(t, rc, "ZADD", k.Queue, "1", first)
		redistest.MustDo(t, rc, "ZADD", k.Deadlines, strconv.FormatInt(redistest.Millis(t, rc)+60000, 10), first)
		if v, err := semAcquire(rc, name, 1, first, "1", ""); err != nil || !slices.Equal(v, []int64{1, 2}) {
			t.Fatalf("acquire of 1 of 3 by the client first in line = %v, %v; want [1 2]", v, err)
		}
		if v, err := redistest.Do(t, rc, "GET", name).ToString(); err != nil || v != "2" {
			t.Fatalf("permits %q, %v after taking 3 of 5; want 2", v, err)
		}
	})
}

// Leased permit ids must be one per permit asked for: an acquire with more or fewer ids
// than permits, or ids that are not 32 hex digits each, is refused, and leaves the count
// and the leased permits as they were.
func TestSemaphoreAcquireRefusesIDsThatDoNotMatch(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		rc := b.Client(t)
		const name = "sem-ids"
		k := keys.SemaphoreOf(name)
		redistest.MustDo(t, rc, "SET", name, "5")
		id := strings.Repeat("ab", 16)
		for _, tc := range []struct {
			n   int
			ids string
		}{
			{1, id + strings.Repeat("cd", 16)},
			{2, id},
			{3, id + strings.Repeat("cd", 16)},
			{1, id[:30]},
			{1, id[:16]},
			{1, strings.Repeat("xy", 16)},
		} {
			permits, leases := redistest.Snapshot(t, rc, k.Permits), redistest.Snapshot(t, rc, k.Leases)
			if v, err := semAcquire(rc, name, tc.n, holder, "0", tc.ids); err == nil {
				t.Fatalf("acquire of %d permits with ids %q = %v; want an error", tc.n, tc.ids, v)
			}
			if after := redistest.Snapshot(t, rc, k.Permits); after != permits {
				t.Fatalf("acquire of %d permits with ids %q refused, but the permits changed: %s -> %s", tc.n, tc.ids, permits, after)
			}
			if after := redistest.Snapshot(t, rc, k.Leases); after != leases {
				t.Fatalf("acquire of %d permits with ids %q refused, but the leased permits changed: %s -> %s", tc.n, tc.ids, leases, after)
			}
		}
	})
}

// A client that comes first in line because the clients ahead of it were found dead is
// told so on its own channel, by the acquire that found them dead, with the permits
// available (at least 1): it listens for releases from then on. A client that was first
// already is not told again by another client's failed acquire.
func TestSemaphoreAcquireTellsTheNewFirst(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		rc := b.Client(t)
		const name = "sem-new-first"
		k := keys.SemaphoreOf(name)
		const dead, me = "6f1c2a3b-0000-4000-8000-000000000004", "6f1c2a3b-0000-4000-8000-000000000005"
		live := first
		redistest.MustDo(t, rc, "SET", name, "1")
		now := redistest.Millis(t, rc)
		redistest.MustDo(t, rc, "ZADD", k.Queue, "1", dead, "2", live)
		redistest.MustDo(t, rc, "ZADD", k.Deadlines, strconv.FormatInt(now-1000, 10), dead, strconv.FormatInt(now+60000, 10), live)
		liveL, deadL := b.Listen(t, k.Waiters+live), b.Listen(t, k.Waiters+dead)

		// me asks for 2 of the 1 there is: it finds dead's entry run out, and live first.
		v, err := semAcquire(rc, name, 2, me, "1", "")
		if err != nil || len(v) != 4 || v[0] != 0 || v[2] != 0 {
			t.Fatalf("acquire of 2 of 1 behind a live client = %v, %v; want [0 1 0 -1]", v, err)
		}
		if q := redistest.Members(t, rc, k.Queue); !slices.Equal(q, []string{live, me}) {
			t.Fatalf("queue %v; want the live client, then me", q)
		}
		// Once more: live was first already, and is told nothing new.
		if v, err := semAcquire(rc, name, 2, me, "1", ""); err != nil || len(v) != 4 || v[0] != 0 {
			t.Fatalf("second acquire of 2 of 1 = %v, %v; want a failure", v, err)
		}
		if got := heard(t, rc, liveL, k.Waiters+live); !slices.Equal(got, []string{"1"}) {
			t.Fatalf("the client that came first heard %q; want one message, the permits available, 1", got)
		}
		if got := heard(t, rc, deadL, k.Waiters+dead); len(got) != 0 {
			t.Fatalf("the dead client was told %q; want nothing", got)
		}
	})
}

// A client that queues keeps the queue and its deadlines alive only until its deadline
// (the lease it sends): both keys expire then, so that a client that queued and died
// leaves nothing behind to hold up the clients that come after it.
func TestSemaphoreQueueExpiresWithItsDeadline(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		rc := b.Client(t)
		const name = "sem-queue-life"
		k := keys.SemaphoreOf(name)
		redistest.MustDo(t, rc, "SET", name, "1")
		if v, err := semAcquire(rc, name, 2, holder, "1", ""); err != nil || len(v) != 4 || v[0] != 0 || v[2] != 1 {
			t.Fatalf("acquire of 2 of 1 = %v, %v; want a failure, first in line", v, err)
		}
		for _, key := range []string{k.Queue, k.Deadlines} {
			if ms := redistest.PTTL(t, rc, key); ms <= 0 || ms > 30000 {
				t.Errorf("%s has PTTL %d; want the client's deadline, within its 30000ms", key, ms)
			}
		}
	})
}

// Giving back leased permits with ids that are not 32 hex digits each is refused, and
// leaves the count and the leased permits as they were.
func TestSemaphoreReturnRefusesMalformedIDs(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		rc := b.Client(t)
		const name = "sem-return-ids"
		k := keys.SemaphoreOf(name)
		redistest.MustDo(t, rc, "SET", name, "1")
		if v, err := semAcquire(rc, name, 1, holder, "0", strings.Repeat("ab", 16)); err != nil || v[0] != 1 {
			t.Fatalf("lease of 1 of 1 = %v, %v", v, err)
		}
		for _, ids := range []string{"", strings.Repeat("ab", 8), strings.Repeat("xy", 16)} {
			permits, leases := redistest.Snapshot(t, rc, k.Permits), redistest.Snapshot(t, rc, k.Leases)
			v, err := script.SemaphoreReturn().Exec(context.Background(), rc, []string{k.Permits, k.Leases, k.Channel},
				[]string{ids, "publish"}).AsIntSlice()
			if err == nil {
				t.Fatalf("return of ids %q = %v; want an error", ids, v)
			}
			if after := redistest.Snapshot(t, rc, k.Permits); after != permits {
				t.Fatalf("return of ids %q refused, but the permits changed: %s -> %s", ids, permits, after)
			}
			if after := redistest.Snapshot(t, rc, k.Leases); after != leases {
				t.Fatalf("return of ids %q refused, but the leased permits changed: %s -> %s", ids, leases, after)
			}
		}
	})
}

// The renewal script answers, for each lease of its batch, 1 when every permit is still
// leased, after moving each one's end to the lease from now (never later, so that a dead
// holder's permits come back within one lease of its last renewal), and 0 for a lease it
// cannot renew: one whose zset holds another type, which does not stop the others, or
// whose ids are not a list of permit ids.
func TestSemaphoreRenewBatch(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		rc := b.Client(t)
		good, foreign, malformed := keys.SemaphoreOf("sem-renew-good"), keys.SemaphoreOf("sem-renew-foreign"), keys.SemaphoreOf("sem-renew-bad")
		id := strings.Repeat("ab", 16)
		for _, k := range []keys.Semaphore{good, malformed} {
			redistest.MustDo(t, rc, "SET", k.Permits, "1")
			if v, err := semAcquire(rc, k.Permits, 1, holder, "0", id); err != nil || v[0] != 1 {
				t.Fatalf("lease of 1 of 1 on %s = %v, %v", k.Permits, v, err)
			}
		}
		redistest.MustDo(t, rc, "SET", foreign.Leases, "not a zset")
		before := redistest.Millis(t, rc)
		v, err := script.SemaphoreRenew().Exec(context.Background(), rc,
			[]string{foreign.Permits, foreign.Leases, malformed.Permits, malformed.Leases, good.Permits, good.Leases},
			[]string{"60000", id, "", id}).AsIntSlice()
		if err != nil || !slices.Equal(v, []int64{0, 0, 1}) {
			t.Fatalf("renewal of a foreign zset, no ids and a whole lease = %v, %v; want [0 0 1]", v, err)
		}
		after := redistest.Millis(t, rc)
		zs, err := rc.Do(context.Background(), rc.B().Zrange().Key(good.Leases).Min("0").Max("-1").Withscores().Build()).AsZScores()
		if err != nil || len(zs) != 1 {
			t.Fatalf("leased permits %v, %v; want one", zs, err)
		}
		if end := int64(zs[0].Score); end < before+60000 || end > after+60000 {
			t.Fatalf("the renewed permit runs out at %d; want 60000ms after the renewal, within [%d, %d]", end, before+60000, after+60000)
		}
		// A shorter lease leaves the end where it was.
		if v, err := script.SemaphoreRenew().Exec(context.Background(), rc, []string{good.Permits, good.Leases},
			[]string{"1000", id}).AsIntSlice(); err != nil || !slices.Equal(v, []int64{1}) {
			t.Fatalf("renewal for 1000ms = %v, %v; want [1]", v, err)
		}
		raw := string([]byte{0xab, 0xab, 0xab, 0xab, 0xab, 0xab, 0xab, 0xab, 0xab, 0xab, 0xab, 0xab, 0xab, 0xab, 0xab, 0xab})
		if end, err := rc.Do(context.Background(), rc.B().Zscore().Key(good.Leases).Member(raw).Build()).AsFloat64(); err != nil || end != zs[0].Score {
			t.Fatalf("the permit runs out at %v (%v) after a renewal for less; want %v kept", end, err, zs[0].Score)
		}
	})
}

// A client that stops waiting leaves the queue and its deadline, answering 1 (0 when it
// was not in the queue); when it was first, the client now first is told on its own
// channel, so that it listens for releases at once.
func TestSemaphoreLeave(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		rc := b.Client(t)
		k := keys.SemaphoreOf("sem-leave")
		leave := func(client string) int64 {
			t.Helper()
			v, err := script.SemaphoreLeave().Exec(context.Background(), rc, []string{k.Permits, k.Queue, k.Deadlines},
				[]string{client, "publish", k.Waiters}).AsInt64()
			if err != nil {
				t.Fatalf("leave of %s: %v", client, err)
			}
			return v
		}
		deadline := strconv.FormatInt(redistest.Millis(t, rc)+60000, 10)
		redistest.MustDo(t, rc, "ZADD", k.Queue, "1", holder, "2", first, "3", second)
		redistest.MustDo(t, rc, "ZADD", k.Deadlines, deadline, holder, deadline, first, deadline, second)
		holderL, firstL, secondL := b.Listen(t, k.Waiters+holder), b.Listen(t, k.Waiters+first), b.Listen(t, k.Waiters+second)

		// second, not first in line, leaves: nobody is told.
		if v := leave(second); v != 1 {
			t.Fatalf("leave of a queued client = %d; want 1", v)
		}
		// holder, first in line, leaves: first is told.
		if v := leave(holder); v != 1 {
			t.Fatalf("leave of the first client = %d; want 1", v)
		}
		if v := leave(holder); v != 0 {
			t.Fatalf("second leave of the same client = %d; want 0", v)
		}
		for _, key := range []string{k.Queue, k.Deadlines} {
			if left := redistest.Members(t, rc, key); !slices.Equal(left, []string{first}) {
				t.Fatalf("%s holds %v after the others left; want only %s", key, left, first)
			}
		}
		if got := heard(t, rc, firstL, k.Waiters+first); !slices.Equal(got, []string{"1"}) {
			t.Fatalf("the client that came first heard %q; want one message", got)
		}
		if got := heard(t, rc, secondL, k.Waiters+second); len(got) != 0 {
			t.Fatalf("the client that left heard %q; want nothing", got)
		}
		if got := heard(t, rc, holderL, k.Waiters+holder); len(got) != 0 {
			t.Fatalf("the client first in line heard %q when one behind it left; want nothing", got)
		}
	})
}

// The release script answers the count now available, or -1 when it was to set a count
// only where there is none and found one.
func TestSemaphoreReleaseReplies(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		rc := b.Client(t)
		k := keys.SemaphoreOf("sem-release-replies")
		release := func(n, ifNone string) int64 {
			t.Helper()
			v, err := script.SemaphoreRelease().Exec(context.Background(), rc, []string{k.Permits, k.Channel, k.Leases}, []string{n, "publish", ifNone}).AsInt64()
			if err != nil {
				t.Fatalf("release of %s: %v", n, err)
			}
			return v
		}
		if v := release("3", "1"); v != 3 {
			t.Fatalf("setting 3 permits = %d; want 3", v)
		}
		if v := release("5", "1"); v != -1 {
			t.Fatalf("setting 5 permits over a count = %d; want -1", v)
		}
		if v := release("2", "0"); v != 5 {
			t.Fatalf("release of 2 to 3 = %d; want 5", v)
		}
	})
}

// A renewal finds a lease lost when one of its permits ran out, though still in the zset:
// it answers 0 and does not bring the permit back to life.
func TestSemaphoreRenewRanOutPermit(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		rc := b.Client(t)
		k := keys.SemaphoreOf("sem-renew-ran-out")
		id := strings.Repeat("ab", 16)
		raw := string([]byte{0xab, 0xab, 0xab, 0xab, 0xab, 0xab, 0xab, 0xab, 0xab, 0xab, 0xab, 0xab, 0xab, 0xab, 0xab, 0xab})
		redistest.MustDo(t, rc, "SET", k.Permits, "0")
		end := strconv.FormatInt(redistest.Millis(t, rc)-1, 10)
		redistest.MustDo(t, rc, "ZADD", k.Leases, end, raw)
		v, err := script.SemaphoreRenew().Exec(context.Background(), rc, []string{k.Permits, k.Leases}, []string{"60000", id}).AsIntSlice()
		if err != nil || !slices.Equal(v, []int64{0}) {
			t.Fatalf("renewal of a permit that ran out = %v, %v; want [0]", v, err)
		}
		if got, err := rc.Do(context.Background(), rc.B().Zscore().Key(k.Leases).Member(raw).Build()).ToString(); err != nil || got != end {
			t.Fatalf("the permit runs out at %s (%v) after the failed renewal; want %s kept", got, err, end)
		}
	})
}

// AvailablePermits that puts back permits whose lease ran out publishes the count on the
// semaphore's channel, as Redisson's availablePermits does.
func TestSemaphoreAvailablePublishesPermitsPutBack(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		rc := b.Client(t)
		k := keys.SemaphoreOf("sem-available")
		raw := string([]byte{0xcd, 0xcd, 0xcd, 0xcd, 0xcd, 0xcd, 0xcd, 0xcd, 0xcd, 0xcd, 0xcd, 0xcd, 0xcd, 0xcd, 0xcd, 0xcd})
		redistest.MustDo(t, rc, "SET", k.Permits, "1")
		redistest.MustDo(t, rc, "ZADD", k.Leases, strconv.FormatInt(redistest.Millis(t, rc)-1, 10), raw)
		l := b.Listen(t, k.Channel)
		v, err := script.SemaphoreAvailable().Exec(context.Background(), rc, []string{k.Permits, k.Leases, k.Channel}, []string{"publish"}).AsInt64()
		if err != nil || v != 2 {
			t.Fatalf("available with one permit free and one whose lease ran out = %d, %v; want 2", v, err)
		}
		if got := heard(t, rc, l, k.Channel); !slices.Equal(got, []string{"2"}) {
			t.Fatalf("the channel heard %q; want the count, 2", got)
		}
	})
}

// The client first in line that takes its permits leaves the queue, and the client now
// first is told so on its own channel, with the permits left (at least 1): only the first
// listens for releases on the semaphore's channel, so the next would otherwise sleep
// until its own refresh (lua/semaphore_acquire.lua).
func TestSemaphoreAcquireTellsTheNextInLine(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		rc := b.Client(t)
		const name = "sem-next-in-line"
		k := keys.SemaphoreOf(name)
		redistest.MustDo(t, rc, "SET", name, "3")
		deadline := strconv.FormatInt(redistest.Millis(t, rc)+60000, 10)
		redistest.MustDo(t, rc, "ZADD", k.Queue, "1", holder, "2", first)
		redistest.MustDo(t, rc, "ZADD", k.Deadlines, deadline, holder, deadline, first)
		nextL := b.Listen(t, k.Waiters+first)
		if v, err := semAcquire(rc, name, 2, holder, "1", ""); err != nil || !slices.Equal(v, []int64{1, 1}) {
			t.Fatalf("acquire of 2 of 3 by the client first in line = %v, %v; want [1 1]", v, err)
		}
		if q := redistest.Members(t, rc, k.Queue); !slices.Equal(q, []string{first}) {
			t.Fatalf("queue %v after the first took its permits; want the next alone", q)
		}
		if got := heard(t, rc, nextL, k.Waiters+first); !slices.Equal(got, []string{"1"}) {
			t.Fatalf("the client now first heard %q; want one message, the permits left, 1", got)
		}
	})
}

// The leased permits expire with the permits when those have an expiry, so that no ids
// outlive their semaphore, and the acquire's reply says when, so that the lease's context
// ends by then (lua/semaphore_acquire.lua); a drain keeps the permits' expiry, as every
// relock write of the count does (lua/semaphore_drain.lua).
func TestSemaphoreKeysKeepThePermitsExpiry(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		rc := b.Client(t)
		const name = "sem-expiry"
		k := keys.SemaphoreOf(name)
		redistest.MustDo(t, rc, "SET", name, "3", "PX", "60000")
		v, err := semAcquire(rc, name, 1, holder, "0", strings.Repeat("ab", 16))
		if err != nil || len(v) != 3 || v[0] != 1 || v[1] != 2 || v[2] <= 0 || v[2] > 60000 {
			t.Fatalf("lease of 1 of 3 expiring in 60000ms = %v, %v; want [1 2 expiry], the expiry within (0, 60000]", v, err)
		}
		if pttl := redistest.PTTL(t, rc, k.Leases); pttl <= 0 || pttl > 60000 {
			t.Errorf("leased permits' PTTL %dms, the permits' 60000; want (0, 60000]", pttl)
		}
		drained, err := script.SemaphoreDrain().Exec(context.Background(), rc, []string{k.Permits, k.Leases}, nil).AsInt64()
		if err != nil || drained != 2 {
			t.Fatalf("drain of 2 = %d, %v", drained, err)
		}
		if pttl := redistest.PTTL(t, rc, k.Permits); pttl <= 0 || pttl > 60000 {
			t.Errorf("permits' PTTL %dms after a drain; want the 60000 they had kept", pttl)
		}
	})
}

// A client found dead (its deadline passed) leaves both the queue and the deadlines: the
// deadlines hold the clients that wait, each with the time by which it must come back.
// Guards against an acquire that drops a dead client from the queue only: on a semaphore
// that always has a client waiting, whose keys never run out, every dead client's deadline
// would stay for good, and each acquire would go over them all again.
func TestSemaphoreAcquireDropsTheDeadFromTheDeadlines(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		rc := b.Client(t)
		const name = "sem-dead-deadline"
		k := keys.SemaphoreOf(name)
		const dead = "6f1c2a3b-0000-4000-8000-000000000006"
		live := first
		redistest.MustDo(t, rc, "SET", name, "1")
		now := redistest.Millis(t, rc)
		redistest.MustDo(t, rc, "ZADD", k.Queue, "1", dead, "2", live)
		redistest.MustDo(t, rc, "ZADD", k.Deadlines, strconv.FormatInt(now-1000, 10), dead, strconv.FormatInt(now+60000, 10), live)

		// A single attempt behind the live client fails, after finding dead's entry run out.
		if v, err := semAcquire(rc, name, 1, holder, "0", ""); err != nil || len(v) != 4 || v[0] != 0 {
			t.Fatalf("single attempt behind a live client = %v, %v; want a failure", v, err)
		}
		for _, key := range []string{k.Queue, k.Deadlines} {
			if left := redistest.Members(t, rc, key); !slices.Equal(left, []string{live}) {
				t.Fatalf("%s holds %v after the dead client was found; want only the live one, %s", key, left, live)
			}
		}
	})
}

// A leased permit has run out once Redis's time reaches the end it is scored with, for
// every script alike (lua/permit.lua): a renewal finds its lease lost, a give-back counts
// it as given back but not held, and a read of the count puts it back. Redis's time is
// held still on miniredis, so that the scripts read exactly the permit's end.
//
// Guards against scripts that disagree at that millisecond: a renewal that reports the
// lease lost while the count does not have the permit back yet.
func TestSemaphoreLeaseRunsOutAtItsEnd(t *testing.T) {
	b := redistest.Mini(t)
	rc := b.Client(t)
	k := keys.SemaphoreOf("sem-lease-end")
	now := time.Now().Truncate(time.Millisecond)
	b.Mini.SetTime(now)
	end := strconv.FormatInt(now.UnixMilli(), 10)
	renewed, returned := strings.Repeat("ab", 16), strings.Repeat("cd", 16)
	redistest.MustDo(t, rc, "SET", k.Permits, "0")
	redistest.MustDo(t, rc, "ZADD", k.Leases, end, strings.Repeat("\xab", 16), end, strings.Repeat("\xcd", 16))

	if v, err := script.SemaphoreRenew().Exec(context.Background(), rc, []string{k.Permits, k.Leases}, []string{"60000", renewed}).AsIntSlice(); err != nil || !slices.Equal(v, []int64{0}) {
		t.Fatalf("renewal of a permit at its end = %v, %v; want [0], lost", v, err)
	}
	if v, err := script.SemaphoreReturn().Exec(context.Background(), rc, []string{k.Permits, k.Leases, k.Channel},
		[]string{returned, "publish"}).AsIntSlice(); err != nil || !slices.Equal(v, []int64{1, 0}) {
		t.Fatalf("give-back of a permit at its end = %v, %v; want [1 0], given back but not held", v, err)
	}
	v, err := script.SemaphoreAvailable().Exec(context.Background(), rc, []string{k.Permits, k.Leases, k.Channel}, []string{"publish"}).AsInt64()
	if err != nil || v != 2 {
		t.Fatalf("available with one permit given back and one at its end = %d, %v; want 2, both back", v, err)
	}
}

// The queue and its deadlines live until the latest deadline of the clients in it, not
// the deadline of the client that called last: a client with a short entry life (its
// lease) that queues behind one with a long one does not cut the other's entry short.
// Guards against keys that expire with the caller's deadline: the first client, still
// live, would lose its place to a client that queued after the keys ran out.
func TestSemaphoreQueueLivesToTheLatestDeadline(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		rc := b.Client(t)
		const name = "sem-queue-latest"
		k := keys.SemaphoreOf(name)
		redistest.MustDo(t, rc, "SET", name, "0")
		// holder queues with an entry life of 30000ms (semAcquire's), first with 1000ms.
		if v, err := semAcquire(rc, name, 1, holder, "1", ""); err != nil || len(v) != 4 || v[0] != 0 {
			t.Fatalf("acquire of 1 of 0 = %v, %v; want a failure", v, err)
		}
		v, err := semAcquireLiving(rc, name, 1, first, "1", "1000", "")
		if err != nil || len(v) != 4 || v[0] != 0 {
			t.Fatalf("acquire of 1 of 0 by a client whose entry lives 1000ms = %v, %v; want a failure", v, err)
		}
		for _, key := range []string{k.Queue, k.Deadlines} {
			if ms := redistest.PTTL(t, rc, key); ms <= 2000 || ms > 30000 {
				t.Errorf("%s has PTTL %dms; want the first client's deadline, about 30000ms, not the 1000ms of the last", key, ms)
			}
		}
	})
}

// Leased permits given back onto a count that stays below one publish nothing, as a
// release of plain permits does (lua/semaphore_release.lua): Redisson's waiters take the
// message as that many wake-ups, and a count below one, 0 too, wakes none.
func TestSemaphoreReturnBelowOnePublishesNothing(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		rc := b.Client(t)
		for _, c := range []struct{ before, after string }{{"-3", "-2"}, {"-1", "0"}} {
			k := keys.SemaphoreOf("sem-return-quiet" + c.before)
			id := strings.Repeat("ab", 16)
			redistest.MustDo(t, rc, "SET", k.Permits, c.before)
			redistest.MustDo(t, rc, "ZADD", k.Leases, strconv.FormatInt(redistest.Millis(t, rc)+60000, 10), strings.Repeat("\xab", 16))
			l := b.Listen(t, k.Channel)
			v, err := script.SemaphoreReturn().Exec(context.Background(), rc, []string{k.Permits, k.Leases, k.Channel},
				[]string{id, "publish"}).AsIntSlice()
			if err != nil || !slices.Equal(v, []int64{1, 1}) {
				t.Fatalf("give-back of a live permit onto a count of %s = %v, %v; want [1 1]", c.before, v, err)
			}
			if got, err := redistest.Do(t, rc, "GET", k.Permits).ToString(); err != nil || got != c.after {
				t.Fatalf("permits %q, %v after the give-back; want %s", got, err, c.after)
			}
			if got := heard(t, rc, l, k.Channel); len(got) != 0 {
				t.Fatalf("the channel heard %q after a give-back left %s permits; want nothing", got, c.after)
			}
		}
	})
}

// A drain of a semaphore with no count takes nothing and writes nothing, as Redisson's
// drainPermits: the semaphore stays unset, so that TrySetPermits can still set it.
func TestSemaphoreDrainOfNoCountWritesNothing(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		rc := b.Client(t)
		k := keys.SemaphoreOf("sem-drain-none")
		redistest.Unchanged(t, rc, k.Permits, func() {
			v, err := script.SemaphoreDrain().Exec(context.Background(), rc, []string{k.Permits, k.Leases}, nil).AsInt64()
			if err != nil || v != 0 {
				t.Fatalf("drain of no count = %d, %v; want 0", v, err)
			}
		})
	})
}
