package relock

import "time"

// WatchdogLease is the lease the client gives holds taken without one of their own, as its
// watchdog keeps their local deadlines.
func WatchdogLease(c *Client) time.Duration { return c.core.Lease }
