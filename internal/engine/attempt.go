package engine

import (
	"context"
	"errors"
	"strconv"
	"time"

	"github.com/relock-go/relock/internal/core"
	"github.com/relock-go/relock/internal/hub"
	"github.com/relock-go/relock/internal/leases"
	"github.com/relock-go/relock/internal/lockerr"
	"github.com/relock-go/relock/internal/lockopt"
	"github.com/relock-go/relock/internal/owner"
	"github.com/relock-go/relock/internal/retry"
	"github.com/relock-go/relock/internal/script"
	"github.com/relock-go/relock/observe"
)

// attempt is one Lock call's acquisition: who asks, for how long, and what it got.
type attempt struct {
	l       *Lock
	s       *lockopt.Settings
	who     string // the owner
	owner   string // the hash field that counts its holds: the owner, or its write field
	stay    string // a woken waiter's "1" (others of this client wait: stay registered) or "0"; "" for a first attempt
	lease   time.Duration
	leaseMs string
	wait    bool // Lock rather than TryLock: the call may queue
	queued  bool // the waiter keeps an entry that it refreshes and leaves (fair; preferred writer)
	// siblings is set when the waiter gave up while waiters of its owner in other
	// goroutines still waited: its owner's queue entry is theirs (see leave).
	siblings bool
	fenced   bool // a first-level acquisition takes a fencing token
	renew    bool

	// What the acquisition got: the hold count after it, the acquire reply's third value
	// (see layout.keepsWrite), and when the request that got it was sent. The hold's
	// leases.Grant is made from them when the hold is kept; the attempt outlives the call
	// as part of the hold's context, and so carries no more than it needs.
	count, third int64
	sent         time.Time

	ctx    context.Context // the caller's: a hold taken after it ended is released again
	parent context.Context // what the hold's context derives from
	op     string
	held   context.Context // the hold's context, once acquired
	// carried is the owners' list of ctx when it carried the owner; otherwise fresh is the
	// new owner's binding, which the hold's context will carry (see owner.Own).
	carried *owner.Binding
	fresh   owner.Binding
	hold    leases.Context // the context of a first-level hold: the attempt's, one allocation less
	woken   observe.Woken  // what ended the last wait

	detached core.Detached // the first try's calls' context: see try
	tries    int

	// lost is the request of a try that gave up without learning whether it ran: its
	// reply was lost, and Redis could not be asked until the try's time was up. A waiter
	// that tries again asks first (see try), lest it count a hold twice. nil: none (a
	// pointer, as it is rare: the attempt is allocated at every Lock).
	lost *lostRequest
	// late counts the requests made for this acquisition that Redis had not run when the
	// client asked about them (a send whose reply was lost, a hand call to this waiter
	// whose reply was lost): each may still run, after a later request (see shed).
	late int64
}

// lostRequest is a request whose outcome is unknown: when it was sent, the owner's hold
// count it had to beat, and why its reply never came.
type lostRequest struct {
	err   error
	sent  time.Time
	known int64
}

// code is the client's wake code when the attempt may wait, and "" for TryLock, which never
// waits and so is never to be woken (see lua/wake.lua).
func (a *attempt) code() string {
	if a.wait {
		return a.l.c.WakeCode
	}
	return ""
}

// entryMs is how long the queue entry of a fair waiter or a preferred writer lives without
// a refresh: two refresh periods, so that one missed refresh is not taken for death.
func (a *attempt) entryMs() string {
	return strconv.FormatInt(2*a.s.RefreshPeriod().Milliseconds(), 10)
}

