// Package engine is the one lock mechanism behind every kind of relock lock: acquisition
// with its exactly-once retry, waiting through the hub, holds and the watchdog, unlock
// with its compare-and-decrement, the state queries and ForceUnlock. What differs between kinds (keys,
// scripts and their arguments, wake-up messages, the owner's field, fencing) is a layout
// value, one per kind, each in the file that names it: Plain (rlock), Fair (fairlock),
// and Read and Write (the two sides of rwlock). The lock packages are thin front ends
// whose types are this package's, converted.
package engine

import (
	"context"
	"errors"
	"fmt"
	"math"
	"runtime"
	"strconv"
	"time"

	"github.com/redis/rueidis"

	"github.com/relock-go/relock/internal/core"
	"github.com/relock-go/relock/internal/hub"
	"github.com/relock-go/relock/internal/keys"
	"github.com/relock-go/relock/internal/lockerr"
	"github.com/relock-go/relock/internal/lockopt"
	"github.com/relock-go/relock/internal/retry"
	"github.com/relock-go/relock/internal/script"
	"github.com/relock-go/relock/observe"
)

// Lock is one lock of one kind. Its methods are safe for concurrent use; who holds it is
// decided by the owner in the context, not by the goroutine. A Lock with an invalid name
// fails every call with ErrInvalidName.
type Lock struct {
	c        *core.Client
	kind     *layout
	n        keys.Names
	defaults lockopt.Settings
	err      error // ErrInvalidName with the reason, or nil
}

// New returns the lock of kind named name on c, with defaults for every call.
func New(c *core.Client, kind *layout, name string, defaults *lockopt.Settings) *Lock {
	l := &Lock{c: c, kind: kind, n: keys.Of(name), defaults: *defaults}
	l.err = keys.Check(name)
	return l
}

// RW is a read-write lock: its two sides on one name.
type RW struct{ r, w *Lock }

// NewRW returns the read-write lock named name on c.
func NewRW(c *core.Client, name string, defaults *lockopt.Settings) *RW {
	return &RW{r: New(c, Read, name, defaults), w: New(c, Write, name, defaults)}
}

// Read is the read side; for a nil or zero rw, a lock no client made, whose every call
// fails with ErrNotMade (and which a Multi refuses as a member).
func (rw *RW) Read() *Lock { return lockerr.OrZero(lockerr.OrZero(rw).r) }

// Write is the write side; for a nil or zero rw, as Read.
func (rw *RW) Write() *Lock { return lockerr.OrZero(lockerr.OrZero(rw).w) }

// Name returns the lock's name, which is also its Redis key.
func (l *Lock) Name() string { return l.n.Lock }

// LockWith acquires the lock, waiting until it is free (for a fair lock: until it is this
// owner's turn) or ctx is done, and returns the hold's context. A front end's per-call
// options apply over the lock's own. The front ends document the contract.
func LockWith[O lockopt.Option](l *Lock, ctx context.Context, opts []O) (context.Context, error) {
	return l.lock(ctx, "lock", true, lockopt.Merge(&l.defaults, opts))
}

// TryLockWith makes one attempt and never queues.
func TryLockWith[O lockopt.Option](l *Lock, ctx context.Context, opts []O) (context.Context, error) {
	return l.lock(ctx, "trylock", false, lockopt.Merge(&l.defaults, opts))
}

// DoWith locks, runs fn with the hold's context, and unlocks, also when fn panics.
func DoWith[O lockopt.Option](l *Lock, ctx context.Context, fn func(context.Context) error, opts []O) (err error) {
	if fn == nil {
		return l.fail("do", lockerr.ErrNilFunc)
	}
	held, err := LockWith(l, ctx, opts)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, l.Unlock(held)) }()
	return fn(held)
}

