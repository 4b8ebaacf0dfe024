// Package countdown is the mechanism behind relock's count-down latch (package countdown at
// the module's root documents the contract), with Redisson's RCountDownLatch data: a
// string key holding the count, and a channel on which "0" says the count reached zero.
package countdown

import (
	"context"
	"fmt"
	"strconv"

	"github.com/relock-go/relock/internal/core"
	"github.com/relock-go/relock/internal/hub"
	"github.com/relock-go/relock/internal/keys"
	"github.com/relock-go/relock/internal/lockerr"
	"github.com/relock-go/relock/internal/retry"
	"github.com/relock-go/relock/internal/script"
)

// Latch is one count-down latch of one client. Its methods are safe for concurrent use.
type Latch struct {
	c   *core.Client
	n   keys.Latch
	err error // ErrInvalidName with the reason, or nil
}

// New returns the latch named name on c.
func New(c *core.Client, name string) *Latch {
	return &Latch{c: c, n: keys.LatchOf(name), err: keys.CheckLatch(name)}
}

// Name returns the latch's name, which is also its Redis key.
func (l *Latch) Name() string { return l.n.Count }

func (l *Latch) fail(op string, err error) error { return lockerr.Redis(op, l.n.Count, err) }

// check returns the error of a call with ctx, or nil: valid's, or ctx's own once it has
// ended.
func (l *Latch) check(ctx context.Context) error {
	if err := l.valid(ctx); err != nil {
		return err
	}
	return ctx.Err()
}

// valid returns the error of a call with ctx, whether or not ctx has ended, or nil.
func (l *Latch) valid(ctx context.Context) error {
	switch {
	case ctx == nil:
		return lockerr.ErrNilContext
	case l.err != nil:
		return l.err
	case l.c == nil:
		return lockerr.ErrNotMade
	case l.c.Closed():
		return lockerr.ErrClosed
	}
	return nil
}

// TrySetCount sets the count to n if the latch has none.
func (l *Latch) TrySetCount(ctx context.Context, n int64) (bool, error) {
	err := l.check(ctx)
	if err == nil && n < 1 {
		err = fmt.Errorf("%w: a latch's count of %d; at least 1", lockerr.ErrInvalidCount, n)
	}
	if err != nil {
		return false, l.fail("trysetcount", err)
	}
	set, err := script.LatchSet().Exec(ctx, l.c.Redis, []string{l.n.Count, l.n.Channel},
		[]string{strconv.FormatInt(n, 10), l.c.Publish}).AsInt64()
	return set == 1, l.fail("trysetcount", err)
}

// CountDown counts the latch down by one.
func (l *Latch) CountDown(ctx context.Context) error {
	if err := l.valid(ctx); err != nil {
		return l.fail("countdown", err)
	}
	// A refusal of the script unrun is sent again; a lost reply is not: the count may have
	// gone down, and a second send would count down twice.
	dctx := l.c.Detached(ctx)
	err := retry.Refusals(dctx, func() error {
		return script.LatchCountDown().Exec(dctx, l.c.Redis, []string{l.n.Count, l.n.Channel},
			[]string{l.c.Publish}).Error()
	})
	return l.fail("countdown", err)
}

// Count returns the count; 0 when the latch is open.
func (l *Latch) Count(ctx context.Context) (int64, error) {
	if err := l.check(ctx); err != nil {
		return 0, l.fail("count", err)
	}
	n, err := count(ctx, l.c.Redis, l.n.Count)
	return max(n, 0), l.fail("count", err)
}

// Await waits until the count is zero or ctx ends. A waiter is woken by the message of the
// count down that reaches zero; it also looks again once per lease (the client's watchdog
// timeout), which finds a latch deleted without a message (by DEL, or an expiry).
func (l *Latch) Await(ctx context.Context) error {
	if err := l.check(ctx); err != nil {
		return l.fail("await", err)
	}
	c := l.c
	mark := c.Hub.Mark()
	n, err := count(ctx, c.Redis, l.n.Count)
	if err != nil || n <= 0 {
		return l.fail("await", err)
	}
	sub, err := c.Hub.Subscribe(l.n.Channel, hub.LatchMessages, nil, hub.Registry{})
	if err != nil {
		return l.fail("await", err)
	}
	defer sub.Release()
	// An unlatch after the read above is heard if the channel was subscribed then and
	// has stayed so; otherwise read again once it is.
	again := !sub.QuietSince(mark)
	if again {
		if err := sub.Ready(ctx, c.Lease); err != nil {
			return l.fail("await", err)
		}
	}
	for {
		if again {
			if n, err = count(ctx, c.Redis, l.n.Count); err != nil {
				return l.fail("await", err)
			}
			if n <= 0 {
				// Woken by the channel's timer, this waiter may be the only one to know:
				// the next parked one looks too, and so on down the line.
				sub.Took(c.Lease, true)
				return nil
			}
		}
		again = true
		if err := sub.Wait(ctx, c.Lease); err != nil {
			return l.fail("await", err)
		}
	}
}
