// Package permits is the mechanism behind relock's semaphore (package semaphore, which
// documents the contract): Redisson's RSemaphore data, a string of available permits whose
// releases publish the new count on redisson_sc:{<name>}, and relock's order of waiters
// beside it.
//
// The order has two levels. In a process, once one of a client's waiters for a semaphore
// waits, its later waiters queue in memory behind it, first come first served, and only
// the first of them waits in Redis (an Acquire that finds none queued tries at once). In
// Redis, the waiting clients queue in arrival order (lua/semaphore_acquire.lua), and none
// of relock's clients takes permits while a live client waits ahead of it. So a large
// request is served before smaller ones that queued after it. A client leaves the queue
// when its waiter there is served, and its next waiter queues anew, at the end: the order
// across clients is the clients' in Redis, not their waiters' in time (package semaphore,
// Order). Only the client first in line
// listens for releases; the others are told on their own channels when they come first, so
// a release wakes one relock client. A waiting client's entry lives one lease (the
// client's watchdog timeout) and is refreshed every third of one, so a client that died is
// skipped within a lease.
package permits

import (
	"context"
	"fmt"
	"math"
	"strconv"
	"sync"
	"time"

	"github.com/redis/rueidis"

	"github.com/relock-go/relock/internal/core"
	"github.com/relock-go/relock/internal/hub"
	"github.com/relock-go/relock/internal/keys"
	"github.com/relock-go/relock/internal/lockerr"
	"github.com/relock-go/relock/internal/retry"
	"github.com/relock-go/relock/internal/script"
)

// Gates is a client's in-memory state of the semaphores it uses: for each name, its
// waiters in arrival order and the permits it holds. A name's entry lives while it has
// either.
type Gates struct {
	mu    sync.Mutex
	names map[string]*gate
}

// NewGates returns the gates of one client.
func NewGates() *Gates { return &Gates{names: make(map[string]*gate)} }

// gate is one semaphore's state in a client. Guarded by Gates.mu.
type gate struct {
	refs  int     // calls using it
	held  int64   // permits taken through this client and not released
	queue []*turn // waiters in arrival order; the first one waits in Redis
}

// turn is a waiter's place in its gate's queue; up is closed when it comes first.
type turn struct{ up chan struct{} }

func (gs *Gates) get(name string) *gate {
	gs.mu.Lock()
	defer gs.mu.Unlock()
	g := gs.names[name]
	if g == nil {
		g = &gate{}
		gs.names[name] = g
	}
	g.refs++
	return g
}

// hold counts n more permits of g as held by the client.
func (gs *Gates) hold(g *gate, n int64) {
	gs.mu.Lock()
	g.held += n
	gs.mu.Unlock()
}

func (gs *Gates) put(name string, g *gate) {
	gs.mu.Lock()
	defer gs.mu.Unlock()
	if g.refs--; g.refs == 0 && g.held == 0 && len(g.queue) == 0 {
		delete(gs.names, name)
	}
}

// Semaphore is one semaphore of one client. Its methods are safe for concurrent use.
type Semaphore struct {
	c     *core.Client
	gates *Gates
	n     keys.Semaphore
	err   error // ErrInvalidName with the reason, or nil
}

// New returns the semaphore named name on c, whose in-memory state lives in gates.
func New(c *core.Client, gates *Gates, name string) *Semaphore {
	return &Semaphore{c: c, gates: gates, n: keys.SemaphoreOf(name), err: keys.Check(name)}
}

// Name returns the semaphore's name, which is also its Redis key.
func (s *Semaphore) Name() string { return s.n.Permits }

func (s *Semaphore) fail(op string, err error) error { return lockerr.Redis(op, s.n.Permits, err) }

// most is the largest count, and the most permits a call may ask for: a semaphore's scripts
// add and compare counts as Lua numbers, which are doubles, exact up to 2^53-1. The scripts
// refuse a count beyond it either way, stored or summed (within in lua/count.lua); the
// number a call asks for is refused here alone: a script would read 2^53+1 as 2^53.
const most = 1<<53 - 1