func (l *Lock) lock(ctx context.Context, op string, wait bool, s *lockopt.Settings) (context.Context, error) {
	if err := l.check(ctx, s.Err); err != nil {
		return ctx, l.fail(op, err)
	}
	// The owner ctx carries, or a new one: the hold's context will carry it.
	who, carried, fresh := l.c.Owners.Own(ctx)
	held := ctx
	if l.kind.parent != nil {
		held = l.kind.parent(l, held, who)
	}
	a := attempt{l: l, s: s, who: who, owner: l.kind.field(who), wait: wait, lease: s.Lease, leaseMs: l.c.LeaseMs(), renew: s.Lease == 0,
		ctx: ctx, parent: held, op: op, carried: carried, fresh: fresh}
	if a.renew {
		a.lease = l.c.Lease
	} else {
		a.leaseMs = strconv.FormatInt(s.Lease.Milliseconds(), 10)
	}
	a.fenced = s.Fencing && l.kind.fenced

	// A wait bound applies to the attempts and the wait, never to the hold, which derives
	// from ctx: a lock held past the bound stays held, and its context live.
	wctx := ctx
	if s.Wait > 0 {
		var cancel context.CancelFunc
		wctx, cancel = context.WithTimeout(ctx, s.Wait)
		defer cancel()
	}

	// A caller whose context has ended gets its error, and nothing is sent.
	if err := ctx.Err(); err != nil {
		return ctx, l.fail(op, err)
	}
	// The uncontended path is this one round trip. The mark, a counter read, lets a
	// waiter that joins a quiet subscription skip its second attempt (see waitFor); it
	// must be taken before the attempt, not after it fails: an unlock between the two
	// could be heard, and dropped, while nobody of this client listened.
	mark := l.c.Hub.Mark()
	var start time.Time
	if l.c.Observer != nil {
		start = time.Now()
	}
	// While waiters of this client are in line for a lock whose releases are handed on, a
	// new waiter joins them without trying: the lock is about to go to them (handoff.go).
	// A re-entry never waits.
	var ttl time.Duration
	if !wait || !l.hands() || !l.c.Hub.Lined(l.kind.channel(l, who)) || a.holds() {
		var err error
		if ttl, err = a.try(wctx); err != nil {
			a.forsake()
			return ctx, l.fail(op, err)
		}
		if ttl != 0 && !wait {
			a.forsake()
			return ctx, l.fail(op, lockerr.ErrLocked)
		}
	} else {
		ttl = -1
	}
	if ttl != 0 {
		if err := a.waitFor(wctx, ttl, mark); err != nil {
			a.leave(ctx)
			a.forsake()
			return ctx, l.fail(op, err)
		}
	}
	if l.c.Observer != nil {
		l.c.Observer.Acquired(observe.Acquisition{Lock: l.n.Lock, Kind: observe.Kind(l.kind.name), Owner: who,
			Count: a.count, Wait: time.Since(start), Woken: a.woken})
	}
	return a.held, nil
}

// fence returns the acquire call c with the fencing counter as its last key when the
// attempt takes a token.
func (l *Lock) fence(a *attempt, c call) call {
	if a.fenced {
		c.keys[c.nk] = l.n.Token
		c.nk++
	}
	return c
}

// Unlock releases one hold of the owner ctx carries.
func (l *Lock) Unlock(ctx context.Context) error {
	if err := l.check(ctx, nil); err != nil {
		return l.fail("unlock", err)
	}
	owner, ok := l.c.Owners.Of(ctx)
	if !ok {
		return l.fail("unlock", errNoOwner)
	}
	// ctx names the owner until the watchdog has heard how the release went: were it
	// unreachable before, a collection could take the hold for abandoned (owner.Watch)
	// while its release runs, and nothing else may keep it (a caller that unlocks its last
	// reference to it is the common case).
	defer runtime.KeepAlive(ctx)
	owner = l.kind.field(owner)
	// The owner's turn: its count as this client knows it is the count the release
	// compares with (see release).
	turn := l.c.Watchdog.Begin(l.n.Lock, owner)
	defer turn.End()
	if turn.Foreign(l.kind.hash.renewal) {
		return l.fail("unlock", errOtherKind)
	}
	dctx := l.c.Detached(ctx)
	if err := l.explain(dctx, owner, &turn); err != nil {
		turn.Lost()
		return l.fail("unlock", err)
	}
	var to *hub.Claim // a waiter of this client to hand the lock to (handoff.go)
	if turn.Count == 1 {
		turn.Releasing()
		if l.hands() {
			to = l.c.Hub.Claim(l.kind.channel(l, owner), l.kind)
		}
	}
	var err error
	if to != nil {
		err = l.pass(dctx, owner, turn, to)
	} else {
		var released int64
		released, _, err = l.release(dctx, owner, turn.Count, turn.Deadline, nil)
		turn.Record(released != 0, err)
	}
	if err != nil {
		return l.fail("unlock", err)
	}
	return nil
}

