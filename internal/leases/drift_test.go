package leases

import (
	"testing"
	"time"
)

// The allowance for clocks is what its doc states, and no more: a hundredth of the lease
// and 2ms, rounded up to whole milliseconds, so never under 3ms; a lease of 3ms or less
// ends as it is sent. A smaller allowance lets a server whose clock runs up to a hundredth
// fast give the lock to another owner while the hold's context is live; a larger one ends
// every hold's context sooner than it needs to.
func TestAllowanceIsAHundredthAnd2msRoundedUp(t *testing.T) {
	for _, tc := range []struct{ lease, want time.Duration }{
		{0, 2 * time.Millisecond},
		{time.Millisecond, 3 * time.Millisecond},
		{3 * time.Millisecond, 3 * time.Millisecond},
		{100 * time.Millisecond, 3 * time.Millisecond},
		{150 * time.Millisecond, 4 * time.Millisecond},   // 3.5ms, rounded up
		{1001 * time.Millisecond, 13 * time.Millisecond}, // 12.01ms, rounded up
		{time.Second, 12 * time.Millisecond},
		{2 * time.Second, 22 * time.Millisecond},
		{30 * time.Second, 302 * time.Millisecond},
	} {
		if got := Allowance(tc.lease); got != tc.want {
			t.Errorf("Allowance(%v) = %v; want %v (a hundredth of the lease and 2ms, rounded up to whole milliseconds)", tc.lease, got, tc.want)
		}
	}
	sent := time.Now()
	for _, tc := range []struct{ lease, want time.Duration }{
		{2 * time.Millisecond, 0},
		{3 * time.Millisecond, 0},
		{4 * time.Millisecond, time.Millisecond},
		{2 * time.Second, 2*time.Second - 22*time.Millisecond},
		{30 * time.Second, 30*time.Second - 302*time.Millisecond},
	} {
		if got := Until(sent, tc.lease).Sub(sent); got > tc.want || (tc.want > 0 && got != tc.want) {
			t.Errorf("Until(sent, %v) is %v after sent; want %v, the lease less its allowance", tc.lease, got, tc.want)
		}
	}
}
