package retry

import (
	"context"
	"time"
)

// Outage is a waiter's view of Redis being out of reach. A waiter that Redis has told to
// wait, and whose later attempt fails for want of an answer (the client's timeout ran out,
// a connection broke: see Lost), keeps waiting while its context lives, as Redisson's
// waiters ride out a stall: it tries again after OutagePause. It gives up, with the
// attempt's error, once attempts have failed for longer than a lease: the holders' leases
// run out in as long when Redis cannot be reached, so the lock is no longer what the
// waiter waited for. Redis's refusals of a command it will run once it is ready (LOADING,
// TRYAGAIN, CLUSTERDOWN) count as no answer, as Lost says; any other answer (WRONGTYPE, a
// script error) ends the wait at once. The zero Outage is no outage.
type Outage struct{ since time.Time }

// OutagePause is how long a waiter pauses after an attempt that got no answer.
const OutagePause = time.Second

// Ride reports whether the waiter keeps waiting after its attempt failed with err: ctx is
// live, err is a failure to get an answer, and attempts have failed for at most limit.
func (o *Outage) Ride(ctx context.Context, err error, limit time.Duration) bool {
	if ctx.Err() != nil || !Lost(err) {
		return false
	}
	now := time.Now()
	if o.since.IsZero() {
		o.since = now
	}
	return now.Sub(o.since) <= limit
}

// End records an attempt that got an answer: the outage, if any, is over.
func (o *Outage) End() { o.since = time.Time{} }

// Lost reports whether a call that failed with err may have been lost on the way, rather
// than answered: the request may not have reached Redis, or it ran and its reply went
// missing. Redis's refusals of a command unrun until it is ready count as lost too.
func Lost(err error) bool { return err != nil && retryable(err) }