// try makes one acquisition attempt. It returns 0 when the owner now holds the lock (the
// hold's context is then a.held), and otherwise the holder's remaining lease, which bounds
// the next wait.
//
// The attempt runs in the owner's turn on this lock (Watchdog.Begin): no unlock or other
// re-entry of the owner's in this client runs between its send and the client recording
// what it got, so the count the client knows is the count in Redis.
//
// A request whose reply is lost (a dropped connection) may or may not have run. Sending
// it again blindly could count a hold twice, which the owner would never release. So
// after such a failure try asks Redis for the owner's hold count: if it grew beyond what
// this client knew, the request ran and the acquisition stands; if not, it is sent again.
func (a *attempt) try(ctx context.Context) (time.Duration, error) {
	l := a.l
	// An owner made for this call holds nothing, and nothing else knows it: its turn is
	// the empty one, without asking the table.
	var turn leases.Turn
	if a.carried != nil {
		turn = l.c.Watchdog.Begin(l.n.Lock, a.owner)
	}
	defer turn.End()
	// The attempt is one allocation already: its first try's context is part of it. A
	// later try (a waiter's) gets one of its own, since the client may still hold on to
	// an earlier try's context.
	var dctx context.Context
	if a.tries++; a.tries == 1 {
		dctx = l.c.DetachInto(&a.detached, ctx)
	} else {
		dctx = l.c.Detached(ctx)
	}
	known := turn.Count
	// The call is made for each try: a woken waiter's says whether its client stays
	// registered (a.stay), and it is no part of the attempt, which lives on with the hold.
	call := l.kind.acquire(l, a)
	var ttl time.Duration
	var sent time.Time
	var failed error // the last send's failure: did that request run?
	if a.lost != nil {
		// An earlier try's request may have run: ask before sending again.
		failed, sent, known = a.lost.err, a.lost.sent, a.lost.known
		a.lost = nil
	}
	err := retry.Do(dctx, func() error {
		if failed != nil {
			ran, count, err := a.ran(dctx, known, sent)
			if err != nil {
				return retry.Final(failed) // still unknown: report the failure, never send blindly
			}
			if ran {
				ttl = 0
				return nil
			}
			known = count
			a.late++
		}
		sent = time.Now()
		var v []int64
		var err error
		if l.c.SyncReplicas > 0 {
			v, err = a.execSynced(dctx, &call, sent)
		} else {
			var buf [3]int64 // the longest reply: read it without allocating
			v, err = script.AcquireReply(buf[:0], call.exec(dctx, l.c.Redis))
		}
		if err != nil {
			if retry.Refused(err) {
				// Refused unrun: nothing is in flight to ask about or to finish. It is sent
				// again while the caller waits, and no longer.
				failed = nil
				if stop := retry.Abandon(ctx, err); stop != nil {
					return retry.Final(stop)
				}
				return err
			}
			failed = err
			return err
		}
		ttl, err = a.reply(v, sent)
		return retry.Final(err)
	})
	if err != nil && failed != nil && retry.Lost(failed) {
		a.lost = &lostRequest{err: failed, sent: sent, known: known}
	}
	if err != nil || ttl > 0 {
		return ttl, err
	}
	if err := a.shed(dctx, known+1, a.late+turn.Late); err != nil {
		return 0, err
	}
	return 0, a.keep()
}

// shed gives back the holds that Redis counts for the owner beyond the want this
// acquisition took (the count the client knew before it, plus one), as many as requests
// may have run late (late: this attempt's, and its hold's: see leases.Grant.Late), and
// reads the token of a first-level hold. Redis counts more when such a request ran after
// the client had asked about it: a hand call to this waiter (handoff.go), or an earlier
// send of an acquisition. rueidis closes a connection at a call's deadline, and what the
// client sends next goes out on a new one, which can reach Redis first. The acquisition
// then re-entered a hold it did not know of: kept, the surplus would outlast the owner's
// unlocks (the lock held, and renewed, for as long as the process lives), and a
// re-entry's reply carries no token. The unlock script, which compares the count,
// releases the surplus; the token is the counter's, as in ran. A surplus that no late
// request explains is the owner's own (a hold the client stopped renewing that Redis
// still has): it stays. The late requests whose surplus has not been seen stay with the
// hold (a.late), since they may run yet: its unlocks give back what they add (explain).
func (a *attempt) shed(ctx context.Context, want, late int64) error {
	a.late = late
	if a.count <= want || late == 0 {
		return nil
	}
	left, err := a.l.giveBack(ctx, a.owner, a.count, want, late, leases.Until(a.sent, a.lease))
	a.late -= a.count - left
	a.count = left
	if err != nil {
		return err
	}
	if a.fenced && a.count == 1 {
		token, err := a.l.counter(ctx)
		if err != nil {
			return err
		}
		a.third = token
	}
	return nil
}

// explain gives back, before a release in turn, the holds that the hold's late requests
// (turn.Late) took since the client last looked: Redis counts them beyond turn.Count, and
// the release compares the count. Holds without late requests, nearly all, cost nothing.
func (l *Lock) explain(ctx context.Context, field string, turn *leases.Turn) error {
	if turn.Late == 0 {
		return nil
	}
	st, err := l.readSure(ctx, field)
	if err != nil {
		return err
	}
	if st.count <= turn.Count {
		return nil
	}
	left, err := l.giveBack(ctx, field, st.count, turn.Count, turn.Late, turn.Deadline)
	turn.Explained(st.count - left)
	return err
}

