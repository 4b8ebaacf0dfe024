package script_test

import (
	"context"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/relock-go/relock/internal/keys"
	"github.com/relock-go/relock/internal/redistest"
	"github.com/relock-go/relock/internal/script"
)

// Under writer preference a new reader gives way to a live waiting writer also when the
// lock is free at that moment (the writer is on its way to take it, or sleeps until the
// vanished hold before it would have ended), and is told to come back; a reader without
// writer preference takes the free lock.
func TestReaderGivesWayAtAFreeLock(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		rc := b.Client(t)
		for _, c := range []struct {
			prefer string
			want   int64
		}{{"1", 0}, {"0", 1}} {
			name := "give-way-" + c.prefer
			n := keys.Of(name)
			redistest.MustDo(t, rc, "ZADD", n.Writers, "99999999999999", second+":write") // live for ages
			v, err := readAcquire(t, rc, name, first, c.prefer, "1111", "")
			if err != nil || len(v) < 2 || v[0] != c.want {
				t.Fatalf("writer preference %q, a writer waiting, the lock free: %v %v; want the reply to start with %d", c.prefer, v, err, c.want)
			}
			if c.want == 0 && v[1] <= 0 {
				t.Errorf("told to come back in %d ms; want a positive wait", v[1])
			}
		}
	})
}

// All read holds of one owner share one expiry, the longest any of them was promised, and
// the hash never expires before its longest live timeout key (lua/rwlock_read_acquire.lua):
// a re-entry with a shorter lease cuts short neither the owner's earlier hold nor the
// lock, and a reader with a short lease does not cut short another reader's longer one.
func TestReadHoldsKeepTheLongestExpiry(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		rc := b.Client(t)
		const name = "read-expiries"
		n := keys.Of(name)
		for _, h := range []struct {
			owner, lease string
		}{{first, "60000"}, {first, "2000"}, {second, "2000"}} {
			if v, err := readAcquireFor(t, rc, name, h.owner, h.lease, "0", "", ""); err != nil || v[0] != 1 {
				t.Fatalf("%s takes a read hold for %sms: %v %v", h.owner, h.lease, v, err)
			}
		}
		for _, key := range []string{n.ReadTimeout(first, 1), n.ReadTimeout(first, 2), n.Lock} {
			if pttl := redistest.PTTL(t, rc, key); pttl < 50000 {
				t.Errorf("%s: PTTL %dms after a read hold of 60s and shorter ones; want about 60000", key, pttl)
			}
		}
		if pttl := redistest.PTTL(t, rc, n.ReadTimeout(second, 1)); pttl <= 0 || pttl > 2000 {
			t.Errorf("the other reader's timeout key: PTTL %dms; want its own 2000 at most", pttl)
		}
	})
}

// Under writer preference a new reader gives way to a waiting writer, but the writer that
// holds the lock taking a read hold beside its own (a downgrade) never does: it would wait
// for the waiting writer, which waits for it (lua/rwlock_read_acquire.lua).
func TestWriterTakesAReadHoldPastWaitingWriters(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		rc := b.Client(t)
		const name = "downgrade-past-writers"
		n := keys.Of(name)
		if v, err := writeAcquire(t, rc, name, first, "", ""); err != nil || v[0] != 1 {
			t.Fatalf("the write hold: %v %v", v, err)
		}
		redistest.MustDo(t, rc, "ZADD", n.Writers, "99999999999999", second+":write") // live for ages
		v, err := readAcquire(t, rc, name, first, "1", "1111", "")
		if err != nil || len(v) < 3 || v[0] != 1 || v[2] != 1 {
			t.Fatalf("the write holder takes a read hold while a writer waits (writer preference): %v %v; want [1 1 1], a read hold beside its write hold", v, err)
		}
	})
}

// A read field whose timeout keys all ran out is a hold that is gone: its owner asking for
// the write lock, held by another live reader, waits like any writer, instead of being
// answered "upgrade" (docs/design.md, the read-write lock).
func TestLapsedReaderAskingToWriteWaits(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		rc := b.Client(t)
		const name = "lapsed-upgrade"
		n := keys.Of(name)
		redistest.MustDo(t, rc, "HSET", n.Lock, "mode", "read", first, "1", second, "1")
		redistest.MustDo(t, rc, "PEXPIRE", n.Lock, "30000")
		redistest.MustDo(t, rc, "SET", n.ReadTimeout(second, 1), "1", "PX", "30000") // first's ran out
		v, err := writeAcquire(t, rc, name, first, "", "")
		if err != nil || len(v) != 2 || v[0] != 0 || v[1] <= 0 {
			t.Fatalf("write attempt of a reader whose timeout key ran out, another reader live: %v %v; want [0 PTTL] (wait), not [2] (upgrade)", v, err)
		}
	})
}

