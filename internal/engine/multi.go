package engine

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/relock-go/relock/internal/lockerr"
	"github.com/relock-go/relock/internal/lockopt"
)

// Multi is several locks taken as one, all or nothing, as Redisson's RedissonMultiLock:
// its members may be of any kind and in any cluster slot. They are taken one after the
// other by one owner, each hold's context derived from the one before, so that the last,
// which the caller gets, ends when any member's hold ends.
//
// The members are taken in one order whatever order they were given in: by name, and on
// one name the write side of a read-write lock before its read side (a downgrade, which
// is allowed; the other way is an upgrade, which is not). Two Multis over the same locks
// therefore never wait for each other in a cycle.
type Multi struct {
	members []*Lock
	err     error // a member not made by a constructor, or the first member's invalid name (see invalid)
}

// Member is one lock of a Multi; the zero Member, which no constructor makes, is invalid.
type Member struct{ L *Lock }

// NewMulti returns the Multi of members.
func NewMulti(members []Member) *Multi {
	m := &Multi{}
	for _, mb := range members {
		if mb.L == nil {
			m.err = lockerr.New("lock", "", fmt.Errorf("%w: a multilock member not made by relock.Member, ReadMember or WriteMember", lockerr.ErrInvalidOption))
			return m
		}
		m.members = append(m.members, mb.L)
	}
	slices.SortStableFunc(m.members, func(a, b *Lock) int {
		return cmp.Or(strings.Compare(a.n.Lock, b.n.Lock), cmp.Compare(rank(a.kind), rank(b.kind)))
	})
	for _, l := range m.members {
		if err := l.unusable(); m.err == nil && err != nil {
			m.err = l.fail("lock", err)
		}
	}
	return m
}

// errNoLocks is the error of every call of a Multi with no members: one made of none, or
// the zero value, which no constructor makes.
var errNoLocks = lockerr.New("lock", "", fmt.Errorf("%w: a multilock of no locks", lockerr.ErrInvalidOption))

// invalid returns the error that fails every call of m, or nil: a member's, or for no
// members errNoLocks.
func (m *Multi) invalid() error {
	if m.err == nil && len(m.members) == 0 {
		return errNoLocks
	}
	return m.err
}

// rank orders the kinds of one name: the read side of a read-write lock last.
func rank(k *layout) int {
	if k == Read {
		return 1
	}
	return 0
}

// Names returns the members' names, in the order they are taken.
func (m *Multi) Names() []string {
	names := make([]string, len(m.members))
	for i, l := range m.members {
		names[i] = l.n.Lock
	}
	return names
}

// MultiLockWith takes every member, waiting (wait) or making one attempt each, and returns
// the context of the last hold. When a member cannot be taken, the holds taken so far are
// released again, last first, and the member's error is returned.
func MultiLockWith[O lockopt.Option](m *Multi, ctx context.Context, wait bool, opts []O) (context.Context, error) {
	if err := m.invalid(); err != nil {
		return ctx, err
	}
	op := "lock"
	if !wait {
		op = "trylock"
	}
	// A bound given to the call is the whole call's, not each member's; a member's own,
	// given when it was made, bounds that member's wait alone, as it bounds its Lock.
	var until time.Time
	if d := lockopt.Merge(&lockopt.Settings{}, opts).Wait; d > 0 {
		until = time.Now().Add(d)
	}
	held := ctx
	var fixed []fixedLease // the members taken so far whose lease is fixed
	for i, l := range m.members {
		s := *lockopt.Merge(&l.defaults, opts)
		if !until.IsZero() {
			if s.Wait = time.Until(until); s.Wait <= 0 {
				return ctx, m.rollback(held, i, l.fail(op, context.DeadlineExceeded))
			}
		}
		var stop func()
		if wait && len(fixed) > 0 {
			stop = keepAlive(held, fixed)
		}
		h, err := l.lock(held, op, wait, &s)
		if stop != nil {
			stop()
		}
		if err != nil {
			if i > 0 && ctx.Err() == nil && held.Err() != nil {
				// The wait ended because a member taken before ended (its hold's context is
				// the wait's): say which, and why, rather than the wait's context.Canceled.
				err = m.lost(held, i)
			}
			return ctx, m.rollback(held, i, err)
		}
		held = h
		if s.Lease > 0 && i < len(m.members)-1 {
			fixed = append(fixed, fixedLease{l: l, lease: s.Lease})
		}
	}
	// A fixed lease runs from when the last member was taken, as Redisson's resets every
	// member's expiry to the lease once it holds them all: the members taken before it are
	// extended to their lease from now (an extension never shortens one).
	for _, f := range fixed {
		if err := f.l.Extend(held, f.lease); err != nil {
			return ctx, m.rollback(held, len(m.members), err)
		}
	}
	return held, nil
}

// fixedLease is a member taken with a fixed lease, which the watchdog does not renew.
type fixedLease struct {
	l     *Lock
	lease time.Duration
}

// keepAlive extends the members taken with a fixed lease, by the owner held carries, to
// their lease every third of the shortest, while the call waits for the next member, and
// returns the function that stops it and waits until it has stopped. A member's lease
// counts from when the last member is taken: one that ran out meanwhile would be lost, and
// the call with it. A member that cannot be extended because its hold is gone has ended
// the hold's context, which ends the wait.
func keepAlive(held context.Context, fixed []fixedLease) (stop func()) {
	period := fixed[0].lease
	for _, f := range fixed[1:] {
		period = min(period, f.lease)
	}
	period = max(period/3, time.Millisecond)
	quit, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(period)
		defer t.Stop()
		for {
			select {
			case <-quit:
				return
			case <-held.Done():
				return
			case <-t.C:
			}
			for _, f := range fixed {
				_ = f.l.Extend(held, f.lease) // a failure that matters ends held
			}
		}
	}()
	return func() { close(quit); <-done }
}

// lost returns the error of a call whose wait for member n ended because the hold of a
// member taken before it ended: that member's, named, with the hold's cause.
func (m *Multi) lost(held context.Context, n int) error {
	cause := context.Cause(held)
	for _, l := range m.members[:n] {
		if owner, ok := l.c.Owners.Of(held); ok && !l.c.Watchdog.Holds(l.n.Lock, l.kind.field(owner)) {
			return l.fail("lock", cause)
		}
	}
	return m.members[n].fail("lock", cause)
}

// rollback releases the holds of the first n members, last first, with the context of the
// last of them, and returns err joined with what the releases returned.
func (m *Multi) rollback(held context.Context, n int, err error) error {
	for i := n - 1; i >= 0; i-- {
		err = errors.Join(err, m.members[i].Unlock(held))
	}
	return err
}

// Unlock releases one hold of every member by the owner ctx carries, last taken first, and
// returns their errors joined.
func (m *Multi) Unlock(ctx context.Context) error {
	if err := m.invalid(); err != nil {
		return err
	}
	if ctx == nil {
		// One error, not one per member.
		return m.members[0].fail("unlock", lockerr.ErrNilContext)
	}
	return m.rollback(ctx, len(m.members), nil)
}

// MultiDoWith takes every member, runs fn with the hold's context, and releases them, also
// when fn panics.
func MultiDoWith[O lockopt.Option](m *Multi, ctx context.Context, fn func(context.Context) error, opts []O) (err error) {
	if m.invalid() == nil && fn == nil {
		return m.members[0].fail("do", lockerr.ErrNilFunc)
	}
	held, err := MultiLockWith(m, ctx, true, opts)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, m.Unlock(held)) }()
	return fn(held)
}
