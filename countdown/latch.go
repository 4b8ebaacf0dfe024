// Package countdown is relock's distributed count-down latch, with Redisson's
// RCountDownLatch data: the latch is a string key holding the count, and the count down
// that reaches zero deletes it and publishes "0" on
// redisson_countdownlatch__channel__{name}, which wakes every waiter, of relock and of
// Redisson alike. Latches are made by relock.Client.CountDownLatch.
//
// As in Redisson, a latch can be used again: once it is open (no count), TrySetCount
// closes it with a new count.
package countdown

import (
	"context"

	"github.com/relock-go/relock/internal/countdown"
	"github.com/relock-go/relock/internal/lockerr"
)

// Latch is a distributed count-down latch, made by relock.Client.CountDownLatch. Its
// methods are safe for concurrent use. Errors name the latch and match relock's error
// values with errors.Is: ErrInvalidCount, ErrWrongType when the key holds anything but a
// whole number (it is left untouched), ErrInvalidName (a latch's name has no braces:
// Redisson wraps the whole name in a hash tag to name its channel), ErrClosed.
//
// A Latch with an invalid name is still returned by relock.Client.CountDownLatch, so that
// the constructor needs no error; every method then fails with ErrInvalidName.
type Latch countdown.Latch

func (l *Latch) l() *countdown.Latch { return lockerr.OrZero((*countdown.Latch)(l)) }

// Name returns the latch's name, which is also its Redis key.
func (l *Latch) Name() string { return l.l().Name() }

// TrySetCount sets the count to n (n at least 1) if the latch has no count (it is open),
// and reports whether it did. A key that holds a count of zero or below, which only
// another client writes, is an open latch: the count is set over it.
func (l *Latch) TrySetCount(ctx context.Context, n int64) (bool, error) {
	return l.l().TrySetCount(ctx, n)
}

// CountDown counts the latch down by one; at zero the latch opens and every waiter is
// woken. An open latch stays open. It works when ctx has ended: its call is bounded by the
// client's timeout, within which it is sent again while Redis refuses it unrun (LOADING,
// CLUSTERDOWN, TRYAGAIN). A call whose reply was lost is not sent again, since it may have
// counted down: it returns the connection's error.
func (l *Latch) CountDown(ctx context.Context) error { return l.l().CountDown(ctx) }

// Count returns the count: 0 when the latch is open.
func (l *Latch) Count(ctx context.Context) (int64, error) { return l.l().Count(ctx) }

// Await waits until the latch is open (its count is zero, or it has none) or ctx ends.
// While waiting it sends nothing to Redis: it is woken by the count down that opens the
// latch, and a process looks again once per watchdog timeout in case the latch was deleted
// without a message. When ctx ends first, Await returns an error for which errors.Is(err,
// ctx.Err()) holds.
func (l *Latch) Await(ctx context.Context) error { return l.l().Await(ctx) }
