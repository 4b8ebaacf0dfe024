// Package pubsub wakes lock waiters without polling. A Hub owns one dedicated subscriber
// connection per client (in a cluster with sharded pub/sub, a subscription per channel on
// the channel's shard); lock waiters register on a lock's channel and park until an
// unlock message, a reconnect or the lock's lease as they last saw it wakes them.
//
// The protocol a waiter follows (the lock packages implement it):
//
//  1. Take a mark of the hub (a counter read: it costs nothing on a free lock), then try
//     to acquire. If that fails, Subscribe to the lock's channel.
//  2. If the channel was already subscribed and confirmed at the mark, and no wake-up for
//     this process and no reconnect came on it since, every unlock after the attempt will
//     be heard: go to 4. (A release that woke another process by its code does not count,
//     nor does a new hold's lease: see below.)
//  3. Otherwise wait until the subscription is confirmed (Ready), and try again: an unlock
//     that happened between 1 and now may have been missed, this attempt covers it.
//  4. Wait for a wake-up, bounded by the lock's lease; then try again, and wait again if
//     that fails.
//
// Step 2 spares the second attempt whenever a process already has waiters on the lock,
// or had them less than a second ago: a channel stays subscribed for a short linger (one
// second) after its last waiter leaves, so that a lock contended in bursts is not
// unsubscribed and subscribed again between them. Messages that arrive while it lingers
// with nobody subscribed still count against step 2.
//
// Wake-ups are counted per channel, so a message that arrives while a waiter is between
// its attempt and its wait is kept for it rather than lost. "0" (Redisson's unlock
// message) lets one waiter of each process try; "1" (its read-unlock message) lets every
// waiter try, since readers may all enter; "2" tells a fair lock's waiter that the owner
// whose turn it was took the lock.
//
// Across processes one release wakes one waiter, not one per process: a process whose
// waiters wait registers in the lock's wake registry in Redis, and the unlock publishes
// the wake code of one registered process before its "0" or "1". That process wakes one
// waiter; every relock process ignores the message that follows a code; Redisson's clients
// ignore codes and hear the message as their own. A message with no code before it (from
// Redisson, or with no process registered) wakes one waiter in each process as above. A
// process woken with no waiter left passes the wake-up on to the next registered one. A
// first-level acquisition publishes its lease as "-<ms>" while processes are registered:
// each sets its channel's timer to that hold's end, so that waiters not woken learn of a
// hold that ends without an unlock; it does so only when that lease is shorter than the
// registered waiters sleep. docs/design.md tells the whole protocol.
//
// Within a process a release does without a wake-up: an unlock of a plain lock that frees
// it while a waiter of the same process is parked on it hands the lock to that waiter in
// the same script call, and the waiter holds it without an attempt of its own. A new
// waiter of a process whose waiters are in line joins them without an attempt. A process
// hands a lock on at most a few times in a row; the release after that frees it as above.
//
// A message lost anyway (a dropped connection) costs at most one lease, never a hang: the
// waiters of a channel share one timer, set at the earliest end of the holder's lease that
// their attempts saw, plus a sixty-fourth of it (at most 250 ms), which lets a live
// holder's renewal, due at that moment, land first. When it fires it wakes one waiter of
// the process, not all (one reader and one writer on a read-write lock's channel: one's
// attempt says nothing of the other's): that one tries, and either waits again with the
// lease it learnt, which sets the timer again, or gets the lock and sets the timer for its
// own lease (a reader also wakes the next reader, which may get in beside it). A process
// thus checks a held lock once per lease however many of its goroutines wait. A
// woken waiter that leaves instead (its context ended, or Redis failed it) passes the
// wake-up on. Waiters that keep a queue entry alive (fair-lock waiters, preferred writers)
// come back on their own schedule as well, every refresh period. Every waiter stops
// waiting when its own context ends.
//
// After the subscriber connection drops, the hub makes it again, subscribes every channel
// still wanted and, once each is confirmed, wakes all its waiters once, since a message
// may have been published while nobody listened.
//
// A client's hub runs inside it: a program meets it through Lock's waits and through
// relock.Client.PubSubStats.
package pubsub

// Stats is a snapshot of a client's subscriber.
type Stats struct {
	Channels   int    // channels subscribed (lingering ones too), or being subscribed or unsubscribed
	Waiting    int    // waiters parked now
	Messages   uint64 // wake-up messages received
	Woken      uint64 // waits ended by a wake-up (message or reconnect, passed on by another waiter, or a handoff)
	TimedOut   uint64 // waits ended by a time bound: their own, or their channel's timer
	Reconnects uint64 // times the subscriber connection was made again
}