// A write re-entry never moves the lock's expiry earlier (lua/rwlock_write_acquire.lua): a
// re-entry with a shorter lease leaves the longer one.
func TestWriteReentryKeepsTheLongerExpiry(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		rc := b.Client(t)
		const name = "write-reentry-expiry"
		for _, lease := range []string{"60000", "2000"} {
			if v, err := writeAcquireFor(t, rc, name, first, lease, "", ""); err != nil || v[0] != 1 {
				t.Fatalf("write hold for %sms: %v %v", lease, v, err)
			}
		}
		if pttl := redistest.PTTL(t, rc, keys.Of(name).Lock); pttl < 50000 {
			t.Errorf("PTTL %dms after a write hold of 60s and a re-entry of 2s; want about 60000", pttl)
		}
	})
}

// rwUnlock releases one of field's holds ("read" or "write" by side) of the read-write lock
// name, which the client knows to number expected, as the engine sends it.
func rwUnlock(t *testing.T, rc rueidis.Client, name, field, side, expected string) (int64, error) {
	t.Helper()
	n := keys.Of(name)
	return script.RWLockUnlock().Exec(context.Background(), rc, []string{n.Lock, n.RWChannel, n.Tag, n.Writers, n.Wake, n.Readers},
		[]string{field, side, expected, "publish"}).AsInt64()
}

// While a writer holds the lock, releasing one of its read holds beside it never shortens
// the lock's expiry to the read holds' (lua/rwlock_unlock.lua): the write hold has no key
// of its own and lives as long as the hash.
func TestReadUnlockBesideTheWriteHoldKeepsItsExpiry(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		rc := b.Client(t)
		const name = "read-unlock-beside-write"
		if v, err := writeAcquireFor(t, rc, name, first, "60000", "", ""); err != nil || v[0] != 1 {
			t.Fatalf("the write hold: %v %v", v, err)
		}
		for i := 0; i < 2; i++ {
			if v, err := readAcquireFor(t, rc, name, first, "2000", "0", "", ""); err != nil || v[0] != 1 {
				t.Fatalf("read hold %d beside the write hold: %v %v", i+1, v, err)
			}
		}
		if r, err := rwUnlock(t, rc, name, first, "read", "2"); err != nil || r != 0 {
			t.Fatalf("release of one of two read holds: %d %v; want 0 (still held)", r, err)
		}
		if pttl := redistest.PTTL(t, rc, keys.Of(name).Lock); pttl < 50000 {
			t.Errorf("PTTL %dms after a read hold of 2s beside a write hold of 60s was released; want about 60000", pttl)
		}
	})
}

// A preferred writer that must wait registers in the waiting writers' zset, which lives no
// longer than the entry (lua/rwlock_write_acquire.lua): were the writer to die with nobody
// taking the lock, the key runs out rather than stay for ever.
func TestWaitingWritersKeyExpiresWithItsEntry(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		rc := b.Client(t)
		const name = "writers-life"
		n := keys.Of(name)
		if v, err := readAcquire(t, rc, name, first, "0", "", ""); err != nil || v[0] != 1 {
			t.Fatalf("the read hold: %v %v", v, err)
		}
		v, err := script.AcquireReply(nil, script.RWLockWriteAcquire().Exec(context.Background(), rc, []string{n.Lock, n.Writers, n.ReadTimeouts(second), n.Wake},
			[]string{"30000", keys.WriteField(second), second, "1", "10000", "", "", n.RWChannel, "publish"}))
		if err != nil || v[0] != 0 {
			t.Fatalf("a preferred writer beside a reader: %v %v; want to wait", v, err)
		}
		if pttl := redistest.PTTL(t, rc, n.Writers); pttl <= 0 || pttl > 10000 {
			t.Errorf("waiting writers' PTTL %dms with one entry that lives 10000ms; want (0, 10000]", pttl)
		}
	})
}

// releases returns the release messages ("0" and "1") l heard once it has heard the
// marker that the test published after the release: wake codes and lease announcements
// are left out, and a message the release sent has arrived by then.
func releases(t *testing.T, rc rueidis.Client, l *redistest.Listener, channel string) []string {
	t.Helper()
	redistest.MustDo(t, rc, "PUBLISH", channel, "marker")
	redistest.Eventually(t, 10*time.Second, "the marker on "+channel, func() bool { return slices.Contains(l.Messages(), "marker") })
	var got []string
	for _, m := range l.Messages() {
		if m == "0" || m == "1" {
			got = append(got, m)
		}
	}
	return got
}

