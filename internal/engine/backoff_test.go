package engine

import (
	"math"
	"testing"
	"time"
)

// A spin waiter's next back-off is twice the last and a random part of up to half of it,
// and never more than the most the settings allow: from any back-off the option accepts,
// the next lies between min(2*next, most) and min(2.5*next, most). Guards against a random
// part that reaches the whole back-off (each sleep would grow up to threefold), against a
// back-off that grows past its most, and against a back-off that grows less than twofold.
func TestSpinBackOffStepStaysInItsBounds(t *testing.T) {
	for _, c := range []struct{ next, most time.Duration }{
		{time.Millisecond, 128 * time.Millisecond}, // Redisson's defaults
		{10 * time.Millisecond, 20 * time.Millisecond},
		{64 * time.Millisecond, 128 * time.Millisecond},
		{100 * time.Millisecond, time.Minute},
		{time.Minute, time.Minute},
		{math.MaxInt64 / 2, math.MaxInt64}, // doubled, it would overflow
	} {
		lo, hi := c.most, c.most
		if c.next <= math.MaxInt64/3 {
			lo, hi = min(2*c.next, c.most), min(2*c.next+c.next/2, c.most)
		}
		for range 1000 {
			if got := backOff(c.next, c.most); got < lo || got > hi {
				t.Fatalf("back-off after %v (most %v) = %v; want between %v and %v", c.next, c.most, got, lo, hi)
			}
		}
	}
}