// Extend makes the hold of the owner ctx carries last at least d from now, as
// bsm/redislock's Refresh does for a fixed lease: in Redis, and in the hold's context less
// the allowance for clocks (leases.Until). It
// never shortens the lease (a re-entry may have promised a longer one), and a hold the
// watchdog renews stays renewed. ErrNotHeld when the owner holds nothing (its context
// then ends, if the client knew of the hold), or ErrWrongType when the name holds data
// that is not this kind of lock; ErrInvalidLease for d under a millisecond.
func (l *Lock) Extend(ctx context.Context, d time.Duration) error {
	if err := l.check(ctx, nil); err != nil {
		return l.fail("extend", err)
	}
	lease, ok := lockopt.Lease(d)
	if !ok {
		return l.fail("extend", fmt.Errorf("lease %v: %w", d, lockerr.ErrInvalidLease))
	}
	d = lease
	owner, ok := l.c.Owners.Of(ctx)
	if !ok {
		return l.fail("extend", lockerr.ErrNotHeld)
	}
	defer runtime.KeepAlive(ctx) // as in Unlock: the hold is not abandoned while it extends
	field := l.kind.field(owner)
	turn := l.c.Watchdog.Begin(l.n.Lock, field)
	defer turn.End()
	if turn.Foreign(l.kind.hash.renewal) {
		return l.fail("extend", errOtherKind)
	}
	dctx := l.c.Detached(ctx)
	err := retry.Do(dctx, func() error {
		err := l.c.Watchdog.Extend(dctx, l.n.Lock, field, d)
		if err == nil || errors.Is(err, lockerr.ErrNotHeld) {
			return retry.Final(err)
		}
		return err
	})
	if errors.Is(err, lockerr.ErrNotHeld) {
		// The owner holds nothing. If that is because the name holds data that is not
		// this kind of lock, the answer is ErrWrongType, as every other call's is.
		if _, rerr := l.read(dctx, field); rerr != nil {
			if werr := l.fail("extend", rerr); errors.Is(werr, lockerr.ErrWrongType) {
				return werr
			}
		}
	}
	if err != nil {
		return l.fail("extend", err)
	}
	return nil
}

// ReleaseAll releases every hold of field (an owner, or its write field) that the client
// knows of, one at a time through the unlock path, so that the lock's waiters are woken
// when it frees: the client does it for each of its holds as it closes. The holds'
// contexts end with cause ErrClosed.
func (l *Lock) ReleaseAll(ctx context.Context, field string) error {
	if l.kind.shared {
		// The client first leaves the lock's wake registries, so that the release wakes
		// another client: picked, this one would not act on it any more (its waiters have
		// ended), and while the server has yet to see its presence subscription go, the
		// registry takes it for listening. Best effort, in one round trip: it is left
		// there otherwise.
		rc := l.c.Redis
		rc.DoMulti(ctx,
			rc.B().Zrem().Key(l.n.Wake).Member(l.c.WakeCode).Build(),
			rc.B().Zrem().Key(l.n.Readers).Member(l.c.WakeCode).Build())
	}
	turn := l.c.Watchdog.Begin(l.n.Lock, field)
	defer turn.End()
	if err := l.explain(ctx, field, &turn); err != nil {
		turn.Lost()
		return l.fail("close", err)
	}
	for count := turn.Count; count > 0; count-- {
		if count == 1 {
			turn.Releasing()
		}
		released, _, err := l.release(ctx, field, count, turn.Deadline, nil)
		switch {
		case err != nil:
			turn.Lost()
			if errors.Is(err, lockerr.ErrNotHeld) {
				return nil // its lease ran out, or it was forced: nothing to release
			}
			return l.fail("close", err)
		case released != 0:
			turn.ReleasedAtClose()
			return nil
		}
		turn.Unlocked()
	}
	return nil
}

// errNoOwner is the ErrNotHeld of an Unlock whose context carries no owner of this client:
// the natural mistake of passing the context Lock was called with, rather than the one it
// returned, which would leave the lock held (and renewed) until its hold is abandoned.
var errNoOwner = fmt.Errorf("%w (this context carries no owner of this client: pass the one its Lock returned)", lockerr.ErrNotHeld)

// gone is the unlock scripts' reply when the owner holds nothing though the client
// expected one hold (see expect.lua).
const gone = 3

// unfenced is the hand call's reply when the waiter's fencing counter cannot be
// incremented: nothing was written, and the release is sent as an unlock instead.
const unfenced = 4

