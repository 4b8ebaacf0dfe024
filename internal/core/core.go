// Package core holds the parts of a relock client that every lock kind uses: the Redis
// client, the client id and its owners, the pub/sub hub, and the settings. The root
// package builds one per relock.Client; lock packages receive it and never import the root.
package core

import (
	"context"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/redis/rueidis"

	"github.com/relock-go/relock/internal/owner"
	"github.com/relock-go/relock/pubsub"
)

// Client is shared by all locks of one relock.Client.
type Client struct {
	Redis  rueidis.Client
	ID     string        // the client's UUID, the first part of every owner it makes
	Owners *owner.Issuer // owners "<ID>:<n>"
	Hub    *pubsub.Hub

	// Lease is the lease of a hold taken without an explicit one: the watchdog timeout.
	Lease time.Duration
	// Timeout bounds a Redis call that cannot follow the caller's context: an acquire
	// attempt whose outcome must be known, and Unlock, which must work after cancellation.
	Timeout time.Duration

	closed  atomic.Bool
	request atomic.Uint64
}

// New returns a core for rc. The caller owns hub and closes it through Close.
func New(rc rueidis.Client, id string, hub *pubsub.Hub, lease, timeout time.Duration) *Client {
	return &Client{Redis: rc, ID: id, Owners: owner.NewIssuer(id), Hub: hub, Lease: lease, Timeout: timeout}
}

// Close marks the client closed and stops its hub. It is idempotent.
func (c *Client) Close() {
	if c.closed.CompareAndSwap(false, true) {
		c.Hub.Close()
	}
}

// Closed reports whether Close was called.
func (c *Client) Closed() bool { return c.closed.Load() }

// RequestID returns an id unique to this call across all clients: the client id and a
// counter. It names an unlock latch.
func (c *Client) RequestID() string {
	return c.ID + ":" + strconv.FormatUint(c.request.Add(1), 10)
}

// Detached returns a context for a call that must run to its end whatever happens to
// ctx: it keeps ctx's values, drops its cancellation, and is bounded by the client's
// timeout instead.
func (c *Client) Detached(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(ctx), c.Timeout)
}
