// Package multilock takes several locks as one, all or nothing, as Redisson's
// RedissonMultiLock: the members may be of any kind (rlock, fairlock, spinlock, either side
// of an rwlock) and live in any cluster slot. MultiLocks are made by
// relock.Client.MultiLock from members made by relock.Member, relock.ReadMember and
// relock.WriteMember.
//
// The members are taken one after the other, by one owner, in one order whatever order
// they were given in: by name, and on one name a read-write lock's write side before its
// read side. So two MultiLocks over the same locks, in whatever order, cannot deadlock:
// neither ever holds a lock the other needs while waiting for one the other holds.
//
// The context Lock returns ends when any member's hold ends: each member's hold derives
// from the one taken before it, and the last is the one returned.
package multilock

import (
	"context"

	"github.com/relock-go/relock/internal/engine"
	"github.com/relock-go/relock/internal/lockerr"
	"github.com/relock-go/relock/internal/lockopt"
)

// Option changes how the members are taken: package rlock's options (WithLease,
// WithFencing, WithWaitTimeout), which apply to every member; a member's own options, given
// when it was made, apply under them. WithWaitTimeout given to the call bounds the whole
// call, not each member; a member's own WithWaitTimeout, when the call gives none, bounds
// the wait for that member alone, as it bounds the member's own Lock.
//
// A fixed lease (WithLease, given to the call or to a member) counts from when the last
// member is taken, as Redisson's RedissonMultiLock resets each member's expiry to the lease
// once it holds them all: while Lock waits for a member, the members it took before with a
// fixed lease are extended every third of their lease, so that none runs out, and once it
// holds every member they are extended to their lease from then. So a lease shorter than
// the wait is safe; the extensions are calls of their own, made only for fixed leases.
type Option = lockopt.Shared

// Member is one lock of a MultiLock: make it with relock.Member (a mutex of any kind),
// relock.ReadMember or relock.WriteMember (a side of a read-write lock). The zero Member
// is invalid: a MultiLock with one fails every call with ErrInvalidOption.
type Member = engine.Member

// MultiLock is several locks taken as one. Its methods are safe for concurrent use; who
// holds it is decided by the owner in the context, as for each of its locks. Make one with
// relock.Client.MultiLock: the zero value is a MultiLock of no locks, which fails every
// call with ErrInvalidOption.
//
// (A MultiLock is the engine's under this package's name and documentation: the client
// converts one into the other, so that this package exports no constructor.)
type MultiLock engine.Multi

func (m *MultiLock) m() *engine.Multi { return lockerr.OrZero((*engine.Multi)(m)) }

// Names returns the members' names in the order they are taken.
func (m *MultiLock) Names() []string { return m.m().Names() }

// Lock takes every member, waiting for each in turn, and returns the context of the hold:
// it carries the owner, and ends when any member's hold ends (with that hold's cause,
// ErrLeaseLost when it was lost). When a member cannot be taken before ctx ends (or the
// wait bound runs out, or it fails), the members already taken are released again, last
// first, and Lock returns ctx unchanged and the member's error, which names it: all or
// nothing. A member taken before that is lost while Lock waits (forced, say) ends the
// wait the same way, with that member's ErrLeaseLost. If ctx carries an owner that holds some members already, those are re-entered.
func (m *MultiLock) Lock(ctx context.Context, opts ...Option) (context.Context, error) {
	return engine.MultiLockWith(m.m(), ctx, true, opts)
}

// TryLock makes one attempt at each member in turn. It fails with ErrLocked, naming the
// member, when another owner holds one; the members already taken are released again.
func (m *MultiLock) TryLock(ctx context.Context, opts ...Option) (context.Context, error) {
	return engine.MultiLockWith(m.m(), ctx, false, opts)
}

// Unlock releases one hold of every member by the owner ctx carries, the last taken first,
// and returns the errors of those it could not release, joined: each names its member
// (ErrNotHeld for one the owner did not hold). It works when ctx has ended.
func (m *MultiLock) Unlock(ctx context.Context) error { return m.m().Unlock(ctx) }

// Do takes every member, runs fn with the hold's context, and releases them, also when fn
// panics. It returns fn's error joined with Unlock's.
func (m *MultiLock) Do(ctx context.Context, fn func(ctx context.Context) error, opts ...Option) error {
	return engine.MultiDoWith(m.m(), ctx, fn, opts)
}