// release runs the kind's unlock script for one hold of field, in the owner's turn on the
// lock (Watchdog.Begin), and returns 0 when field still holds the lock, 1 when the lock is
// free, 2 when field's holds are gone but others hold the lock (a read-write lock's other
// readers, or the owner's read holds after its write hold), and ErrNotHeld when field
// holds nothing. expected is field's hold count as the client knows it (0: it knows of no
// hold), and until the hold's local deadline: Redis keeps the hold at least that long.
//
// With to, a claimed waiter of the client, it sends the kind's hand call instead (expected
// is then 1), and returns what the waiter was handed: nil when it certainly was not.
//
// The script decrements only when Redis has the expected count, which is what makes a
// release whose reply was lost safe to send again: if the first send ran, the count is one
// lower (or, for the last hold, the field is gone) and the script answers without
// releasing anything, least of all a hold the owner took since, which cannot happen in
// its turn anyway. The field being gone after a lost reply means either that the first
// send ran or that the hold was lost before it; it ran if it was sent before until. A
// release of no hold the client knows of compares nothing and is not sent again after a
// lost reply: whether it ran stays unknown, and the error says so.
func (l *Lock) release(ctx context.Context, field string, expected int64, until time.Time, to *hub.Claim) (int64, *handoff, error) {
	exp := ""
	if expected > 0 {
		exp = strconv.FormatInt(expected, 10)
	}
	var call call
	if to != nil {
		call = l.kind.hand(l, field, to.Offer().(*attempt))
	} else {
		call = l.kind.release(l, field, exp)
	}
	var released int64
	var h *handoff
	var lost time.Time // when the first send whose reply was lost went out
	handing := to != nil
	err := retry.Do(ctx, func() error {
		sent := time.Now()
		r := call.exec(ctx, l.c.Redis)
		if handing {
			if token, ok := handed(r); ok {
				released, h = 1, &handoff{sent: sent, token: token, sure: true}
				return nil
			}
			if n, err := r.AsInt64(); err == nil && n == unfenced {
				// Nothing was written: release as an unlock does; the waiter, not handed
				// the lock, tries, and meets the counter in its own attempt.
				handing, call = false, l.kind.release(l, field, exp)
				sent = time.Now()
				r = call.exec(ctx, l.c.Redis)
			}
		}
		n, err := r.AsInt64()
		switch {
		case rueidis.IsRedisNil(err):
			return retry.Final(lockerr.ErrNotHeld)
		case err == nil && n == gone:
			if lost.IsZero() || !lost.Before(until) {
				return retry.Final(lockerr.ErrNotHeld)
			}
			// The first send ran: if it was a hand call, the lock was handed then.
			released = 1
			if handing {
				h = &handoff{sent: lost}
			}
			return nil
		case err == nil:
			released = n
			return nil
		case retry.Refused(err):
			return err // not run: safe to send again
		}
		if _, answered := rueidis.IsRedisErr(err); answered {
			return retry.Final(err)
		}
		// The reply was lost: the release may have run.
		if expected == 0 {
			return retry.Final(l.unknown(ctx, field, err))
		}
		if lost.IsZero() {
			lost = sent
		}
		return err
	})
	if err != nil && handing && !lost.IsZero() {
		h = &handoff{sent: lost} // a send whose reply was lost may have handed it
	}
	return released, h, err
}

// unknown answers a release of no hold the client knew of whose reply was lost (err): it
// is not sent again, since without an expected count a second send could release a second
// hold. If the owner holds nothing now the answer is ErrNotHeld, true whether the release
// ran or not (the client had no hold it knew of); otherwise whether it ran stays unknown,
// and the answer is err.
func (l *Lock) unknown(ctx context.Context, field string, err error) error {
	st, rerr := l.readSure(ctx, field)
	if rerr != nil {
		return err
	}
	if st.count == 0 {
		return lockerr.ErrNotHeld
	}
	return err
}

// Token returns the fencing token of the hold that the owner in ctx has, when the lock was
// taken WithFencing, and false once that hold has ended or is past its deadline. It asks
// nothing of Redis.
func (l *Lock) Token(ctx context.Context) (int64, bool) {
	if l.c == nil {
		return 0, false
	}
	owner, ok := l.c.Owners.Of(ctx)
	if !ok || l.err != nil {
		return 0, false
	}
	return l.c.Watchdog.Token(l.n.Lock, l.kind.field(owner))
}

// HoldCount returns how many times the owner ctx carries holds the lock: 0 when it does
// not hold it or ctx carries no owner.
func (l *Lock) HoldCount(ctx context.Context) (int, error) {
	st, err := l.state(ctx, "holdcount")
	return int(st.count), err
}

