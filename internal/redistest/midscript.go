package redistest

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2/server"
)

// PauseBefore makes the miniredis of b sleep for d before the first command named cmd
// (upper case: "HGETALL") on key, until t's cleanup. Sent from a script, the pause falls
// between two of the script's commands, and a lease can run out there: miniredis's clock
// moves while a script runs (its TTLs follow the wall clock), where a real server's stands
// still. The returned function tells whether the pause has happened. It takes miniredis's
// one pre-hook, which ClockAhead also takes: a test uses one or the other.
func PauseBefore(t testing.TB, b *Backend, cmd, key string, d time.Duration) (paused func() bool) {
	t.Helper()
	if b.Mini == nil {
		t.Fatalf("redistest: PauseBefore needs miniredis, not %s", b.Name)
	}
	var done atomic.Bool
	b.Mini.Server().SetPreHook(func(_ *server.Peer, name string, args ...string) bool {
		if name == cmd && len(args) > 0 && args[0] == key && done.CompareAndSwap(false, true) {
			time.Sleep(d)
		}
		return false
	})
	t.Cleanup(func() { b.Mini.Server().SetPreHook(nil) })
	return done.Load
}
