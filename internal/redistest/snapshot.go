package redistest

import (
	"fmt"
	"sort"
	"testing"

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