// IsHeld reports whether the owner ctx carries holds the lock.
func (l *Lock) IsHeld(ctx context.Context) (bool, error) {
	st, err := l.state(ctx, "isheld")
	return st.count > 0, err
}

// IsLocked reports whether any owner holds the lock.
func (l *Lock) IsLocked(ctx context.Context) (bool, error) {
	st, err := l.state(ctx, "islocked")
	return st.exists, err
}

// TTL returns the remaining lease of the hold ctx carries, or ErrNotHeld. A lock without
// expiry, which neither relock nor Redisson makes, reports a negative duration; one that
// lasts longer than a time.Duration counts (about 292 years, which another client may
// have set) reports the longest duration.
func (l *Lock) TTL(ctx context.Context) (time.Duration, error) {
	st, err := l.state(ctx, "ttl")
	if err != nil {
		return 0, err
	}
	if st.count == 0 {
		return 0, l.fail("ttl", lockerr.ErrNotHeld)
	}
	if st.pttl < 0 {
		return -1, nil
	}
	if st.pttl > int64(math.MaxInt64/time.Millisecond) {
		return math.MaxInt64, nil
	}
	return time.Duration(st.pttl) * time.Millisecond, nil
}

// ForceUnlock deletes the lock whoever holds it and wakes its waiters. It reports whether
// there was a lock to delete.
func (l *Lock) ForceUnlock(ctx context.Context) (bool, error) {
	if err := l.check(ctx, nil); err != nil {
		return false, l.fail("forceunlock", err)
	}
	call := l.kind.force(l)
	n, err := call.exec(ctx, l.c.Redis).AsInt64()
	if err != nil {
		return false, l.fail("forceunlock", err)
	}
	return n == 1, nil
}

type state struct {
	exists bool
	count  int64
	pttl   int64
}

func (l *Lock) state(ctx context.Context, op string) (state, error) {
	if err := l.check(ctx, nil); err != nil {
		return state{}, l.fail(op, err)
	}
	field := ""
	if owner, ok := l.c.Owners.Of(ctx); ok {
		field = l.kind.field(owner)
	}
	// As Unlock, a query uses ctx only to find the owner: asked with the context of a hold
	// that has ended, it must answer "not held", not the context's error.
	dctx := l.c.Detached(ctx)
	st, err := l.read(dctx, field)
	if err != nil {
		return state{}, l.fail(op, err)
	}
	return st, nil
}

// readSure is read, asked again until it gets an answer or ctx ends: a read is safe to
// repeat. It is how a call finds out what a request whose reply was lost did.
func (l *Lock) readSure(ctx context.Context, field string) (st state, err error) {
	err = retry.Do(ctx, func() error {
		st, err = l.read(ctx, field)
		return err
	})
	return st, err
}

// read runs the state script for field once.
func (l *Lock) read(ctx context.Context, field string) (state, error) {
	v, err := script.RLockState().Exec(ctx, l.c.Redis, []string{l.n.Lock}, []string{field, l.kind.hash.shape}).AsIntSlice()
	if err == nil && len(v) != 3 {
		err = errors.New("unexpected reply from the state script")
	}
	if err != nil {
		return state{}, err
	}
	return state{exists: v[0] == 1, count: v[1], pttl: v[2]}, nil
}

// errOtherKind is the error of a call whose owner holds the lock's name as a lock of
// another kind (see leases.Turn.Foreign): that hold is left as it is.
var errOtherKind = fmt.Errorf("%w: this owner holds the name as another kind of lock", lockerr.ErrWrongType)

// check returns the error that stops any call with ctx before it reaches Redis.
func (l *Lock) check(ctx context.Context, optErr error) error {
	if ctx == nil {
		return lockerr.ErrNilContext
	}
	if err := l.unusable(); err != nil {
		return err
	}
	switch {
	case optErr != nil:
		return optErr
	case l.c.Closed():
		return lockerr.ErrClosed
	}
	return nil
}

// unusable returns the error that fails every call of the lock whatever it is given: its
// name's (ErrInvalidName), or ErrNotMade for a lock no client made (a zero value).
func (l *Lock) unusable() error {
	if l.c == nil && l.err == nil {
		return lockerr.ErrNotMade
	}
	return l.err
}

// fail wraps err with the operation and the lock's name, and turns Redis's WRONGTYPE
// into ErrWrongType.
func (l *Lock) fail(op string, err error) error {
	return lockerr.Redis(op, l.n.Lock, err)
}
