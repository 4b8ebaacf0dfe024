package script_test

import (
	"context"
	"slices"
	"testing"

	"github.com/relock-go/relock/internal/keys"
	"github.com/relock-go/relock/internal/redistest"
	"github.com/relock-go/relock/internal/script"
)

// A key in the watchdog's batch that now holds another type counts as lost for its owner,
// and the other locks of the batch are renewed all the same: one foreign key must not
// stop the renewal of the rest, which would then run out under their holders.
func TestRLockRenewBatchPassesOverAForeignKey(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		rc := b.Client(t)
		foreign, held := "{renew}:foreign", "{renew}:held"
		redistest.MustDo(t, rc, "SET", foreign, "an application's string")
		redistest.MustDo(t, rc, "HSET", held, holder, "1")
		redistest.MustDo(t, rc, "PEXPIRE", held, "1000")
		v, err := script.RLockRenew().Exec(context.Background(), rc, []string{foreign, held},
			[]string{"60000", holder, holder}).AsIntSlice()
		if err != nil || !slices.Equal(v, []int64{0, 1}) {
			t.Fatalf("renewal of a string and a held lock = %v, %v; want [0 1]", v, err)
		}
		if pttl := redistest.PTTL(t, rc, held); pttl < 50000 {
			t.Errorf("the held lock's PTTL after the renewal is %dms; want about 60000", pttl)
		}
		if s, err := rc.Do(context.Background(), rc.B().Get().Key(foreign).Build()).ToString(); err != nil || s != "an application's string" {
			t.Errorf("the string after the renewal: %q, %v; want it untouched", s, err)
		}
	})
}

// A read hold whose newest timeout key ran out is gone, even while its field stays in the
// hash because another reader keeps the hash alive: its owner paused past its lease, and
// the others may already have counted its share as over (the last of them frees the lock
// when it finds no live timeout key but its own). Renewing it would tell its holder it
// still holds the lock when a writer may come in. Its renewal answers 0 and writes nothing;
// the other reader's is renewed.
func TestRWLockRenewOfAReadHoldThatRanOut(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		rc := b.Client(t)
		n := keys.Of("renew-readers")
		redistest.MustDo(t, rc, "HSET", n.Lock, "mode", "read", holder, "1", second, "1")
		redistest.MustDo(t, rc, "PEXPIRE", n.Lock, "30000")
		redistest.MustDo(t, rc, "SET", n.ReadTimeout(second, 1), "1", "PX", "30000") // the holder's ran out
		for _, lease := range []string{"60000", "0"} {
			v, err := script.RWLockRenew().Exec(context.Background(), rc, []string{n.Lock, n.Tag, n.Lock, n.Tag},
				[]string{lease, holder, second}).AsIntSlice()
			if err != nil || !slices.Equal(v, []int64{0, 1}) {
				t.Fatalf("renewal (lease %s) of a reader whose timeout key ran out and of a live one = %v, %v; want [0 1]", lease, v, err)
			}
		}
		if n, err := rc.Do(context.Background(), rc.B().Exists().Key(n.ReadTimeout(holder, 1)).Build()).AsInt64(); err != nil || n != 0 {
			t.Errorf("the lapsed reader's timeout key exists after the renewal (%d, %v); want it still gone", n, err)
		}
		if pttl := redistest.PTTL(t, rc, n.ReadTimeout(second, 1)); pttl < 50000 {
			t.Errorf("the live reader's timeout key PTTL %dms after the renewal; want about 60000", pttl)
		}
	})
}

// A renewal never shortens an expiry (lua/rwlock_renew.lua): renewing a read hold of 60s
// with a lease of 2s leaves its timeout key and the lock as they were, and renewing a write
// hold of 60s so leaves the lock as it was.
func TestRWLockRenewNeverShortens(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		rc := b.Client(t)
		const name = "renew-shorter"
		n := keys.Of(name)
		if v, err := readAcquireFor(t, rc, name, first, "60000", "0", "", ""); err != nil || v[0] != 1 {
			t.Fatalf("the read hold: %v %v", v, err)
		}
		v, err := script.RWLockRenew().Exec(context.Background(), rc, []string{n.Lock, n.Tag}, []string{"2000", first}).AsIntSlice()
		if err != nil || !slices.Equal(v, []int64{1}) {
			t.Fatalf("renewal of a live read hold = %v, %v; want [1]", v, err)
		}
		for _, key := range []string{n.ReadTimeout(first, 1), n.Lock} {
			if pttl := redistest.PTTL(t, rc, key); pttl < 50000 {
				t.Errorf("%s: PTTL %dms after a renewal of 2s of a 60s read hold; want about 60000", key, pttl)
			}
		}
		const wname = "renew-shorter-write"
		w := keys.Of(wname)
		if v, err := writeAcquireFor(t, rc, wname, first, "60000", "", ""); err != nil || v[0] != 1 {
			t.Fatalf("the write hold: %v %v", v, err)
		}
		v, err = script.RWLockRenew().Exec(context.Background(), rc, []string{w.Lock, w.Tag}, []string{"2000", keys.WriteField(first)}).AsIntSlice()
		if err != nil || !slices.Equal(v, []int64{1}) {
			t.Fatalf("renewal of a live write hold = %v, %v; want [1]", v, err)
		}
		if pttl := redistest.PTTL(t, rc, w.Lock); pttl < 50000 {
			t.Errorf("PTTL %dms after a renewal of 2s of a 60s write hold; want about 60000", pttl)
		}
	})
}

// A renewal of a plain lock never shortens its expiry (lua/rlock_renew.lua): a re-entry
// may have promised a fixed lease longer than the watchdog's, and renewing a hold of 60s
// with a lease of 2s leaves the lock as it was.
func TestRLockRenewNeverShortens(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		rc := b.Client(t)
		const name = "renew-shorter-plain"
		redistest.MustDo(t, rc, "HSET", name, holder, "1")
		redistest.MustDo(t, rc, "PEXPIRE", name, "60000")
		v, err := script.RLockRenew().Exec(context.Background(), rc, []string{name}, []string{"2000", holder}).AsIntSlice()
		if err != nil || !slices.Equal(v, []int64{1}) {
			t.Fatalf("renewal of a held lock = %v, %v; want [1]", v, err)
		}
		if pttl := redistest.PTTL(t, rc, name); pttl < 50000 {
			t.Errorf("PTTL %dms after a renewal of 2s of a 60s hold; want about 60000", pttl)
		}
	})
}
