package redistest

import (
	"strings"
	"testing"
	"time"
)

// A snapshot changes with what a test must see changed (a value, an expiry set, the key
// gone) and not with what passes by itself (the time left of an expiry); PTTL and MustDo
// go through the same client.
func TestSnapshot(t *testing.T) {
	Each(t, func(t *testing.T, b *Backend) {
		rc := b.Client(t)
		MustDo(t, rc, "HSET", "h", "f", "1", "g", "2")
		plain := Snapshot(t, rc, "h")
		if want := "hash map[f:1 g:2] -1"; plain != want {
			t.Fatalf("Snapshot of a hash = %q; want %q", plain, want)
		}
		MustDo(t, rc, "PEXPIRE", "h", "60000")
		expiring := Snapshot(t, rc, "h")
		if expiring == plain {
			t.Fatalf("Snapshot %q did not change when the key got an expiry", expiring)
		}
		if ms := PTTL(t, rc, "h"); ms <= 0 || ms > 60000 {
			t.Fatalf("PTTL = %d; want the expiry just set", ms)
		}
		MustDo(t, rc, "PEXPIRE", "h", "50000")
		if again := Snapshot(t, rc, "h"); again != expiring {
			t.Fatalf("Snapshot %q changed to %q with only the time left of the expiry", expiring, again)
		}
		MustDo(t, rc, "HSET", "h", "f", "3")
		if changed := Snapshot(t, rc, "h"); changed == expiring {
			t.Fatalf("Snapshot %q did not change with a value", changed)
		}
		MustDo(t, rc, "DEL", "h")
		if gone := Snapshot(t, rc, "h"); gone == plain || PTTL(t, rc, "h") != -2 {
			t.Fatalf("Snapshot of a deleted key = %q, PTTL %d", gone, PTTL(t, rc, "h"))
		}

		// A sorted set's members and scores, which a real server under RESP3 replies to
		// ZRANGE WITHSCORES as pairs: a score or a member changed must show.
		MustDo(t, rc, "ZADD", "z", "1", "a", "2", "b")
		zs := Snapshot(t, rc, "z")
		if want := "zset [{a 1} {b 2}] -1"; zs != want {
			t.Fatalf("Snapshot of a zset = %q; want %q", zs, want)
		}
		MustDo(t, rc, "ZADD", "z", "3", "a")
		if changed := Snapshot(t, rc, "z"); changed == zs {
			t.Fatalf("Snapshot %q did not change with a score", changed)
		}
		MustDo(t, rc, "ZADD", "z", "1", "a")
		MustDo(t, rc, "ZREM", "z", "b")
		MustDo(t, rc, "ZADD", "z", "2", "c")
		if changed := Snapshot(t, rc, "z"); changed == zs {
			t.Fatalf("Snapshot %q did not change with a member", changed)
		}
	})
}

// Unchanged sees an expiry moved, later or earlier, which Snapshot does not tell from the
// time passing; an expiry left alone passes, on miniredis too, whose clock counts it down.
func TestUnchangedSeesTheExpiry(t *testing.T) {
	Each(t, func(t *testing.T, b *Backend) {
		rc := b.Client(t)
		MustDo(t, rc, "SET", "k", "v", "PX", "60000")
		Unchanged(t, rc, "k", func() { time.Sleep(50 * time.Millisecond) })
		for _, ms := range []string{"30000", "90000"} {
			r := runTB(t, func(tb testing.TB) {
				Unchanged(tb, rc, "k", func() { MustDo(t, rc, "PEXPIRE", "k", ms) })
			})
			if !strings.Contains(r.fatal, "expiry moved") {
				t.Errorf("Unchanged of an expiry moved to %sms from now: %q; want it to fail", ms, r.fatal)
			}
		}
	})
}
