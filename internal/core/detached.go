package core

import (
	"context"
	"sync/atomic"
	"time"
)

// Detached returns a context for a call that must run to its end whatever happens to
// ctx: it keeps ctx's values, drops its cancellation, and ends at the client's timeout
// instead (give or take one grain, see deadlines).
func (c *Client) Detached(ctx context.Context) context.Context {
	// A context with no values has nothing to keep: the shared deadline serves as it is,
	// and the call allocates nothing.
	if ctx == context.Background() {
		return c.deadlines.next()
	}
	return c.DetachInto(new(Detached), ctx)
}

// DetachInto is Detached with the context made in dst, which a caller that allocates a
// struct per call anyway can hold, rather than allocate one more.
func (c *Client) DetachInto(dst *Detached, ctx context.Context) context.Context {
	d := c.deadlines.next()
	if ctx == context.Background() {
		return d
	}
	*dst = Detached{Context: ctx, d: d}
	return dst
}

// Detached is a context's values with a shared deadline's end: see Client.Detached.
type Detached struct {
	context.Context // for its values only
	d               *deadline
}

func (c *Detached) Deadline() (time.Time, bool) { return c.d.Deadline() }
func (c *Detached) Done() <-chan struct{}       { return c.d.Done() }
func (c *Detached) Err() error                  { return c.d.Err() }

// deadlines hands out contexts that end at least timeout from now, shared by the calls
// that start within one grain of each other: a call then costs no timer and no context of
// its own, which on the hot path (every acquisition and every unlock) would be most of the
// client's allocations. The price is that a call's bound is up to one grain longer.
type deadlines struct {
	timeout time.Duration
	grain   time.Duration
	cur     atomic.Pointer[deadline]
}

func newDeadlines(timeout time.Duration) *deadlines {
	return &deadlines{timeout: timeout, grain: max(timeout/16, time.Millisecond)}
}

// next returns a deadline at least timeout from now.
func (ds *deadlines) next() *deadline {
	now := time.Now()
	want := now.Add(ds.timeout)
	for {
		cur := ds.cur.Load()
		if cur != nil && !cur.at.Before(want) {
			return cur
		}
		d := &deadline{at: want.Add(ds.grain), done: make(chan struct{})}
		if !ds.cur.CompareAndSwap(cur, d) {
			continue // another call made one first: it may do
		}
		time.AfterFunc(d.at.Sub(now), func() {
			d.ended.Store(true)
			close(d.done)
		})
		return d
	}
}

// deadline is a context with no values that ends at a fixed time.
type deadline struct {
	at    time.Time
	done  chan struct{}
	ended atomic.Bool
}

func (d *deadline) Deadline() (time.Time, bool) { return d.at, true }
func (d *deadline) Done() <-chan struct{}       { return d.done }
func (d *deadline) Value(any) any               { return nil }

func (d *deadline) Err() error {
	if d.ended.Load() {
		return context.DeadlineExceeded
	}
	return nil
}
