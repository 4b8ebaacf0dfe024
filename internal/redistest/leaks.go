package redistest

import (
	"testing"

	"go.uber.org/goleak"
)

// NoGoroutinesLeft fails t if goroutines that were not running when before was taken
// (goleak.IgnoreCurrent) still run, but for the test's own connections: the rueidis
// client's pipes, which a relock client's Close leaves open for the rueidis client's
// owner, and miniredis's ends of them.
func NoGoroutinesLeft(t testing.TB, before goleak.Option) {
	t.Helper()
	if err := goleak.Find(before,
		goleak.IgnoreAnyFunction("github.com/redis/rueidis.(*pipe)._background"),
		goleak.IgnoreAnyFunction("github.com/redis/rueidis.(*pipe)._background.func1"),
		goleak.IgnoreAnyFunction("github.com/alicebob/miniredis/v2/server.(*Server).servePeer"),
		goleak.IgnoreAnyFunction("github.com/alicebob/miniredis/v2/server.(*Server).servePeer.func2")); err != nil {
		t.Errorf("goroutines left after Close: %v", err)
	}
}