// giveBack releases, one at a time with the unlock script that compares the count, the
// holds that Redis counts for field (count) beyond want, up to late of them: the surplus
// that late requests explain. It returns the count left in Redis.
func (l *Lock) giveBack(ctx context.Context, field string, count, want, late int64, until time.Time) (int64, error) {
	want = max(want, count-late)
	for count > want {
		left, _, err := l.release(ctx, field, count, until, nil)
		if err == nil && left != 0 {
			err = lockerr.ErrNotHeld // the owner's holds are gone: not what Redis counted
		}
		if err != nil {
			return count, err
		}
		count--
	}
	return count, nil
}

// counter reads the lock's fencing counter: the token of a first-level hold whose grant
// carried none (its reply was lost, or it re-entered a hold it did not know of), since
// nobody else can have taken the lock since.
func (l *Lock) counter(ctx context.Context) (int64, error) {
	return l.c.Redis.Do(ctx, l.c.Redis.B().Get().Key(l.n.Token).Build()).AsInt64()
}

// execSynced runs the acquire script and WAIT in one round trip, on one connection of the
// node that runs the script (script.Synced: in a cluster, also after a slot move
// redirected it). If the owner got the lock and no replica has it by the timeout, the
// acquisition is rolled back and the attempt fails with ErrNotSynced.
func (a *attempt) execSynced(ctx context.Context, call *call, sent time.Time) ([]int64, error) {
	l := a.l
	// Synced hands the call's keys and arguments to the connection's callback, which the
	// compiler cannot follow: given the caller's call, it would move every acquisition's
	// call to the heap, synced or not. A copy of its own moves only this path's.
	own := *call
	res, waited := script.Synced(ctx, l.c.Redis, own.batched(), int64(l.c.SyncReplicas), l.c.SyncTimeout.Milliseconds())
	v, err := script.AcquireReply(nil, res)
	if err != nil || len(v) != 3 || v[0] != 1 {
		return v, err // not acquired: nothing to sync
	}
	if replicas, err := waited.AsInt64(); err == nil && replicas > 0 {
		return v, nil
	}
	// Nobody has the grant but the master: a failover now would lose it. Undo it.
	if _, _, err := l.release(ctx, a.owner, v[1], leases.Until(sent, a.lease), nil); err != nil {
		return nil, errors.Join(lockerr.ErrNotSynced, err)
	}
	return nil, lockerr.ErrNotSynced
}

// reply reads the acquire script's reply.
func (a *attempt) reply(v []int64, sent time.Time) (time.Duration, error) {
	switch {
	case len(v) == 1 && v[0] == 2:
		return 0, lockerr.ErrUpgrade
	case len(v) == 3 && v[0] == 1:
		a.granted(v[1], v[2], sent)
		return 0, nil
	case len(v) == 2 && v[0] == 0:
		return a.l.waitBound(v[1]), nil
	}
	return 0, errors.New("unexpected reply from the acquire script")
}

// ran finds out whether an acquisition whose reply was lost took effect: the owner's hold
// count in Redis is above known, the count before the attempt. If so it records the grant,
// with the fencing token of a first-level hold: the counter's value, since nobody else can
// have taken the lock since. It asks until it gets an answer or ctx ends (readSure), and
// returns the count it found, which is what the next attempt must beat.
func (a *attempt) ran(ctx context.Context, known int64, sent time.Time) (bool, int64, error) {
	l := a.l
	st, err := l.readSure(ctx, a.owner)
	if err != nil {
		return false, known, err
	}
	if st.count <= known {
		return false, st.count, nil
	}
	var token int64
	if a.fenced && st.count == 1 {
		if token, err = l.counter(ctx); err != nil {
			return false, known, err
		}
	}
	a.granted(st.count, token, sent)
	return true, st.count, nil
}

// granted records what the acquisition got; third is the acquire reply's third value.
func (a *attempt) granted(count, third int64, sent time.Time) {
	a.count, a.third, a.sent = count, third, sent
}

