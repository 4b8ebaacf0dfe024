// Package bound waits for a Redis call no longer than the call's context.
//
// rueidis bounds a call by its context, except while the call waits for its node's
// connection: a call to a node whose connection another caller is dialling waits for that
// dial, which its context does not bound. rueidis's own cluster refresh dials with no
// deadline but the dial timeout, and a node that hangs (a stopped process) accepts the
// connection and never answers its handshake, so such a call can wait out the whole dial
// timeout. A loop that serves many callers (a renewal round, the pub/sub hub) must not
// wait as long for one of them.
package bound

import "context"

// Wait runs f in a goroutine of its own and returns what f returned, or, when ctx ends
// first, the zero value and false. f must be bounded by ctx itself, as a rueidis call on
// ctx is: left behind, it sends nothing once the dial it waits for is done, since rueidis
// sends nothing for a context that has ended. f's result is then dropped.
func Wait[T any](ctx context.Context, f func() T) (T, bool) {
	got := make(chan T, 1) // buffered: f, left behind, finds no one waiting
	go func() { got <- f() }()
	select {
	case v := <-got:
		return v, true
	case <-ctx.Done():
		// Both may be ready: an answer that came is taken.
		select {
		case v := <-got:
			return v, true
		default:
			var zero T
			return zero, false
		}
	}
}
