package redistest

import (
	"fmt"
	"sort"
	"testing"
	"time"

	"github.com/redis/rueidis"
)

// Snapshot describes key as rc sees it: its type, its value and whether it expires
// ("expires", or the PTTL when it does not: -1 without expiry, -2 for no key). Two
// snapshots are equal exactly when the key's data and its having an expiry are the
// same, however much of that expiry has passed in between, so a test takes one before
// and one after an operation that must leave the key alone. It fails t if a read fails.
func Snapshot(t testing.TB, rc rueidis.Client, key string) string {
	t.Helper()
	typ, err := Do(t, rc, "TYPE", key).ToString()
	if err != nil {
		t.Fatalf("TYPE %s: %v", key, err)
	}
	var val any
	switch typ {
	case "string":
		val, err = Do(t, rc, "GET", key).ToString()
	case "list":
		val, err = Do(t, rc, "LRANGE", key, "0", "-1").AsStrSlice()
	case "set":
		var m []string
		m, err = Do(t, rc, "SMEMBERS", key).AsStrSlice()
		sort.Strings(m)
		val = m
	case "zset":
		// AsZScores reads both replies: RESP2's flat list and RESP3's [member, score]
		// pairs, which AsStrSlice would read as one empty string per member.
		val, err = Do(t, rc, "ZRANGE", key, "0", "-1", "WITHSCORES").AsZScores()
	case "hash":
		val, err = Do(t, rc, "HGETALL", key).AsStrMap() // fmt prints maps sorted
	case "stream":
		val, err = Do(t, rc, "XRANGE", key, "-", "+").ToAny()
	}
	if err != nil {
		t.Fatalf("read %s %s: %v", typ, key, err)
	}
	pttl, err := Do(t, rc, "PTTL", key).AsInt64()
	if err != nil {
		t.Fatalf("PTTL %s: %v", key, err)
	}
	ttl := fmt.Sprint(pttl)
	if pttl > 0 {
		ttl = "expires"
	}
	return fmt.Sprintf("%s %v %s", typ, val, ttl)
}

// expiryDrift is how far, in milliseconds, a key's expiry may seem to move while nothing
// touches it: not at all on a real server, a few milliseconds on miniredis, which keeps a
// time left and counts it down as its clock moves.
const expiryDrift = 100

// Unchanged runs fn and fails t if key changed meanwhile: its type, its value, whether it
// expires (Snapshot), or when it expires, beyond the drift the clock alone may show.
func Unchanged(t testing.TB, rc rueidis.Client, key string, fn func()) {
	t.Helper()
	before, at := Snapshot(t, rc, key), ExpireTime(t, rc, key)
	fn()
	if after := Snapshot(t, rc, key); after != before {
		t.Fatalf("key %q changed:\nbefore %s\nafter  %s", key, before, after)
	}
	if now := ExpireTime(t, rc, key); at > 0 && now > 0 && (now-at > expiryDrift || at-now > expiryDrift) {
		t.Fatalf("key %q's expiry moved from %s to %s", key,
			time.UnixMilli(at).UTC().Format(time.StampMilli), time.UnixMilli(now).UTC().Format(time.StampMilli))
	}
}