// check returns the error of a call with ctx asking for n permits, or nil: valid's, or
// ctx's own once it has ended.
func (s *Semaphore) check(ctx context.Context, n int64, least int64) error {
	if err := s.valid(ctx, taking(n, least)); err != nil {
		return err
	}
	return ctx.Err()
}

// valid returns the error of a call with ctx whose count has the error bad (nil: a count
// in range, or none), whether or not ctx has ended, or nil.
func (s *Semaphore) valid(ctx context.Context, bad error) error {
	switch {
	case ctx == nil:
		return lockerr.ErrNilContext
	case s.err != nil:
		return s.err
	case s.c == nil:
		return lockerr.ErrNotMade
	case bad != nil:
		return bad
	case s.c.Closed():
		return lockerr.ErrClosed
	}
	return nil
}

// taking returns the error of a call asking for n permits, at least least, or nil.
func taking(n, least int64) error {
	if n < least || n > most {
		return fmt.Errorf("%w: %d permits; from %d to 2^53-1", lockerr.ErrInvalidCount, n, least)
	}
	return nil
}

// Acquire takes n permits, waiting until they are available and it is this client's turn,
// or until ctx ends. The package semaphore documents the contract.
func (s *Semaphore) Acquire(ctx context.Context, n int64) error {
	if err := s.check(ctx, n, 1); err != nil {
		return s.fail("acquire", err)
	}
	if _, err := s.take(ctx, n, ""); err != nil {
		return s.fail("acquire", err)
	}
	return nil
}

// take takes n permits, in the order of the client's waiters and of the clients, waiting
// for them until ctx ends, and returns the attempt that took them. ids: the permits are
// leased under these ids (hex, one per permit); "": plain permits, which the client counts
// as held.
func (s *Semaphore) take(ctx context.Context, n int64, ids string) (attempted, error) {
	g := s.gates.get(s.n.Permits)
	defer s.gates.put(s.n.Permits, g)
	plain := ids == ""

	// With none of this client's waiters queued, try at once, beside any other attempt of
	// the client's in flight: goroutines of one process that find permits free take them
	// in parallel. An attempt that fails has queued the client in Redis (its entry is the
	// client's, shared by its waiters), and its caller queues here.
	var tried *attempted
	s.gates.mu.Lock()
	idle := len(g.queue) == 0
	s.gates.mu.Unlock()
	if idle {
		a, err := s.attempt(ctx, s.acquire(n, true, ids), ids)
		if err != nil {
			s.leave(ctx)
			return attempted{}, err
		}
		if a.ok {
			if plain {
				s.gates.hold(g, n)
			}
			return a, nil
		}
		tried = &a
	}

	me := &turn{up: make(chan struct{})}
	s.gates.mu.Lock()
	g.queue = append(g.queue, me)
	first := len(g.queue) == 1
	s.gates.mu.Unlock()
	if !first {
		tried = nil // the attempt it made is stale by its turn
		select {
		case <-me.up:
		case <-ctx.Done():
			if !s.leaveQueue(g, me) {
				// It came first as ctx ended: it must pass its turn on.
				s.next(g, me)
			}
			return attempted{}, ctx.Err()
		}
	}
	a, err := s.wait(ctx, n, ids, tried)
	if err == nil && plain {
		s.gates.hold(g, n)
	}
	s.next(g, me)
	return a, err
}

// leaveQueue takes a waiter that was not first out of g's queue; false if it came first
// meanwhile.
func (s *Semaphore) leaveQueue(g *gate, me *turn) bool {
	s.gates.mu.Lock()
	defer s.gates.mu.Unlock()
	for i, t := range g.queue {
		if t == me {
			if i == 0 {
				return false
			}
			g.queue = append(g.queue[:i], g.queue[i+1:]...)
			return true
		}
	}
	return true
}

// next takes the first waiter me out of g's queue and lets the one behind it wait in Redis.
func (s *Semaphore) next(g *gate, me *turn) {
	s.gates.mu.Lock()
	defer s.gates.mu.Unlock()
	if len(g.queue) > 0 && g.queue[0] == me {
		g.queue[0] = nil
		g.queue = g.queue[1:]
		if len(g.queue) > 0 {
			close(g.queue[0].up)
		}
	}
}

