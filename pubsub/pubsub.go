// Package pubsub wakes lock waiters without polling. A Hub owns one dedicated subscriber
// connection per client (in a cluster with sharded pub/sub, a subscription per channel on
// the channel's shard); lock waiters register on a lock's channel and park until an
// unlock message, a reconnect or their time bound wakes them.
//
// The protocol a waiter follows (the lock packages implement it):
//
//  1. Try to acquire. If that fails, Subscribe to the lock's channel.
//  2. Ready: wait until the subscription is confirmed by the server, so that every unlock
//     from now on is seen.
//  3. Try to acquire again: an unlock that happened between 1 and 2 was missed, this
//     attempt covers it.
//  4. Wait for a permit, bounded by the lock's TTL; then go to 3.
//
// Permits are counted per channel, so a message that arrives while a waiter is between 3
// and 4 is kept for it rather than lost. Because every wait is bounded by the TTL, a
// message lost anyway (a dropped connection) costs at most one TTL, never a hang.
//
// Messages: "0" (Redisson's unlock message) lets one waiting client try; "1" (its
// read-unlock message) lets every waiter try, since readers may all enter; "2" tells a
// fair lock's waiter that the owner whose turn it was took the lock.
//
// A client's hub runs inside it: a program meets it through Lock's waits and through
// relock.Client.PubSubStats.
package pubsub

// Stats is a snapshot of a client's subscriber.
type Stats struct {
	Channels   int    // channels subscribed, or being subscribed or unsubscribed
	Waiting    int    // waiters parked now
	Messages   uint64 // wake-up messages received
	Woken      uint64 // waits ended by a wake-up (message or reconnect)
	TimedOut   uint64 // waits ended by their time bound with no wake-up
	Reconnects uint64 // times the subscriber connection was made again
}
