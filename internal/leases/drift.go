package leases

import "time"

// Until is the local deadline of a lease granted by a request sent at sent: the end of
// the lease by the client's monotonic clock, less Allowance(lease).
func Until(sent time.Time, lease time.Duration) time.Time {
	return sent.Add(lease - Allowance(lease))
}

// Allowance is how much earlier than the lease a hold's context ends, for clocks that
// disagree: a hundredth of the lease and 2ms, the clock drift that Redis's distributed
// lock algorithm (Redlock) allows for, rounded up to whole milliseconds, as Redis counts.
//
// Redis times a lease by its own clock, and a server whose clock gains on the client's (a
// wall clock stepped forward, a virtual machine's clock catching up) lets the lease go
// early by the client's measure: at 0.8% fast, 16ms early on a 2s lease, and another owner
// gets the lock while the hold's context would still be live. With the allowance the
// context ends first for a server up to a hundredth fast; the 2ms cover Redis keeping
// expiries in whole milliseconds. The allowance is never under 3ms, so a lease of 3ms or
// less ends at once.
func Allowance(lease time.Duration) time.Duration {
	d := lease/100 + 2*time.Millisecond
	return (d + time.Millisecond - 1).Truncate(time.Millisecond)
}
