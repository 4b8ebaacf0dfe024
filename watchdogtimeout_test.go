package relock_test

import (
	"testing"
	"time"

	"github.com/relock-go/relock"
	"github.com/relock-go/relock/internal/redistest"
	"github.com/relock-go/relock/internal/redistest/relocktest"
)

// The watchdog timeout is a lease the caller gives, kept in whole milliseconds as Redis
// keeps it (lockopt.Lease): a fraction kept by the client alone would put the holds' local
// deadlines after their leases in Redis, and another owner could get a lock while its
// holder's context is live.
func TestWatchdogTimeoutIsWholeMilliseconds(t *testing.T) {
	t.Parallel()
	b := redistest.Mini(t)
	c := relocktest.New(t, b, relock.WithWatchdogTimeout(1500*time.Millisecond+900*time.Microsecond))
	if got := relock.WatchdogLease(c); got != 1500*time.Millisecond {
		t.Errorf("watchdog timeout 1.5009s kept as a lease of %v; want 1.5s, the whole milliseconds", got)
	}
}