// A writer that releases its write hold while it keeps read holds leaves the lock in read
// mode, and tells every waiter so with "1": waiting readers may all join it at once.
func TestDowngradeTellsTheReaders(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		rc := b.Client(t)
		const name = "downgrade-tells"
		n := keys.Of(name)
		if v, err := writeAcquire(t, rc, name, first, "", ""); err != nil || v[0] != 1 {
			t.Fatalf("the write hold: %v %v", v, err)
		}
		if v, err := readAcquire(t, rc, name, first, "0", "", ""); err != nil || v[0] != 1 {
			t.Fatalf("the read hold beside it: %v %v", v, err)
		}
		l := b.Listen(t, n.RWChannel)
		if r, err := rwUnlock(t, rc, name, keys.WriteField(first), "write", "1"); err != nil || r != 2 {
			t.Fatalf("release of the write hold: %d %v; want 2 (the read hold remains)", r, err)
		}
		if got := releases(t, rc, l, n.RWChannel); !slices.Equal(got, []string{"1"}) {
			t.Errorf("release messages %q after the downgrade; want [1]: waiting readers may all enter", got)
		}
		if mode, err := redistest.Do(t, rc, "HGET", n.Lock, "mode").ToString(); err != nil || mode != "read" {
			t.Errorf("mode %q (%v) after the downgrade; want read", mode, err)
		}
	})
}

// A read unlock that leaves the lock ending sooner than before (the longest read hold
// went) publishes "0": a waiter told to sleep until the old end tries again and sleeps
// until the new one, lest the lock stand free meanwhile.
func TestReadUnlockTellsOfASoonerEnd(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		rc := b.Client(t)
		const name = "read-unlock-sooner"
		n := keys.Of(name)
		if v, err := readAcquireFor(t, rc, name, first, "60000", "0", "", ""); err != nil || v[0] != 1 {
			t.Fatalf("the long read hold: %v %v", v, err)
		}
		if v, err := readAcquireFor(t, rc, name, second, "20000", "0", "", ""); err != nil || v[0] != 1 {
			t.Fatalf("the short read hold: %v %v", v, err)
		}
		l := b.Listen(t, n.RWChannel)
		if r, err := rwUnlock(t, rc, name, first, "read", "1"); err != nil || r != 2 {
			t.Fatalf("release of the long read hold: %d %v; want 2 (another reader holds the lock)", r, err)
		}
		if got := releases(t, rc, l, n.RWChannel); !slices.Equal(got, []string{"0"}) {
			t.Errorf("release messages %q after the longest read hold went; want [0]: the lock ends sooner now", got)
		}
		if pttl := redistest.PTTL(t, rc, n.Lock); pttl > 20000 {
			t.Errorf("PTTL %dms after the longest read hold went; want at most the 20s hold left", pttl)
		}
	})
}

// A new reader that gives way to a waiting writer (writer preference) is told to come back
// by the sooner of the lock's PTTL and the end of that writer's entry: a writer that died
// never takes the lock, so nobody publishes when its turn passes.
func TestReaderGivingWayIsBoundByTheWritersEntry(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		rc := b.Client(t)
		const name = "give-way-bound"
		n := keys.Of(name)
		if v, err := readAcquireFor(t, rc, name, first, "60000", "0", "", ""); err != nil || v[0] != 1 {
			t.Fatalf("the read hold: %v %v", v, err)
		}
		redistest.MustDo(t, rc, "ZADD", n.Writers, strconv.FormatInt(redistest.Millis(t, rc)+2000, 10), keys.WriteField(second))
		v, err := readAcquire(t, rc, name, holder, "1", "", "")
		if err != nil || len(v) != 2 || v[0] != 0 {
			t.Fatalf("a new reader beside a waiting writer = %v, %v; want {0, ms} (it gives way)", v, err)
		}
		if v[1] <= 0 || v[1] > 2001 {
			t.Errorf("wait bound %dms; want (0, 2001]: the waiting writer's entry ends in 2000ms, the lock's PTTL in 60000ms", v[1])
		}
	})
}

// Under writer preference a reader at a free lock behind a waiting writer whose deadline
// lies beyond any wait (+inf, or 10^20 ms: no writer writes one, another writer may) is
// told how long to wait as a whole number of milliseconds ahead: {0, ms} is never a wait
// already over or none.
func TestReaderBehindAFarWriterDeadlineToldAWait(t *testing.T) {
	// A real server only: miniredis's Lua reads no infinite score.
	redistest.Real(t, func(t *testing.T, b *redistest.Backend) {
		rc := b.Client(t)
		for _, score := range []string{"+inf", "1e20"} {
			name := "reader-far-writer:" + score
			redistest.MustDo(t, rc, "ZADD", keys.Of(name).Writers, score, second+":write")
			v, err := readAcquire(t, rc, name, first, "1", "1111", "")
			if err != nil || len(v) != 2 || v[0] != 0 || v[1] <= 0 {
				t.Fatalf("reader behind a writer with deadline %s = %v, %v; want {0, ms} with ms > 0", score, v, err)
			}
		}
	})
}
