package main

import (
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/relock-go/relock"
	"github.com/relock-go/relock/internal/keys"
	"github.com/relock-go/relock/internal/redistest"
	"github.com/relock-go/relock/internal/redistest/relocktest"
	"github.com/relock-go/relock/rlock"
)

// inspect shows a re-entered reader's lease of each hold, read from that hold's own
// timeout key (readTtlsMs in JSON, one per hold). Here the second hold's key is given a
// lease of its own by hand. Guards against a reader shown with one lease whatever its
// count, or with the first hold's lease for every hold.
func TestInspectReaderLeasePerHold(t *testing.T) {
	redistest.Real(t, func(t *testing.T, b *redistest.Backend) {
		ctx := redistest.Context(t, time.Minute)
		mu := relocktest.New(t, b).RWLock("shelf")
		// Fixed leases: no watchdog renews the keys behind the test's back.
		r1, err := mu.RLock(relock.NewOwner(ctx), rlock.WithLease(time.Minute))
		if err != nil {
			t.Fatal(err)
		}
		r2, err := mu.RLock(r1, rlock.WithLease(time.Minute))
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = mu.RUnlock(r2); _ = mu.RUnlock(r1) }()
		r := inspectJSON(t, b.Addr, "shelf")
		if len(r.Owners) != 1 || r.Owners[0].Holds != 2 {
			t.Fatalf("inspect --json shelf: %+v; want one reader holding twice", r)
		}
		owner := r.Owners[0].Owner
		redistest.MustDo(t, b.Client(t), "PEXPIRE", keys.Of("shelf").ReadTimeout(owner, 2), "600000")

		r = inspectJSON(t, b.Addr, "shelf")
		if ttls := r.Owners[0].ReadTTLsMs; len(ttls) != 2 || ttls[0] <= 0 || ttls[0] > 60000 || ttls[1] <= 300000 {
			t.Errorf("inspect --json shelf: reader leases %v; want the first hold's (up to 1m), then the second's (about 10m)", ttls)
		}
		out, err := relockCmd(t, b.Addr, "", "inspect", "shelf")
		if err != nil || !regexp.MustCompile(`\n  `+regexp.QuoteMeta(owner)+` +reads ×2  \(leases [1-5]?\d(\.\d+)?s, (9m\d|10m0)[^,)]*\)`).MatchString(out) {
			t.Errorf("inspect shelf: %v; want the reader's two leases, up to 1m and about 10m:\n%s", err, out)
		}
	})
}

// inspect shows the lock's remaining lease in milliseconds (ttlMs in JSON) and as a
// duration in the text view: a hold with a fixed lease of a minute, just taken, shows
// close to a minute, not a number of seconds read as milliseconds. Guards against a lease
// read with TTL (seconds) where PTTL is meant.
func TestInspectShowsTheLeaseLeft(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		ctx := redistest.Context(t, time.Minute)
		mu := relocktest.New(t, b).Lock("lease-left")
		h, err := mu.Lock(relock.NewOwner(ctx), rlock.WithLease(time.Minute))
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = mu.Unlock(h) }()
		if r := inspectJSON(t, b.Addr, "lease-left"); r.TTLMs <= 30000 || r.TTLMs > 60000 {
			t.Errorf("inspect --json lease-left: ttlMs %d; want the minute's lease left in milliseconds (30000 to 60000)", r.TTLMs)
		}
		out, err := relockCmd(t, b.Addr, "", "inspect", "lease-left")
		if err != nil || !regexp.MustCompile(`^lease-left: rlock, held, lease [3-5]\d(\.\d+)?s left\n`).MatchString(out) {
			t.Errorf("inspect lease-left: %v; want a lease of 30s to 1m left:\n%s", err, out)
		}
	})
}

// inspect shows a reader whose field counts more holds than any reader makes (tampered
// data, or debris: over 1000, as the release script takes it) with its count alone, and
// answers at once: it reads no timeout key per hold of such a count, where a count of
// 10^12 would have it send PTTLs, and hold their replies, for ever.
func TestInspectReaderOfCountlessHolds(t *testing.T) {
	redistest.Real(t, func(t *testing.T, b *redistest.Backend) {
		side := b.Client(t)
		const n, reader = "countless-reader", "0d2c8f0e-5b1a-4c6e-9f3d-2a7b8c9d0e1f:1"
		redistest.MustDo(t, side, "HSET", n, "mode", "read", reader, "1000000000000")
		redistest.MustDo(t, side, "PEXPIRE", n, "60000")
		_, r := inspectBinary(t, b, "--json", n)
		if r.Kind != "rwlock" || len(r.Owners) != 1 || r.Owners[0].Holds != 1000000000000 || len(r.Owners[0].ReadTTLsMs) != 0 {
			t.Fatalf("inspect --json %s: %+v; want the one reader with its count and no lease per hold", n, r)
		}
		out, _ := inspectBinary(t, b, n)
		if !strings.Contains(out, reader+" ") || !strings.Contains(out, "reads ×1000000000000") {
			t.Errorf("inspect %s: want the reader and its count:\n%s", n, out)
		}
	})
}
