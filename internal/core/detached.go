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
//
// The calls take turns at a few of them rather than all sharing one. A call waits on its
// reply and its deadline's Done channel at once, so every waiting call is queued on that
// channel: with one channel for all, every call's wait would lock the same channel, and
// the processors would take its lock (and its cache line) from each other on every call.
type deadlines struct {
	// base is when the client started, with its monotonic clock reading: a deadline's end
	// is kept as the time since base, so that a call reads the monotonic clock alone.
	base    time.Time
	timeout time.Duration
	grain   time.Duration
	turn    atomic.Uint32
	shards  [deadlineShards]shard
}

// deadlineShards is how many deadlines are current at once: a power of two, a few per
// processor of a large machine.
const deadlineShards = 32

// shard is one current deadline, alone on its cache line.
type shard struct {
	cur atomic.Pointer[deadline]
	_   [56]byte
}

func newDeadlines(timeout time.Duration) *deadlines {
	return &deadlines{base: time.Now(), timeout: timeout, grain: max(timeout/16, time.Millisecond)}
}

// next returns a deadline at least timeout from now.
func (ds *deadlines) next() *deadline {
	now := time.Since(ds.base)
	want := now + ds.timeout
	sh := &ds.shards[ds.turn.Add(1)%deadlineShards]
	for {
		cur := sh.cur.Load()
		if cur != nil && cur.end >= want {
			return cur
		}
		end := want + ds.grain
		d := &deadline{end: end, at: ds.base.Add(end), done: make(chan struct{})}
		if !sh.cur.CompareAndSwap(cur, d) {
			continue // another call made one first: it may do
		}
		time.AfterFunc(end-now, func() {
			d.ended.Store(true)
			close(d.done)
		})
		return d
	}
}

// deadline is a context with no values that ends at a fixed time.
type deadline struct {
	end   time.Duration // at, as the time since deadlines.base
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