// grant is what the watchdog keeps of the acquisition.
func (a *attempt) grant() leases.Grant {
	l := a.l
	g := leases.Grant{Name: l.n.Lock, Owner: a.owner, Count: a.count, Fenced: a.fenced,
		Sent: a.sent, Lease: a.lease, Renew: a.renew, Who: a.who, Kind: l.kind.name, Carried: a.carried, Fresh: a.fresh, Lock: l,
		Renewal: l.kind.hash.renewal, Late: a.late}
	if l.kind.hash.tagged {
		g.Extra = l.n.Tag
	}
	if l.kind.keepsWrite {
		g.KeepsWrite = a.third == 1
	} else {
		g.Token = a.third
	}
	return g
}

// keep registers an acquisition with the watchdog and sets the hold's context; unless the
// caller's context ended while the attempt was in flight (it was finished rather than
// abandoned, so that no hold is left behind unknown), or the client is closing: then the
// hold it took is released again, and keep returns the context's error or ErrClosed.
func (a *attempt) keep() error {
	err := a.ctx.Err()
	if err == nil {
		var ok bool
		if a.held, ok = a.l.c.Watchdog.Acquired(&a.hold, a.parent, a.grant()); ok {
			if a.carried != nil && !a.l.kind.spins && !a.l.c.Hub.Idle() {
				// Waiters of the owner in other goroutines may re-enter now (hub.Joined).
				a.l.c.Hub.Joined(a.l.kind.channel(a.l, a.owner), a.who)
			}
			return nil
		}
		err = lockerr.ErrClosed
	}
	dctx := a.l.c.Detached(a.ctx)
	_, _, _ = a.l.release(dctx, a.owner, a.count, leases.Until(a.sent, a.lease), nil)
	return err
}

// tryWaiting is a waiter's attempt: ttl 0 when it got the lock, or else how long to wait
// before the next one: the holder's remaining lease, or retry.OutagePause after an attempt
// that got no answer. Redis out of reach ends no wait the caller still wants while the
// outage is shorter than a lease (see retry.Outage): the waiter keeps its place, and its
// next attempt asks whether this one ran (see try). Any other failure is err.
func (a *attempt) tryWaiting(ctx context.Context, outage *retry.Outage) (time.Duration, error) {
	ttl, err := a.try(ctx)
	switch {
	case err == nil:
		if ttl != 0 {
			outage.End()
		}
		return ttl, nil
	case outage.Ride(ctx, err, a.l.c.Lease):
		return retry.OutagePause, nil
	}
	return 0, err
}

