package redistest

import (
	"testing"

	"github.com/redis/rueidis"
)

// FairQueue returns the owners waiting in the queue of the fair lock name, first in
// line first, as rc reads them from the queue list. It fails t if the read fails.
func FairQueue(t testing.TB, rc rueidis.Client, name string) []string {
	t.Helper()
	q, err := Do(t, rc, "LRANGE", "redisson_lock_queue:{"+name+"}", "0", "-1").AsStrSlice()
	if err != nil {
		t.Fatal(err)
	}
	return q
}