// attempted is what an attempt found: whether it took the permits, when it was sent and
// the hub's mark just before (a channel quiet since then missed no release); when it took
// leased permits from a semaphore whose count has an expiry, how long they have until it
// takes them away (below zero: no expiry); when it did not take them, whether the client is
// first in line, and how long until the next leased permit runs out (below zero: none is
// leased).
type attempted struct {
	ok      bool
	sent    time.Time
	mark    hub.Mark
	expires time.Duration
	first   bool
	next    time.Duration
}

// wait is the first waiter's part: it tries, and while the permits cannot be taken it
// keeps the client's entry in Redis's queue and waits, coming back every refresh period to
// refresh the entry. First in line, it waits for a release's count on the semaphore's
// channel (relock's and Redisson's releases publish it), or until the next leased permit
// runs out, which its next attempt puts back; behind others, on the client's own channel,
// where it is told when it comes first (lua/semaphore_acquire.lua), so that a release wakes
// one relock client, not every one that waits. A waiter that gives up leaves the queue.
// tried is an attempt that just failed, which then need not be made again; nil: wait makes
// its own first. It returns the attempt that took the permits.
func (s *Semaphore) wait(ctx context.Context, n int64, ids string, tried *attempted) (attempted, error) {
	c := s.c
	refresh := c.Lease / 3
	call := s.acquire(n, true, ids)
	if tried == nil {
		a, err := s.attempt(ctx, call, ids)
		if err != nil || a.ok {
			return a, err
		}
		tried = &a
	}
	var sub *hub.Sub
	listening := false // sub is the semaphore's channel rather than the client's own
	defer func() {
		if sub != nil {
			sub.Release()
		}
	}()
	fail := func(err error) (attempted, error) {
		s.leave(ctx)
		return attempted{}, err
	}
	for {
		// again: a channel just subscribed to may have missed a message since the last
		// attempt, so once it is ready, try again rather than wait.
		again := false
		if sub == nil || listening != tried.first {
			// Listen where this client's chance is announced now.
			if sub != nil {
				sub.Release()
			}
			name := s.n.Waiters + c.ID
			if tried.first {
				name = s.n.Channel
			}
			var err error
			if sub, err = c.Hub.Subscribe(name, hub.CountMessages, nil, hub.Registry{}); err != nil {
				sub = nil
				return fail(err)
			}
			listening = tried.first
			if again = !sub.QuietSince(tried.mark); again {
				if err := sub.Ready(ctx, refresh); err != nil {
					return fail(err)
				}
			}
		}
		if !again {
			// First in line, the next leased permit to run out is this client's to put
			// back: no release will say when.
			bound := refresh
			if tried.first && tried.next >= 0 {
				bound = min(bound, tried.next+time.Millisecond)
			}
			if err := sub.WaitOwn(ctx, bound); err != nil {
				return fail(err)
			}
		}
		a, err := s.attempt(ctx, call, ids)
		if err != nil {
			return fail(err)
		}
		if a.ok {
			return a, nil
		}
		tried = &a
	}
}

// acquire is the acquire call for n permits; queue: join or stay in the queue on failure;
// ids: lease the permits under these ids ("": plain permits).
func (s *Semaphore) acquire(n int64, queue bool, ids string) func(context.Context) rueidis.RedisResult {
	c := s.c
	keys := []string{s.n.Permits, s.n.Queue, s.n.Deadlines, s.n.Leases, s.n.Channel}
	join := "0"
	if queue {
		join = "1"
	}
	lease := "0"
	if ids != "" {
		lease = c.LeaseMs()
	}
	args := []string{strconv.FormatInt(n, 10), c.ID, join, c.LeaseMs(), c.Publish, s.n.Waiters, lease, ids}
	return func(ctx context.Context) rueidis.RedisResult {
		return script.SemaphoreAcquire().Exec(ctx, c.Redis, keys, args)
	}
}

