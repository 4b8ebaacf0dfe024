// Package relocktest makes relock clients for tests on the Redis servers of the
// redistest harness.
//
// It is a package of its own because redistest cannot import relock: the lock
// packages' own tests (package watchdog, for one) use redistest, and relock imports
// them, so the import would be a cycle.
package relocktest

import (
	"testing"

	"github.com/redis/rueidis"

	"github.com/relock-go/relock"
)

// Source is what hands out rueidis clients of its own: a redistest.Backend,
// Server, Cluster or Sentinel.
type Source interface {
	Client(t testing.TB) rueidis.Client
}

// New returns a relock client with opts on a new rueidis client of src, so that it
// shares no connection with any other client of the test, and closes it at t's
// cleanup. It fails t if relock.New fails.
func New(t testing.TB, src Source, opts ...relock.Option) *relock.Client {
	t.Helper()
	c, err := relock.New(src.Client(t), opts...)
	if err != nil {
		t.Fatalf("relock.New: %v", err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// Waiting returns how many waiters the clients have parked now, all together.
func Waiting(clients ...*relock.Client) int {
	n := 0
	for _, c := range clients {
		n += c.PubSubStats().Waiting
	}
	return n
}