// waitFor subscribes to the channel that announces this waiter's chance and retries on
// every wake-up until the lock is acquired (or handed to it: handoff.go) or ctx ends. A
// ttl below 0 says that no attempt was made: the waiter joins the client's waiters in
// line (see Lock.lock). mark is the hub's mark taken
// before the attempt that returned ttl: when the channel was already subscribed then and
// has heard nothing since, every unlock after that attempt will be heard, and the waiter
// waits at once; otherwise it waits for the subscription and tries once more, since an
// unlock may have happened while nobody listened (see package pubsub).
//
// A queued waiter comes back at least every refresh period, which refreshes its queue
// entry, so that it is never taken for dead: it keeps a timer of its own. The others of a
// shared channel share the hub's timer for it, which wakes one of them when the holder's
// lease as they saw it runs out.
func (a *attempt) waitFor(ctx context.Context, ttl time.Duration, mark hub.Mark) error {
	l := a.l
	if l.kind.spins {
		return a.spinFor(ctx, ttl)
	}
	bound := func(ttl time.Duration) time.Duration {
		if a.queued {
			return min(ttl, a.s.RefreshPeriod())
		}
		return ttl
	}
	// Waiters of one kind are interchangeable: one's attempt tells the others' outcome.
	var reg hub.Registry
	listening := true // the client was listening on its presence channel since mark
	if l.kind.shared {
		// Its waiters register their client (lua/wake.lua), which an unlock picks only
		// while the client listens on its presence channel.
		reg = hub.Registry{Wake: l.n.Wake, Readers: l.n.Readers}
		here, err := l.c.Hub.Subscribe(l.n.Presence(l.c.WakeCode), hub.LockMessages, nil, hub.Registry{})
		if err != nil {
			return err
		}
		defer here.Release()
		listening = here.QuietSince(mark)
	}
	sub, err := l.c.Hub.Subscribe(l.kind.channel(l, a.owner), hub.LockMessages, l.kind, reg)
	if err != nil {
		return err
	}
	// Release passes on a wake-up this waiter got and did not act on: it leaves with an
	// error, or its context ended after it was woken. A waiter whose owner still waits in
	// another goroutine leaves the owner's queue entry to it (see leave).
	defer func() { a.siblings = sub.Leave() }()
	if a.carried != nil {
		// Other goroutines may share the owner: when one of them gets the lock, this
		// waiter re-enters its hold rather than sleep until it ends (see keep).
		sub.Own(a.who)
	}
	again := !listening || !sub.QuietSince(mark)
	if ttl < 0 {
		// In line behind this client's waiters, without an attempt: the first wait is
		// bounded by a lease, the others' timer and their handoffs wake it sooner.
		again, ttl = false, l.c.Lease
	}
	if l.hands() {
		sub.Offer(a)
	}
	if again {
		if err := sub.Ready(ctx, bound(ttl)); err != nil {
			return err
		}
	}
	var outage retry.Outage
	for {
		if again {
			// If this attempt gets the lock, the client stays registered to be woken
			// while others of its waiters remain, and leaves the registry otherwise.
			a.stay = flag(sub.Others())
			if ttl, err = a.tryWaiting(ctx, &outage); err != nil {
				return err
			}
			if ttl == 0 {
				if l.kind.shared {
					sub.Took(a.lease, l.kind.shares)
				}
				return nil
			}
		}
		again = true
		if a.queued {
			err = sub.WaitOwn(ctx, bound(ttl))
		} else {
			err = sub.Wait(ctx, ttl)
		}
		if p, ok := sub.Handed().(*passed); ok {
			// The releaser passed its hand call to this waiter: send it. A release that
			// handed nothing (it failed) leaves the waiter woken to try.
			if h := p.run(); h == nil {
				sub.Owe()
			} else {
				got, terr := a.take(h)
				if got {
					a.woken = observe.ByHandoff
				}
				if got || terr != nil {
					return terr
				}
			}
			// Not handed after all (the release failed, or a lost reply and the release
			// found its hold gone): try, unless the wait was to end anyway.
			if err == nil {
				err = ctx.Err()
			}
		}
		if err != nil {
			return err
		}
		a.woken = observe.ByMessage
		if sub.Timed() {
			a.woken = observe.ByLease
		}
	}
}

// forsake ends an attempt that took no hold: its requests that may still run (the late
// ones, and a send whose reply was lost) are left with the client, whose next turn of the
// owner on the lock gives back the holds they take (leases.Watchdog.LateLeft). Without
// that, the owner's next Lock would count such a hold as its own, its Unlock would leave
// it, and the watchdog would renew it for as long as the owner lived. An owner made for
// the call has no next turn: such a hold runs out with its lease.
func (a *attempt) forsake() {
	n := a.late
	if a.lost != nil {
		n++
	}
	if n > 0 && a.carried != nil {
		a.l.c.Watchdog.LateLeft(a.l.n.Lock, a.owner, n, a.lease)
	}
}

// leave takes a queued waiter that gives up out of the queue at once: a fair waiter passes
// its turn on if it had come, a preferred writer stops holding readers back. Best effort:
// an entry left behind is skipped once it runs out. The entry is the owner's: while other
// goroutines of the owner still wait (siblings), it stays theirs.
func (a *attempt) leave(ctx context.Context) {
	if !a.queued || a.l.kind.leave == nil || a.siblings {
		return
	}
	dctx := a.l.c.Detached(ctx)
	_ = a.l.kind.leave(dctx, a.l, a)
}

// waitBound turns a holder's PTTL into how long a waiter may sleep before trying again. A
// lock without expiry (not one relock or Redisson made) is looked at again every lease.
//
// A lock that is gone (-2) ran out between the script's look and its PTTL, which a server
// whose clock moves during a script (miniredis) lets happen: try again at once. (A waiter
// that gives way to another while the lock is free is told how long instead.)
//
// A PTTL longer than a hundred years (lockopt.Forever; another client may set any lease)
// is slept as a hundred years: counted in nanoseconds it could overflow to a negative
// bound, or to none, which the attempt would take for a grant.
func (l *Lock) waitBound(pttl int64) time.Duration {
	switch {
	case pttl == -2:
		return time.Millisecond
	case pttl < 0:
		return l.c.Lease
	}
	return time.Duration(min(max(pttl, 1), lockopt.Forever.Milliseconds())) * time.Millisecond
}