// attempt makes one attempt. It is finished whatever happens to ctx (bounded by the
// client's timeout), so that permits it took are never left unknown to the caller: an
// attempt that took them reports it, even if ctx ended meanwhile. ids are the ids of the
// permits it leases ("": plain permits).
//
// An attempt whose reply was lost may have taken the permits. Plain permits cannot be
// told from anyone else's, and stay taken. Leased ones can: their ids are this attempt's
// alone, so it gives back whichever of them Redis holds (the return script takes only
// ids it finds, and is safe whether or not the attempt ran), and the caller's error then
// agrees with Redis, instead of the permits staying leased, renewed by nobody, for a
// lease. (A request that runs later still, after the give-back, leaves its permits to run
// out within a lease, as an abandoned lease does.)
func (s *Semaphore) attempt(ctx context.Context, call func(context.Context) rueidis.RedisResult, ids string) (attempted, error) {
	// A closed client takes nothing: nobody could give it back. (A waiter queued in
	// memory comes first when the one ahead of it returns ErrClosed.)
	if s.c.Closed() {
		return attempted{}, lockerr.ErrClosed
	}
	dctx := s.c.Detached(ctx)
	a := attempted{mark: s.c.Hub.Mark(), expires: -1, next: -1}
	// A refusal of the script unrun is sent again; a lost reply is not: the permits may
	// have been taken, and a second send could take them twice.
	var reply []int64
	refused := false // the last send was refused unrun: it took nothing
	err := retry.Refusals(dctx, func() (err error) {
		a.sent = time.Now()
		reply, err = call(dctx).AsIntSlice()
		if stop := retry.Abandon(ctx, err); stop != nil {
			refused = true
			return stop // no refusal: Refusals returns it
		}
		return err
	})
	switch {
	case err != nil:
		if ids != "" && !refused && retry.Lost(err) {
			// A context of its own: the attempt's may have run out waiting for the reply.
			_, _, _, _ = s.giveBack(s.c.Detached(ctx), ids)
		}
		return a, err
	case len(reply) < 2 || reply[0] == 0 && len(reply) < 4:
		return a, fmt.Errorf("relock: unexpected reply %v from the semaphore script", reply)
	case reply[0] == 1:
		a.ok = true
		if len(reply) > 2 && reply[2] >= 0 && reply[2] <= int64(math.MaxInt64/time.Millisecond) {
			a.expires = time.Duration(reply[2]) * time.Millisecond
		}
	default:
		a.first = reply[2] == 1
		// A lease beyond what a Duration holds (Redisson's permits leased without a lease
		// time, which it scores 922337203685477) runs out never, as no lease does.
		if reply[3] >= 0 && reply[3] <= int64(math.MaxInt64/time.Millisecond) {
			a.next = time.Duration(reply[3]) * time.Millisecond
		}
	}
	return a, nil
}

// leave takes the client out of Redis's queue: best effort, an entry left behind runs out
// within a lease.
func (s *Semaphore) leave(ctx context.Context) {
	dctx := s.c.Detached(ctx)
	_ = script.SemaphoreLeave().Exec(dctx, s.c.Redis, []string{s.n.Permits, s.n.Queue, s.n.Deadlines},
		[]string{s.c.ID, s.c.Publish, s.n.Waiters}).Error()
}

// TryAcquire makes one attempt to take n permits and reports whether it did.
func (s *Semaphore) TryAcquire(ctx context.Context, n int64) (bool, error) {
	if err := s.check(ctx, n, 1); err != nil {
		return false, s.fail("tryacquire", err)
	}
	a, err := s.tryTake(ctx, n, "")
	if err != nil {
		return false, s.fail("tryacquire", err)
	}
	return a.ok, nil
}

