package engine

import (
	"math"
	"testing"
	"time"

	"github.com/relock-go/relock/internal/core"
	"github.com/relock-go/relock/internal/lockopt"
)

// A waiter told a holder's PTTL sleeps a while before it tries again, never no time at all
// nor a negative time, which the attempt would take for a grant: a PTTL of 0 (the lock's
// last millisecond) is slept as a millisecond, and one of any length up to the most an
// int64 holds as at most a hundred years (lockopt.Forever).
func TestWaitBoundIsAlwaysAWait(t *testing.T) {
	l := &Lock{c: &core.Client{Lease: 30 * time.Second}}
	for _, pttl := range []int64{0, 1, 30000, lockopt.Forever.Milliseconds() + 1, math.MaxInt64 / 1000, math.MaxInt64} {
		if d := l.waitBound(pttl); d <= 0 || d > lockopt.Forever {
			t.Errorf("waitBound(%d) = %v; want a wait above zero, at most %v", pttl, d, lockopt.Forever)
		}
	}
}
