// Package watchdog keeps a client's holds alive and tells their holders when they are
// lost. One Watchdog per client, not a timer per lock: every period (a third of the
// lease) it renews all renewable holds in batches, one script call per 100 locks of one
// cluster slot, all calls of a tick pipelined, so a tick costs one round trip per node.
//
// Each hold has a context that ends when the hold does: with cause ErrLeaseLost when a
// renewal finds the owner gone, or when the hold's local deadline passes without a
// successful renewal (Redis unreachable, paused, or a fixed lease that ran out); with
// context.Canceled when the holder releases it.
//
// Deadlines are local: taken from the monotonic clock when the acquiring (or renewing)
// request was sent, less a hundredth of the lease and 2ms for a server whose clock gains
// on the client's, so they never lie later than the lease in Redis while the server's
// clock runs at most a hundredth fast.
//
// A client's watchdog runs inside it: a program meets it through the hold contexts that
// Lock returns and through relock.Client.WatchdogStats.
package watchdog

// Stats is a snapshot of a client's watchdog.
type Stats struct {
	Holds   int    // holds known now
	Ticks   uint64 // renewal rounds done (rounds with no hold to renew are not counted)
	Calls   uint64 // renewal script calls sent
	Batches uint64 // pipelined sends (round trips per node)
	Renewed uint64 // hold renewals that succeeded
	Lost    uint64 // holds found lost: owner gone, deadline passed, or released as not held
	// Abandoned counts holds that no context could release any more (every context naming
	// the owner became unreachable without an Unlock): no longer renewed, they free when
	// their leases run out.
	Abandoned uint64
}