// tryTake makes one attempt to take n permits, without queueing; none while waiters of
// this client are queued. ids: lease them under these ids ("": plain permits, which the
// client then counts as held).
func (s *Semaphore) tryTake(ctx context.Context, n int64, ids string) (attempted, error) {
	g := s.gates.get(s.n.Permits)
	defer s.gates.put(s.n.Permits, g)
	s.gates.mu.Lock()
	waiting := len(g.queue) > 0
	s.gates.mu.Unlock()
	if waiting {
		return attempted{}, nil
	}
	a, err := s.attempt(ctx, s.acquire(n, false, ids), ids)
	if err == nil && a.ok && ids == "" {
		s.gates.hold(g, n)
	}
	return a, err
}

// Release gives back n of the permits this client took.
func (s *Semaphore) Release(ctx context.Context, n int64) error {
	if err := s.valid(ctx, taking(n, 1)); err != nil {
		return s.fail("release", err)
	}
	g := s.gates.get(s.n.Permits)
	defer s.gates.put(s.n.Permits, g)
	s.gates.mu.Lock()
	held := g.held
	if held >= n {
		g.held -= n
	}
	s.gates.mu.Unlock()
	if held < n {
		return s.fail("release", fmt.Errorf("%w: releasing %d permits, this client holds %d (AddPermits adds permits that were not taken)", lockerr.ErrNotHeld, n, held))
	}
	dctx := s.c.Detached(ctx)
	err := retry.Refusals(dctx, func() error {
		_, err := s.add(dctx, n, false)
		return err
	})
	if err != nil {
		if _, answered := rueidis.IsRedisErr(err); answered {
			// Redis refused the script before it wrote: the permits are still held.
			s.gates.hold(g, n)
		}
		return s.fail("release", err)
	}
	return nil
}

// add adds n permits (below zero: takes them away) and publishes the count; with ifNone,
// only when the semaphore has no permits key. It returns the count now, or -1 when ifNone
// found a key.
func (s *Semaphore) add(ctx context.Context, n int64, ifNone bool) (int64, error) {
	only := "0"
	if ifNone {
		only = "1"
	}
	return script.SemaphoreRelease().Exec(ctx, s.c.Redis, []string{s.n.Permits, s.n.Channel, s.n.Leases},
		[]string{strconv.FormatInt(n, 10), s.c.Publish, only}).AsInt64()
}

// TrySetPermits sets the available permits to n if the semaphore has none set.
func (s *Semaphore) TrySetPermits(ctx context.Context, n int64) (bool, error) {
	if err := s.check(ctx, n, 0); err != nil {
		return false, s.fail("trysetpermits", err)
	}
	v, err := s.add(ctx, n, true)
	if err != nil {
		return false, s.fail("trysetpermits", err)
	}
	return v >= 0, nil
}

// AddPermits adds n permits, or takes -n away when n is negative.
func (s *Semaphore) AddPermits(ctx context.Context, n int64) error {
	var bad error
	if n == 0 || n > most || n < -most {
		bad = fmt.Errorf("%w: adding %d permits; from -(2^53-1) to 2^53-1, not 0", lockerr.ErrInvalidCount, n)
	}
	if err := s.valid(ctx, bad); err != nil {
		return s.fail("addpermits", err)
	}
	_, err := s.add(ctx, n, false)
	return s.fail("addpermits", err)
}

// AvailablePermits returns the permits available now.
func (s *Semaphore) AvailablePermits(ctx context.Context) (int64, error) {
	if err := s.check(ctx, 0, 0); err != nil {
		return 0, s.fail("availablepermits", err)
	}
	v, err := script.SemaphoreAvailable().Exec(ctx, s.c.Redis, []string{s.n.Permits, s.n.Leases, s.n.Channel}, []string{s.c.Publish}).AsInt64()
	return v, s.fail("availablepermits", err)
}

// Drain takes every available permit and returns how many it took. They are not this
// client's to release: they are gone until permits are added.
func (s *Semaphore) Drain(ctx context.Context) (int64, error) {
	if err := s.check(ctx, 0, 0); err != nil {
		return 0, s.fail("drain", err)
	}
	v, err := script.SemaphoreDrain().Exec(ctx, s.c.Redis, []string{s.n.Permits, s.n.Leases}, nil).AsInt64()
	return v, s.fail("drain", err)
}
