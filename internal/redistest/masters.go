package redistest

import (
	"strconv"
	"testing"

	"github.com/redis/rueidis"
)

// DoOnMasters runs one command on every server that holds b's keys and returns the
// replies, one per server. A cluster client sends a command without a key (KEYS,
// FLUSHALL, SCRIPT FLUSH) to one node only, so on a cluster the command goes to each
// master, on a connection of its own (Server.Do); on a single server it goes through
// rc, a client of b. It fails t if the command fails anywhere.
func (b *Backend) DoOnMasters(t testing.TB, rc rueidis.Client, args ...string) []rueidis.RedisMessage {
	t.Helper()
	if b.Cluster == nil {
		m, err := Do(t, rc, args...).ToMessage()
		if err != nil {
			t.Fatalf("%q: %v", args, err)
		}
		return []rueidis.RedisMessage{m}
	}
	var replies []rueidis.RedisMessage
	for _, s := range b.Cluster.Masters() {
		m, err := s.Do(t, args...).ToMessage()
		if err != nil {
			t.Fatalf("%q on %s: %v", args, s.Addr(), err)
		}
		replies = append(replies, m)
	}
	return replies
}

// Keys returns the keys of b that match pattern (KEYS), from every master of a
// cluster; rc is a client of b, as for DoOnMasters.
func (b *Backend) Keys(t testing.TB, rc rueidis.Client, pattern string) []string {
	t.Helper()
	var keys []string
	for _, m := range b.DoOnMasters(t, rc, "KEYS", pattern) {
		ks, err := m.AsStrSlice()
		if err != nil {
			t.Fatalf("KEYS %s: %v", pattern, err)
		}
		keys = append(keys, ks...)
	}
	return keys
}

// NamesOnEveryMaster returns one name for each master of c, in the order found among
// prefix0, prefix1 and so on, so that a test using every name covers every shard. It
// fails t if the first 1000 names do not cover all the masters.
func (c *Cluster) NamesOnEveryMaster(t testing.TB, prefix string) []string {
	t.Helper()
	masters := len(c.Masters())
	seen := map[string]bool{}
	var names []string
	for i := 0; i < 1000 && len(names) < masters; i++ {
		name := prefix + strconv.Itoa(i)
		if addr := c.MasterOf(c.Slot(name)).Addr(); !seen[addr] {
			seen[addr] = true
			names = append(names, name)
		}
	}
	if len(names) < masters {
		t.Fatalf("found names on %d of %d masters", len(names), masters)
	}
	return names
}
