// Package leases is the implementation of package watchdog: the table of a client's
// holds, the renewal loop, and the contexts that end when a hold is lost. Package watchdog
// documents the behaviour; the lock engine is this package's only caller.
package leases

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"weak"

	"github.com/redis/rueidis"

	"github.com/relock-go/relock/internal/keys"
	"github.com/relock-go/relock/internal/lockerr"
	"github.com/relock-go/relock/internal/owner"
	"github.com/relock-go/relock/internal/script"
	"github.com/relock-go/relock/observe"
	"github.com/relock-go/relock/watchdog"
)

// batchSize is the most locks one renewal script call renews.
const batchSize = 100

// Watchdog renews a client's holds. It is safe for concurrent use.
type Watchdog struct {
	rc      rueidis.Client
	lease   time.Duration
	period  time.Duration
	leaseMs string
	cluster bool

	ctx    context.Context // ended by Close
	cancel context.CancelFunc
	kick   chan struct{} // a hold with an earlier deadline arrived, or a check was asked for
	check  atomic.Bool   // look at every hold now (Check)
	done   chan struct{} // closed when run has returned

	base time.Time // the origin of Hold.due, with its monotonic clock reading

	owners *owner.Issuer    // the client's, which tells Abandon of owners gone
	obs    observe.Observer // nil: none

	mu      sync.Mutex
	holds   map[holdKey]*Hold
	byOwner map[string]int         // holds per owner, so that an owner gone with none costs a lookup
	firsts  map[holdKey]*firstTurn // the turns of owners of which the table has no hold (Begin)
	lates   map[holdKey]lateLeft   // late requests of holds that ended before they ran (drop)
	closing bool                   // Closing was called: a new hold is refused
	flight  chan struct{}          // closed when the renewal in flight is done; nil when none is
	wakeAt  time.Time              // when run looks at the holds next
	// unwatched are the holds whose owner's anchor is not watched yet (see watchLater).
	unwatched []*Hold
	watchSoon chan struct{} // unwatched was empty and is not: run watches it after watchDelay

	log atomic.Pointer[slog.Logger] // see SetLogger

	ticks     atomic.Uint64
	calls     atomic.Uint64
	batches   atomic.Uint64
	renewed   atomic.Uint64
	lost      atomic.Uint64
	abandoned atomic.Uint64
}

// holdKey names a hold: the lock and the hash field that counts it (the owner, or for a
// read-write lock's write hold the owner's write field).
type holdKey struct{ name, owner string }

// Hold is one owner's hold of one lock as its client knows it. Its fields are guarded by
// the Watchdog's mutex.
type Hold struct {
	key     holdKey
	renew   bool           // renewed by the watchdog; false for a fixed lease
	renewal *script.Script // the script that renews holds of its kind (see Grant)
	// anchor is the hold's context while its owner is not watched yet, the one reference
	// the table has to it, and nil from then on: see watchLater.
	anchor   *Context
	extra    string   // the second key of the hold in a renewal call; "": none
	count    int64    // the hold count as this client last learned it from Redis
	late     lateLeft // requests that may still re-enter the hold: see Grant.Late
	token    int64
	fenced   bool
	deadline time.Time
	ends     time.Time // the latest deadline, whatever the renewals; zero: none (Grant.Ends)
	// due mirrors deadline as nanoseconds since the watchdog's base time, so that the hold's
	// context can check it without the watchdog's mutex.
	due     atomic.Int64
	sending bool // in the renewal batch in flight

	who   string    // the owner, "<id>:<n>" (key.owner is its hash field)
	kind  string    // the kind of lock, as the observer hears it
	since time.Time // when the acquisition that started the hold was sent
	lock  Releaser  // the lock it is a hold of, which can release it (Closing)

	// The hold's contexts are not the table's to keep reachable (but for anchor, until its
	// watch): they name the owner, and a hold is abandoned when nothing that names its
	// owner is left (Abandon). The table keeps what ends them instead: the end of the
	// hold's context, and of each re-entry's that did not derive from it (see Context).
	ended atomic.Pointer[ending] // set once the hold has ended
	e     end
	joins []*end

	// op is held by the call that is changing this hold's count in Redis (an unlock, a
	// re-entry) from before it sends until the client has recorded the result: see Begin.
	op sync.Mutex
	// releasing is set while the call in op's turn releases the hold's last count (see
	// Turn.Releasing).
	releasing atomic.Bool
}

// New starts the watchdog of a client whose default lease is lease; renewals run every
// lease/3 until Close. owners is the client's issuer: the watchdog hears from it of owners
// that nothing names any more, and abandons their holds (Abandon). obs, if not nil, hears
// of releases, losses, abandoned holds, and renewals failing and recovering.
func New(rc rueidis.Client, lease time.Duration, owners *owner.Issuer, obs observe.Observer) *Watchdog {
	w := newWatchdog(rc, lease, rc.Mode() == rueidis.ClientModeCluster, owners)
	w.obs = obs
	return w
}

// newWatchdog is New with the grouping by cluster slot on or off.
func newWatchdog(rc rueidis.Client, lease time.Duration, cluster bool, owners *owner.Issuer) *Watchdog {
	ctx, cancel := context.WithCancel(context.Background())
	w := &Watchdog{
		owners:    owners,
		byOwner:   make(map[string]int),
		base:      time.Now(),
		rc:        rc,
		lease:     lease,
		period:    lease / 3,
		leaseMs:   strconv.FormatInt(lease.Milliseconds(), 10),
		cluster:   cluster,
		ctx:       ctx,
		cancel:    cancel,
		kick:      make(chan struct{}, 1),
		watchSoon: make(chan struct{}, 1),
		done:      make(chan struct{}),
		holds:     make(map[holdKey]*Hold),
		firsts:    make(map[holdKey]*firstTurn),
		lates:     make(map[holdKey]lateLeft),
	}
	w.wakeAt = time.Now().Add(w.period)
	w.log.Store(discard)
	go w.run()
	return w
}

// discard is the logger of a watchdog that was given none.
var discard = slog.New(slog.DiscardHandler)

// SetLogger sets where the watchdog logs a renewal round that fails, the first after
// failures that succeeds, and a hold found lost; nil: nowhere.
func (w *Watchdog) SetLogger(l *slog.Logger) {
	if l == nil {
		l = discard
	}
	w.log.Store(l)
}

// Close stops renewing. Every hold still known ends with cause ErrClosed: its lease will
// run out in Redis. Close waits for the renewal loop to end and is idempotent.
func (w *Watchdog) Close() {
	w.cancel()
	<-w.done
	w.mu.Lock()
	defer w.mu.Unlock()
	for k, h := range w.holds {
		delete(w.holds, k)
		h.anchor = nil
		h.end(lockerr.ErrClosed)
	}
	w.unwatched = nil
}

// Grant is what an acquisition told the client: who holds what, and for how long.
type Grant struct {
	Name, Owner string
	Count       int64 // the hold count after the acquisition; 1 for a first-level one
	Token       int64 // the fencing token of a first-level acquisition of a fenced lock
	Fenced      bool
	Sent        time.Time     // when the acquiring request was sent
	Lease       time.Duration // the lease it asked for
	Renew       bool          // renew until released, rather than a fixed lease
	// Ends, when not zero, is when Redis lets the hold go whatever its renewals: a
	// semaphore's leased permits go with its count when that has an expiry. The hold's
	// deadline never lies past it.
	Ends time.Time
	// Renewal is the script that renews holds of the kind, many in one call: it takes
	// the lease in milliseconds, then for each hold its name as a key (and Extra after it,
	// when the kind has one) and Owner as an argument, and answers 1 for a hold renewed, 0
	// for one lost (lua/rlock_renew.lua), and 2 for a read hold renewed beside its owner's
	// write hold (lua/rwlock_renew.lua). Extra is the second key of a hold in the call: a read-write
	// lock's key prefix "{<name>}", under which the read holds' timeout keys are renewed
	// with the hash, or a semaphore's zset of leased permits; "" for kinds with one key.
	Renewal *script.Script
	Extra   string
	// KeepsWrite is set for a read hold taken beside its owner's write hold of the lock:
	// the write field lives as long as the hash, whose expiry this hold raised.
	KeepsWrite bool
	// Who is the owner, "<id>:<n>"; Owner is its hash field.
	Who string
	// Kind is the kind of lock, as the observer hears it.
	Kind string
	// Carried is the owners' list of the context the lock was taken with, when it carried
	// the owner; nil when the owner is new, and Fresh is then its binding, which the hold's
	// context carries (and so is the owner's anchor: see owner.Own).
	Carried *owner.Binding
	Fresh   owner.Binding
	// Anchor makes the hold's context the anchor of Who even when it carries the list of
	// Carried (see owner.Watch): a hold whose Who is its own, which nothing but its
	// context names (a semaphore's lease).
	Anchor bool
	// Lock is the lock the hold is of, which releases it when the client closes.
	Lock Releaser
	// Late counts the requests of the hold's acquisitions that Redis had not run when the
	// client asked about them, and whose re-entry of the hold the client has not seen: each
	// may still run, and count the hold once more than the client knows (see Turn.Late).
	Late int64
}

// Releaser is a lock as the watchdog knows it: what can release a hold of it.
type Releaser interface {
	// ReleaseAll releases every hold of owner (a hash field) that the client knows of,
	// through the lock's unlock path, so that its waiters are woken.
	ReleaseAll(ctx context.Context, owner string) error
}

// Known is a hold that Closing found: its lock and the owner's field.
type Known struct {
	Lock  Releaser
	Owner string
}

// Closing refuses every hold from now on (Acquired reports it: the caller must release
// what it took) and returns the holds known now, for the client to release before Close.
// A re-entry of a known hold is still recorded, and released with it.
func (w *Watchdog) Closing() []Known {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.closing = true
	known := make([]Known, 0, len(w.holds))
	for k, h := range w.holds {
		if h.lock != nil {
			known = append(known, Known{h.lock, k.owner})
		}
	}
	return known
}

// Acquired records a successful acquisition and returns the context for the hold, derived
// from parent. A first-level acquisition starts a hold, whose context is made in dst (part
// of something the caller allocates anyway); a re-entry joins the owner's hold and returns
// parent itself when it already derives from the hold's context.
//
// After Closing or Close a new hold is refused: ok is false, the context has ended with
// cause ErrClosed, and the caller must release the hold it took, which nobody would renew
// or release otherwise.
func (w *Watchdog) Acquired(dst *Context, parent context.Context, g Grant) (ctx context.Context, ok bool) {
	k := holdKey{g.Name, g.Owner}
	// A first-level hold is made before the table is locked: every acquisition and release
	// of the client takes that lock, and an allocation can stall (a collection's assist).
	var h *Hold
	if g.Count == 1 {
		h = newHold(w, k, &g)
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if old := w.holds[k]; old != nil {
		if g.Count > 1 {
			// A re-entry: the scripts never move the expiry earlier, so neither does the
			// hold's deadline; and a hold that one acquisition asked to be renewed stays
			// renewed until it is released.
			if g.Late > old.late.n {
				old.late.until = later(old.late.until, w.lateEnd(g.Lease)) // new ones
			}
			old.count, old.late.n = g.Count, g.Late
			old.renew = old.renew || g.Renew
			w.setDeadline(old, later(old.deadline, Until(g.Sent, g.Lease)))
			if g.KeepsWrite {
				w.keepWrite(old)
			}
			return old.join(w, parent), true
		}
		// Redis says this is a first-level acquisition, so the hold we knew of is gone
		// (its key expired or was deleted) even if we had not noticed yet. The new hold
		// must not derive from the old one's context, which ends now.
		w.drop(old, lockerr.ErrLeaseLost)
		parent = outside(parent, old)
	}
	if w.closing || w.ctx.Err() != nil {
		// Closing or closed meanwhile: nobody will renew, watch or release this hold.
		ctx, cancel := context.WithCancelCause(parent)
		cancel(lockerr.ErrClosed)
		return ctx, false
	}
	if h == nil {
		h = newHold(w, k, &g)
	}
	*dst = Context{parent: parent, w: w, h: h, e: &h.e}
	if g.Carried != nil {
		dst.bind = g.Carried
		if g.Anchor {
			w.watchLater(h, dst)
		}
	} else {
		dst.own = g.Fresh
		dst.bind = &dst.own
		w.watchLater(h, dst)
	}
	if h.late.n > 0 {
		h.late.until = w.lateEnd(g.Lease)
		if l, ok := w.lates[k]; ok && h.late.n <= l.n {
			h.late.until = l.until // those the owner's last hold left, and no new ones
		}
	}
	w.holds[k] = h
	delete(w.lates, k) // they are the grant's now (Grant.Late counts the turn's)
	w.byOwner[g.Who]++
	if g.KeepsWrite {
		w.keepWrite(h)
	}
	if h.deadline.Before(w.wakeAt) {
		// A fixed lease that ends before the loop would look again.
		select {
		case w.kick <- struct{}{}:
		default:
		}
	}
	return dst, true
}

// watchLater has the owner of the new hold h, whose anchor is its context, watched for
// abandonment (owner.Watch) once the hold is watchDelay old, if the owner still holds
// anything then (this hold, or another taken through its context: see drop). The
// watch costs the runtime a record to keep and a cleanup to run for every owner, which most
// holds, released within moments, would pay for nothing; until then the table keeps the
// context reachable, which only delays finding an abandoned hold by as much. w.mu must be
// held.
func (w *Watchdog) watchLater(h *Hold, anchor *Context) {
	h.anchor = anchor
	if w.unwatched = append(w.unwatched, h); len(w.unwatched) == 1 {
		select {
		case w.watchSoon <- struct{}{}:
		default:
		}
	}
}

// watchDelay is how old a hold gets before its owner is watched for abandonment.
const watchDelay = 100 * time.Millisecond

// watchPending watches the owners of the holds that watchLater put off whose owners still
// hold something, and lets go of their contexts.
func (w *Watchdog) watchPending() {
	w.mu.Lock()
	pending := w.unwatched
	w.unwatched = nil
	anchors := make([]*Context, 0, len(pending))
	for _, h := range pending {
		if h.anchor != nil {
			anchors = append(anchors, h.anchor)
			h.anchor = nil
		}
	}
	w.mu.Unlock()
	// Outside the lock: a hold released meanwhile leaves a watch whose cleanup finds its
	// owner with no holds, one map lookup.
	for _, a := range anchors {
		owner.Watch(w.owners, a, a.h.who)
	}
}

// newHold returns the hold that the grant g starts, not yet in the table.
func newHold(w *Watchdog, k holdKey, g *Grant) *Hold {
	h := &Hold{key: k, renew: g.Renew, renewal: g.Renewal, extra: g.Extra, count: g.Count, token: g.Token, fenced: g.Fenced && g.Count == 1,
		late: lateLeft{n: g.Late}, who: g.Who, kind: g.Kind, since: g.Sent, lock: g.Lock, ends: g.Ends}
	w.setDeadline(h, Until(g.Sent, g.Lease))
	return h
}

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// setDeadline sets the hold's local deadline, never past when Redis lets the hold go
// (h.ends). w.mu must be held, or h not yet shared.
func (w *Watchdog) setDeadline(h *Hold, d time.Time) {
	if !h.ends.IsZero() && d.After(h.ends) {
		d = h.ends
	}
	h.deadline = d
	h.due.Store(int64(d.Sub(w.base)))
}

// keepWrite records that the read hold h raised the expiry of a hash that holds its
// owner's write field (Redis said so): a read-write lock's write hold has no key of its
// own, its field lives as long as the hash, so the write hold lasts at least as long as
// the read hold was promised.
func (w *Watchdog) keepWrite(h *Hold) {
	if wh := w.writeHold(h); wh != nil && h.deadline.After(wh.deadline) {
		w.setDeadline(wh, h.deadline)
	}
}

// writeHold returns, for a read hold, its owner's write hold of the same lock, if known:
// nil for any other hold, since only a read-write lock's write holds have a field ending in
// writeSuffix. It is looked for only when a read hold is lost or raised the hash's expiry,
// never on a release.
func (w *Watchdog) writeHold(h *Hold) *Hold {
	if strings.HasSuffix(h.key.owner, writeSuffix) {
		return nil
	}
	return w.holds[holdKey{h.key.name, h.key.owner + writeSuffix}]
}

// writeSuffix ends the hash field of a read-write lock's write hold.
const writeSuffix = ":write"

// drop forgets a hold and ends its context with cause: nil for a release, which the
// holder asked for, ErrClosed for one its client made as it closed, or ErrLeaseLost.
// w.mu must be held.
func (w *Watchdog) drop(h *Hold, cause error) {
	delete(w.holds, h.key)
	if h.late.n > 0 && cause != errAbandoned {
		// Requests of the hold's that may still run outlive it: one that runs takes a hold
		// the client does not know of, which the owner's next turn on the lock gives back.
		w.leaveLate(h.key, h.late)
	}
	if n := w.byOwner[h.who] - 1; n > 0 {
		// The owner holds other locks, taken through this hold's context, which is their
		// owner's anchor: it is still to be watched, or they could never be abandoned.
		w.byOwner[h.who] = n
	} else {
		delete(w.byOwner, h.who)
		h.anchor = nil // nothing left to abandon: the context need not be watched
	}
	// The observer hears of the end before the holder's context says it.
	lost := cause == lockerr.ErrLeaseLost
	switch {
	case lost:
		w.lost.Add(1)
		// The owner as the observer and the abandoned hold's record name it, not its
		// hash field (a write hold's ":write", a lease's permit ids).
		w.log.Load().Warn("relock: lease lost; the hold's context ends", "lock", h.key.name, "owner", h.who)
		if w.obs != nil {
			w.obs.LeaseLost(h.event())
		}
	case w.obs != nil && (cause == nil || cause == lockerr.ErrClosed):
		w.obs.Released(h.event()) // by Unlock, or by Close (ReleasedAtClose)
	}
	h.end(cause)
	if !lost {
		return
	}
	if wh := w.writeHold(h); wh != nil {
		// The read hold is gone, and maybe the hash with it (deleted, or a restart): look
		// at the write hold, which the read hold's expiry may have been keeping, at once.
		w.check.Store(true)
		select {
		case w.kick <- struct{}{}:
		default:
		}
	}
}

// Context is a hold's context, or a re-entry's that does not derive from it. It ends
// when the hold does (the holder released it, it was lost or abandoned, or the client
// closed), with context.Canceled and the hold's cause; and when what it derives from ends,
// with that context's error and cause.
//
// It is relock's own implementation of context.Context, so that the watchdog's table never
// keeps it reachable (it names the owner: see Abandon) and yet always ends it. The table
// keeps the context's end, which holds no reference to the context: its Done channel, made
// on first need, and how it ended. What else must run at the end (the contexts derived
// from it, the cause that context.Cause reads) is the context's own, which the end reaches
// through a weak pointer: if the context is gone, so is everything that could look.
//
// A holder that only unlocks never calls Done, and the hold costs no channel, no
// registration with its parent and no cause context.
//
// Its Err also looks at the hold's local deadline itself: after the process was paused
// (SIGSTOP, a long stop of the world), the goroutine that runs first may be the holder's,
// and it must not find its context live while the watchdog's goroutine has not yet run to
// end the hold.
type Context struct {
	parent context.Context
	w      *Watchdog
	h      *Hold
	e      *end           // the hold's own end for the hold's context, a re-entry's own
	bind   *owner.Binding // what it answers the owners' key with (&own, or the carried list); nil: its parent's
	own    owner.Binding

	hooked atomic.Bool // the end can reach the context: set by hook
	mu     sync.Mutex  // guards the rest
	funcs  []*func()   // AfterFunc's: the contexts derived from this one
	stop   func() bool // ends the registration with parent
	cause  context.Context
	cancel context.CancelCauseFunc
}

// end is what the watchdog's table keeps of a hold's context: no reference to the context
// or to what it derives from, only what it needs to end it.
type end struct {
	over atomic.Pointer[ending] // how the context ended, first come: the hold's end or its parent's
	ctx  atomic.Pointer[weak.Pointer[Context]]

	mu     sync.Mutex
	done   chan struct{} // made by the first Done
	closed bool
}

// ending is how a hold, or a hold's context, ended: the error its Err returns and the
// cause that context.Cause returns. A hold ends with context.Canceled and a cause: nil for a
// release.
type ending struct{ err, cause error }

// The endings of every cause the watchdog ends holds with, made once: a hold's end costs
// no allocation.
var endings = []*ending{{context.Canceled, nil}, {context.Canceled, lockerr.ErrLeaseLost},
	{context.Canceled, lockerr.ErrClosed}, {context.Canceled, errAbandoned}}

func endingOf(cause error) *ending {
	for _, e := range endings {
		if e.cause == cause {
			return e
		}
	}
	return &ending{context.Canceled, cause}
}

// finish ends the context with how, unless it has ended already: its Done channel closes,
// and what the context itself must run at its end runs, if the context is still there.
func (e *end) finish(how *ending) {
	if !e.over.CompareAndSwap(nil, how) {
		return
	}
	e.mu.Lock()
	if e.done != nil && !e.closed {
		e.closed = true
		close(e.done)
	}
	e.mu.Unlock()
	if wp := e.ctx.Load(); wp != nil {
		if c := wp.Value(); c != nil {
			c.ended(how)
		}
	}
}

// hook lets the end reach the context (by a weak pointer), and makes the context end with
// its parent: it is called the first time the context must be able to end on its own
// (Done, a derived context, a cause). If the end came before, the context's part runs now.
func (c *Context) hook() {
	if c.hooked.Load() {
		return
	}
	c.mu.Lock()
	if c.hooked.Load() {
		c.mu.Unlock()
		return
	}
	wp := weak.Make(c)
	c.e.ctx.Store(&wp)
	if c.parent.Done() != nil {
		// The registration refers to the end and the parent, never to c: a parent that
		// lives long must not keep an abandoned hold's context, and its owner, reachable.
		e, parent := c.e, c.parent
		c.stop = context.AfterFunc(parent, func() { e.finish(&ending{parent.Err(), context.Cause(parent)}) })
	}
	c.hooked.Store(true)
	c.mu.Unlock()
	// finish stores over before it looks for the context; this stored the context before it
	// looks at over: one of the two sees the other.
	if how := c.e.over.Load(); how != nil {
		c.ended(how)
	}
}

// ended runs the context's part of its end: its cause, its registration with its parent,
// and the contexts derived from it. It may run more than once; only the first does
// anything.
func (c *Context) ended(how *ending) {
	c.mu.Lock()
	funcs, stop := c.funcs, c.stop
	c.funcs, c.stop = nil, nil
	if c.cancel != nil {
		c.cancel(how.cause)
	}
	c.mu.Unlock()
	if stop != nil {
		stop()
	}
	// At once, as a cancelCtx cancels its children: the standard library's functions only
	// cancel a derived context (context.AfterFunc's run the caller's function in a
	// goroutine of their own), asking this context's Err and cause, which take no lock of
	// the watchdog's.
	for _, f := range funcs {
		(*f)()
	}
}

func (c *Context) Deadline() (time.Time, bool) { return c.parent.Deadline() }

func (c *Context) Done() <-chan struct{} {
	e := c.e
	e.mu.Lock()
	if e.done == nil {
		e.done = make(chan struct{})
		if e.over.Load() != nil {
			e.closed = true
			close(e.done)
		}
	}
	done := e.done
	e.mu.Unlock()
	c.hook()
	return done
}

func (c *Context) Err() error {
	if how := c.e.over.Load(); how != nil {
		return how.err
	}
	if err := c.parent.Err(); err != nil {
		c.e.finish(&ending{err, context.Cause(c.parent)}) // before the registration ran, or with none
		return c.e.over.Load().err
	}
	if c.w.lapsed(c.h) {
		if how := c.e.over.Load(); how != nil { // a renewal may have moved the deadline on
			return how.err
		}
	}
	return nil
}

// Value answers the context itself for the key h, which tells join and outside that a
// context derives from this one; the owner for the owners' key; and for the key that
// context.Cause asks, a context.Context that carries the cause. Other keys are its
// parent's.
func (c *Context) Value(key any) any {
	if h, ok := key.(*Hold); ok && h == c.h {
		return c
	}
	if v, ok := owner.Answer(c.bind, key); ok {
		return v
	}
	if key == cancelCtxKey {
		return c.causeContext().Value(key)
	}
	return c.parent.Value(key)
}

// causeContext returns the context, made on first need, whose cancellation carries c's
// cause for context.Cause. Its Done is not c's, so that a context derived from c is not
// taken for one derived from it: it registers with c through AfterFunc.
func (c *Context) causeContext() context.Context {
	c.hook()
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.cause == nil {
		c.cause, c.cancel = context.WithCancelCause(context.Background())
	}
	// Whether made now or before: an end that a caller has seen (Cause asks Err first)
	// may not have reached ended yet, and the cause must be there when Cause looks.
	if how := c.e.over.Load(); how != nil {
		c.cancel(how.cause)
	}
	return c.cause
}

// AfterFunc arranges for f to run once c has ended: the standard library calls it for
// every context derived from c, with a function that cancels that context (and
// context.AfterFunc with one that starts the caller's function in a goroutine). stop
// unregisters f, and reports whether it did so before f was started.
func (c *Context) AfterFunc(f func()) (stop func() bool) {
	c.hook()
	c.mu.Lock()
	if c.e.over.Load() != nil {
		c.mu.Unlock()
		go f()
		return func() bool { return false }
	}
	fp := &f
	c.funcs = append(c.funcs, fp)
	c.mu.Unlock()
	return func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		i := slices.Index(c.funcs, fp)
		if i < 0 {
			return false
		}
		c.funcs = slices.Delete(c.funcs, i, i+1)
		return true
	}
}

func (c *Context) String() string { return "relock hold of " + c.h.key.name }

// cancelCtxKey is the key for which context.Cause asks a context's Value for the context
// that carries its cause. The standard library keeps it unexported: Cause asks a probe for
// it once. Should Cause stop asking, every key goes to the parent and Cause falls back to
// Err; the tests of hold contexts' causes would say so.
var cancelCtxKey = func() any {
	var p probe
	_ = context.Cause(&p)
	return p.key
}()

// probe is a context that records the key its Value is first asked for.
type probe struct{ key any }

func (*probe) Deadline() (time.Time, bool) { return time.Time{}, false }
func (*probe) Done() <-chan struct{}       { return nil }
func (*probe) Err() error                  { return context.Canceled } // Cause asks Value only of an ended context
func (p *probe) Value(key any) any {
	if p.key == nil {
		p.key = key
	}
	return nil
}

// lapsed reports whether h's local deadline has passed, and if so ends it (lapse).
func (w *Watchdog) lapsed(h *Hold) bool {
	if time.Since(w.base).Nanoseconds() < h.due.Load() {
		return false
	}
	w.lapse(h)
	return true
}

// lapse ends a hold whose deadline has passed, unless a renewal moved the deadline on
// meanwhile. A hold that is gone already had its context ended.
func (w *Watchdog) lapse(h *Hold) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.holds[h.key] == h {
		w.lapseLocked(h, time.Now())
	}
}

// lapseLocked ends h, a hold w knows of, if its deadline has passed by now, and reports
// whether it did. w.mu must be held.
func (w *Watchdog) lapseLocked(h *Hold, now time.Time) bool {
	if now.Before(h.deadline) {
		return false
	}
	w.drop(h, lockerr.ErrLeaseLost)
	return true
}

// join returns a context for a re-entry. One that derives from the hold's context already
// ends with it; another gets a context of its own, which the hold ends too, and which
// counts as deriving from the hold. w.mu must be held.
func (h *Hold) join(w *Watchdog, parent context.Context) context.Context {
	if parent.Value(h) != nil {
		return parent
	}
	j := &Context{parent: parent, w: w, h: h, e: new(end)}
	if how := h.ended.Load(); how != nil {
		j.e.finish(how)
	}
	h.joins = append(h.joins, j.e)
	return j
}

// outside returns what a context that ends with h derives from, when ctx is one (the
// hold's context, a re-entry's, or derives from one), and ctx otherwise.
func outside(ctx context.Context, h *Hold) context.Context {
	if c, ok := ctx.Value(h).(*Context); ok {
		return c.parent
	}
	return ctx
}

// end ends the hold's contexts with cause. w.mu must be held.
func (h *Hold) end(cause error) {
	how := endingOf(cause)
	if !h.ended.CompareAndSwap(nil, how) {
		return
	}
	h.e.finish(how)
	for _, e := range h.joins {
		e.finish(how)
	}
}

// Outside returns the context that the owner's hold of name derives from, when ctx ends
// with that hold (it is the hold's context, a re-entry's, or derives from one); otherwise
// it returns ctx. A hold taken with Outside's result does not end when that hold does.
func (w *Watchdog) Outside(ctx context.Context, name, owner string) context.Context {
	w.mu.Lock()
	defer w.mu.Unlock()
	if h := w.holds[holdKey{name, owner}]; h != nil {
		return outside(ctx, h)
	}
	return ctx
}

// Check makes the watchdog look at every hold at once rather than at its next tick:
// renewable holds are renewed, holds with a fixed lease are checked without extending
// them, and every hold whose owner's field is gone ends with ErrLeaseLost. The client
// calls it when its subscriber connection comes back, since a Redis that restarted without
// persistence has lost every lock, and the holders must learn it in one round trip.
func (w *Watchdog) Check() {
	w.check.Store(true)
	select {
	case w.kick <- struct{}{}:
	default:
	}
}

// Turn is one call's exclusive turn at changing an owner's hold count of one lock, taken
// with Begin and given back with End. It says how the call ended the hold (Released,
// Unlocked, Lost, ReleasedAtClose) without looking the hold up again.
type Turn struct {
	w     *Watchdog
	k     holdKey
	h     *Hold
	first *firstTurn // the turn of an owner of which the table had no hold
	// Count is the owner's hold count as this client knows it (0: it knows of no hold),
	// which stays true for the turn, since nothing else in the client may change it.
	Count int64
	// Deadline is the hold's local deadline when the turn began: Redis keeps the hold at
	// least until then.
	Deadline time.Time
	// Late is the hold's Grant.Late when the turn began: when it is above 0, Redis may count
	// up to as many holds more than Count, which the call gives back first (see Explained).
	Late int64
}

// Begin waits until no other call of this client is changing the owner's hold count of
// name, and returns the turn in which the caller may: the count it knows stays right,
// because re-entries and unlocks of one owner on one lock run one at a time. An unlock
// sent again after its reply was lost can then compare the count in Redis with the one
// it expected and tell whether it already ran (see expect.lua). Owners are this client's
// alone, so nothing outside the client changes the count but expiry and ForceUnlock.
//
// A first-level acquisition, of which the client knows no hold, takes a turn of its own
// (firstTurn): goroutines that share an owner and lock at once take their holds one after
// the other, the later ones as re-entries of the hold the first registered. The caller
// must call End.
func (w *Watchdog) Begin(name, owner string) Turn {
	t := Turn{w: w, k: holdKey{name, owner}}
	for {
		w.mu.Lock()
		h := w.holds[t.k]
		if h == nil {
			f := w.firsts[t.k]
			if f == nil {
				f = &firstTurn{}
				w.firsts[t.k] = f
			}
			f.refs++
			w.mu.Unlock()
			f.mu.Lock()
			t.first = f
			// The turn before this one may have left a hold: then the turn is that hold's.
			w.mu.Lock()
			again := w.holds[t.k] != nil
			if !again {
				t.Late = w.lateOf(t.k)
			}
			w.mu.Unlock()
			if !again {
				return t
			}
			t.endFirst()
			t.first = nil
			continue
		}
		// The common case, nobody else in the owner's turn, takes one look at the table.
		// TryLock never waits, so taking it under w.mu cannot deadlock with a turn's
		// holder, which takes w.mu to say how its call went.
		if h.op.TryLock() {
			t.h, t.Count, t.Deadline, t.Late = h, h.count, h.deadline, h.late.current()
			w.mu.Unlock()
			return t
		}
		w.mu.Unlock()
		h.op.Lock()
		w.mu.Lock()
		if h.ended.Load() == nil { // still in the table: see drop
			t.h, t.Count, t.Deadline, t.Late = h, h.count, h.deadline, h.late.current()
			w.mu.Unlock()
			return t
		}
		// Released or lost while we waited: look again.
		w.mu.Unlock()
		h.op.Unlock()
	}
}

// hold returns the hold the turn is about, as the table has it now: the turn's own while
// it is in the table (a hold leaves the table when it ends), otherwise whatever the table
// has under its key. w.mu must be held.
func (t Turn) hold() *Hold {
	if t.h != nil && t.h.ended.Load() == nil {
		return t.h
	}
	return t.w.holds[t.k]
}

// Released records that the call in this turn released the owner's last hold: see
// Watchdog.Released.
func (t Turn) Released() { t.w.mu.Lock(); t.w.forget(t.hold(), nil) }

// Lost is Watchdog.Lost for the turn's hold.
func (t Turn) Lost() { t.w.mu.Lock(); t.w.forget(t.hold(), lockerr.ErrLeaseLost) }

// ReleasedAtClose is Watchdog.ReleasedAtClose for the turn's hold.
func (t Turn) ReleasedAtClose() { t.w.mu.Lock(); t.w.forget(t.hold(), lockerr.ErrClosed) }

// Record records how the release sent in this turn went: it released the owner's last
// hold (last), or one of several; or, with err, the owner holds nothing or the outcome is
// unknown, and the release may not have run. Either way renewal then stops, so that a lock
// whose unlock failed frees itself when its lease runs out rather than being kept alive by
// a holder that has moved on, and the hold's context ends (Lost).
func (t Turn) Record(last bool, err error) {
	switch {
	case err != nil:
		t.Lost()
	case last:
		t.Released()
	default:
		t.Unlocked()
	}
}

// Explained records that n of the hold's late requests have run: the call in this turn
// saw the holds they took, and gave them back.
func (t *Turn) Explained(n int64) {
	t.w.mu.Lock()
	defer t.w.mu.Unlock()
	if h := t.hold(); h != nil {
		h.late.n = max(h.late.n-n, 0)
	} else if l, ok := t.w.lates[t.k]; ok {
		if l.n -= n; l.n > 0 {
			t.w.lates[t.k] = l
		} else {
			delete(t.w.lates, t.k)
		}
	}
	t.Late = max(t.Late-n, 0)
}

// lateLeft is what the client remembers of a hold that ended while requests of its
// acquisitions could still run late (Grant.Late), or of an acquisition that ended without
// one (LateLeft): n of them, until a time by which any hold they took has run out. A
// request held up on the way runs moments after its resend, in practice: the end is two
// leases after the request was sent (lateEnd), and passing from hold to hold does not
// move it, so that an owner that locks again and again does not carry requests that
// never ran, and read the count at every unlock for them, for as long as it lives.
type lateLeft struct {
	n     int64
	until time.Time
}

// current returns how many late requests still count: none once they can no longer take
// a hold, and then l forgets them (the calls of a hold that lives long stop reading the
// count for requests that never ran).
func (l *lateLeft) current() int64 {
	if l.n > 0 && time.Now().After(l.until) {
		*l = lateLeft{}
	}
	return l.n
}

// add counts more late requests, which count until until.
func (l *lateLeft) add(more lateLeft) {
	l.n += more.n
	l.until = later(l.until, more.until)
}

// LateLeft records that n requests of an acquisition of name by owner (a hash field) that
// ended without a hold may still run, each taking a hold of lease: the owner's hold, if
// the client knows of one, keeps them as its own late requests (Grant.Late); otherwise the
// owner's next turn on the lock gives back what they took (see Turn.Late).
func (w *Watchdog) LateLeft(name, owner string, n int64, lease time.Duration) {
	k := holdKey{name, owner}
	w.mu.Lock()
	defer w.mu.Unlock()
	more := lateLeft{n: n, until: w.lateEnd(lease)}
	if h := w.holds[k]; h != nil {
		h.late.add(more)
		return
	}
	w.leaveLate(k, more)
}

// lateEnd is the end (lateLeft.until) of late requests sent now, each taking a hold of
// lease.
func (w *Watchdog) lateEnd(lease time.Duration) time.Time {
	return time.Now().Add(2 * max(w.lease, lease))
}

// leaveLate adds late requests to those left for k, of which the client knows no hold.
// w.mu must be held.
func (w *Watchdog) leaveLate(k holdKey, more lateLeft) {
	l := w.lates[k]
	l.add(more)
	w.lates[k] = l
}

// lateOf returns the late requests left for k that still count: a first-level turn gives
// back what they took (see Turn.Late). w.mu must be held.
func (w *Watchdog) lateOf(k holdKey) int64 {
	l, ok := w.lates[k]
	if !ok {
		return 0
	}
	n := l.current()
	if n == 0 {
		delete(w.lates, k)
	}
	return n
}

// Unlocked records that the call in this turn released one of several holds: the owner
// still holds the lock.
func (t Turn) Unlocked() {
	t.w.mu.Lock()
	defer t.w.mu.Unlock()
	if h := t.hold(); h != nil && h.count > 1 {
		h.count--
	}
}

// Foreign reports whether the turn found a hold that renewal does not renew: a hold of
// another kind of lock data under the same name and field. A reader's field is its bare
// owner, as a plain lock's is, so one owner's holds of a read-write lock and of a plain or
// fair lock of one name share a turn; a call of the one kind must leave the other's hold
// alone.
func (t Turn) Foreign(renewal *script.Script) bool { return t.h != nil && t.h.renewal != renewal }

// End gives the turn back.
func (t Turn) End() {
	if t.h != nil {
		t.h.releasing.Store(false)
		t.h.op.Unlock()
	}
	if t.first != nil {
		t.endFirst()
	}
}

// firstTurn is the turn of an owner on a lock of which the client knows no hold: a
// first-level acquisition's (or a release's of a hold the client does not know). refs
// counts the calls in it or waiting for it, guarded by Watchdog.mu; the last one takes it
// out of the table.
type firstTurn struct {
	mu   sync.Mutex
	refs int
}

// endFirst gives back the turn's firstTurn.
func (t Turn) endFirst() {
	f := t.first
	t.w.mu.Lock()
	if f.refs--; f.refs == 0 {
		delete(t.w.firsts, t.k)
	}
	t.w.mu.Unlock()
	f.mu.Unlock()
}

// Releasing says that the call in this turn is about to release the hold's last count.
// Until End, a renewal round that finds the hold gone from Redis leaves it to that call to
// say how the hold ended (Released, or Lost): the release may simply have run first, and
// a hold its holder released did not end as lost.
func (t Turn) Releasing() {
	if t.h != nil {
		t.h.releasing.Store(true)
	}
}

// event is the hold as the observer hears of it, ending now.
func (h *Hold) event() observe.Hold {
	return observe.Hold{Lock: h.key.name, Kind: observe.Kind(h.kind), Owner: h.who, Held: time.Since(h.since)}
}

// Abandon stops renewing every hold of owner, which nothing can name any more: every
// context that carried the owner became unreachable without an Unlock, so nobody can
// release the holds, and renewing them would keep their locks for the life of the
// process. Their locks free when their leases run out. The owner's issuer calls it (see
// owner.Watch), after a garbage collection found the owner's anchor unreachable.
//
// Once the client is closing (Closing), the holds are left to Close, which releases every
// one it found: a program that shuts down drops its holds' contexts as its calls fail with
// ErrClosed, and an abandonment then would take a hold out of the table under Close,
// which would release nothing for it, leaving its lock held for a lease.
func (w *Watchdog) Abandon(owner string) {
	w.mu.Lock()
	if w.byOwner[owner] == 0 || w.closing {
		w.mu.Unlock()
		return // released, as nearly every owner's holds are
	}
	var gone []*Hold
	for _, h := range w.holds {
		if h.who == owner {
			gone = append(gone, h)
		}
	}
	for _, h := range gone {
		w.drop(h, errAbandoned)
		w.abandoned.Add(1)
	}
	w.mu.Unlock()
	for _, h := range gone {
		w.log.Load().Warn("relock: hold abandoned: no context can unlock it any more; it is no longer renewed and frees when its lease runs out",
			"lock", h.key.name, "owner", h.who)
		if w.obs != nil {
			w.obs.Abandoned(h.event())
		}
	}
}

// errAbandoned ends an abandoned hold's contexts, which nobody can reach.
var errAbandoned = errors.New("relock: hold abandoned")

// Released records that the owner released the lock. It returns once no renewal of the
// hold can be sent any more, so a renewal never outlives the release.
func (w *Watchdog) Released(name, owner string) { w.forgetKey(holdKey{name, owner}, nil) }

// Lost records that the owner no longer holds the lock, or cannot know (an unlock answered
// "not held", or failed): the hold is not renewed again and its context ends with
// ErrLeaseLost.
func (w *Watchdog) Lost(name, owner string) { w.forgetKey(holdKey{name, owner}, lockerr.ErrLeaseLost) }

// ReleasedAtClose records that the client released the owner's hold as it closed: its
// context ends with cause ErrClosed, as a hold's context does when its client closes.
func (w *Watchdog) ReleasedAtClose(name, owner string) {
	w.forgetKey(holdKey{name, owner}, lockerr.ErrClosed)
}

func (w *Watchdog) forgetKey(k holdKey, cause error) {
	w.mu.Lock()
	w.forget(w.holds[k], cause)
}

// forget drops h, if not nil, with cause, and unlocks w.mu, which the caller holds; it
// returns once no renewal of h can be sent any more.
func (w *Watchdog) forget(h *Hold, cause error) {
	if h == nil {
		w.mu.Unlock()
		return
	}
	w.drop(h, cause)
	var flight chan struct{}
	if h.sending {
		flight = w.flight
	}
	w.mu.Unlock()
	if flight != nil {
		select {
		case <-flight:
		case <-w.ctx.Done():
		}
	}
}

// Holds reports whether the client knows of a hold of name by owner (a hash field).
func (w *Watchdog) Holds(name, owner string) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.holds[holdKey{name, owner}] != nil
}

// Token returns the fencing token of the owner's hold, if it holds a fenced lock. A hold
// whose deadline has passed is not the owner's any more, whether or not the loop has ended
// it yet: it ends now, as its context's Err would end it.
func (w *Watchdog) Token(name, owner string) (int64, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	h := w.holds[holdKey{name, owner}]
	if h == nil || !h.fenced {
		return 0, false
	}
	if w.lapseLocked(h, time.Now()) {
		return 0, false
	}
	return h.token, true
}

// Stats returns a snapshot of the watchdog's counters.
func (w *Watchdog) Stats() watchdog.Stats {
	w.mu.Lock()
	n := len(w.holds)
	w.mu.Unlock()
	return watchdog.Stats{Holds: n, Ticks: w.ticks.Load(), Calls: w.calls.Load(), Batches: w.batches.Load(),
		Renewed: w.renewed.Load(), Lost: w.lost.Load(), Abandoned: w.abandoned.Load()}
}

// run renews every period and ends holds whose deadline passed, waking early for a fixed
// lease that ends before the next renewal.
func (w *Watchdog) run() {
	defer close(w.done)
	next := w.wakeAt // set by newWatchdog before it started run
	timer := time.NewTimer(time.Until(next))
	defer timer.Stop()
	watch := time.NewTimer(watchDelay)
	watch.Stop()
	defer watch.Stop()
	// A round that failed is tried again soon, with backoff, as a check (Check): its holds
	// are renewed as soon as Redis answers again, not a period later, by when the lease of a
	// hold taken just before the failed round may have run out. A round can fail at once
	// (right after a restart, or a call that timed out, the first command on a connection
	// meets the dead one), or at its bound, while Redis does not answer.
	var recheck time.Time
	retry := minRecheck
	var failing time.Time // when the current run of failed renewal rounds began
	for {
		select {
		case <-w.ctx.Done():
			return
		case <-w.kick:
		case <-timer.C:
		case <-w.watchSoon:
			watch.Reset(watchDelay)
			continue
		case <-watch.C:
			w.watchPending()
			continue
		}
		w.expire(time.Now())
		now := time.Now()
		checking := w.check.Swap(false)
		if !recheck.IsZero() && !now.Before(recheck) {
			checking, recheck = true, time.Time{}
		}
		if due := !now.Before(next); checking || due {
			err := w.renew(now, checking)
			failed := err != nil
			switch {
			case failed && failing.IsZero():
				failing = now
				w.log.Load().Warn("relock: lease renewal failed; the holds are kept and tried again", "err", err)
				if w.obs != nil {
					w.obs.RenewalFailed(err)
				}
			case !failed && !failing.IsZero():
				down := time.Since(failing)
				w.log.Load().Info("relock: lease renewal recovered", "failing_for", down.Round(time.Millisecond))
				if w.obs != nil {
					w.obs.RenewalRecovered(down)
				}
				failing = time.Time{}
			}
			next = w.following(next, now, due)
			w.expire(time.Now())
			if failed {
				recheck = time.Now().Add(retry)
				retry = min(2*retry, max(w.period/4, minRecheck))
			} else {
				retry = minRecheck
			}
		}
		w.mu.Lock()
		w.wakeAt = next
		if !recheck.IsZero() && recheck.Before(w.wakeAt) {
			w.wakeAt = recheck
		}
		for _, h := range w.holds {
			if h.deadline.Before(w.wakeAt) {
				w.wakeAt = h.deadline
			}
		}
		timer.Reset(time.Until(w.wakeAt))
		w.mu.Unlock()
	}
}

// following returns when the round after one that ran at now is due; next is when this one
// was due, and due tells whether it had come.
//
// The rounds keep one cadence: a round that was due sets the next a period after its own due
// time, not after the moment the timer got it running, so that the renewals do not slide later
// by each round's wake-up. A waiter elsewhere looks at the lock a little after the lease it saw
// was due to end (see package pubsub), counting on the renewal that lands at that moment;
// renewals sliding later, a few milliseconds a round, would let its look come first. A round
// run early for a check renews everything, so the next waits a whole period from it; and a
// round that came more than a period late restarts the cadence from now.
func (w *Watchdog) following(next, now time.Time, due bool) time.Time {
	if due {
		next = next.Add(w.period)
	}
	if !due || !next.After(now) {
		next = now.Add(w.period)
	}
	return next
}

// minRecheck is the first delay before a failed round is tried again.
const minRecheck = 20 * time.Millisecond

// earliestRenewable returns the earliest deadline of the renewable holds.
func (w *Watchdog) earliestRenewable() (time.Time, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	var first time.Time
	for _, h := range w.holds {
		if h.renew && (first.IsZero() || h.deadline.Before(first)) {
			first = h.deadline
		}
	}
	return first, !first.IsZero()
}

// expire ends every hold whose local deadline has passed, and forgets the late requests
// left (lateLeft) whose holds have run out: an owner that never comes back leaves nothing.
func (w *Watchdog) expire(now time.Time) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, h := range w.holds {
		w.lapseLocked(h, now)
	}
	for k, l := range w.lates {
		if now.After(l.until) {
			delete(w.lates, k)
		}
	}
}

// renew sends one round of renewals: every renewable hold (and with checkAll every hold
// with a fixed lease, checked but not extended), in script calls of up to batchSize locks
// of one slot, all pipelined. A call that fails keeps its holds; they are tried again next
// round unless their deadline passes first.
//
// It returns the first failed call's error, or nil.
func (w *Watchdog) renew(sent time.Time, checkAll bool) (first error) {
	w.mu.Lock()
	// One call renews locks of one kind (one script) and, in a cluster, of one slot.
	// Holds with a fixed lease go in calls of their own, checked without being extended,
	// and only in a round asked for by Check: otherwise their deadline is enough.
	type group struct {
		renewal *script.Script
		check   bool
		slot    uint16
	}
	groups := make(map[group][]*Hold)
	for _, h := range w.holds {
		if !h.renew && !checkAll {
			continue
		}
		h.sending = true
		g := group{renewal: h.renewal, check: !h.renew}
		if w.cluster {
			g.slot = keys.Slot(h.key.name)
		}
		groups[g] = append(groups[g], h)
	}
	if len(groups) == 0 {
		w.mu.Unlock()
		return
	}
	flight := make(chan struct{})
	w.flight = flight
	w.mu.Unlock()

	var chunks []chunk
	for g, holds := range groups {
		chunks = appendChunks(chunks, holds, g.check)
	}

	// Bound the round by the period and by the earliest renewable deadline: a round that
	// hangs (Redis paused) must not keep the loop from ending holds on time.
	bound := w.period
	if d, ok := w.earliestRenewable(); ok {
		bound = min(bound, time.Until(d))
	}
	ctx, cancel := context.WithTimeout(w.ctx, max(bound, time.Millisecond))
	results := w.send(ctx, chunks)
	cancel()

	w.mu.Lock()
	for i, c := range chunks {
		renewed, err := results[i].AsIntSlice()
		if err == nil && len(renewed) != len(c.holds) {
			err = errors.New("renewal reply of the wrong length")
		}
		if first == nil {
			first = err
		}
		for j, h := range c.holds {
			h.sending = false
			if err != nil || w.holds[h.key] != h {
				continue // failed: tried again soon (see run); or released meanwhile
			}
			if renewed[j] >= 1 {
				if !c.check {
					w.setDeadline(h, later(h.deadline, Until(sent, w.lease)))
					w.renewed.Add(1)
				}
				if renewed[j] == 2 {
					w.keepWrite(h)
				}
				continue
			}
			if h.releasing.Load() {
				continue // gone by its own release, which says so (Turn.Releasing)
			}
			w.drop(h, lockerr.ErrLeaseLost)
		}
	}
	w.flight = nil
	w.mu.Unlock()
	close(flight)
	w.ticks.Add(1)
	return first
}

// chunk is the holds of one renewal script call: of one kind of lock, in a cluster of one
// slot, and either all renewed or (check) all only checked.
type chunk struct {
	holds []*Hold
	check bool
}

func appendChunks(chunks []chunk, holds []*Hold, check bool) []chunk {
	for len(holds) > 0 {
		n := min(len(holds), batchSize)
		chunks = append(chunks, chunk{holds[:n], check})
		holds = holds[n:]
	}
	return chunks
}

// Extend makes the owner's hold of name last at least d from now, in Redis and in the
// hold's context: the renewal script's call for this one hold, with d as its lease. Like a
// renewal it never shortens what a hold was promised. It returns ErrNotHeld when Redis has
// no such hold (it is then lost: not renewed again, its context ended), or the call's
// error, which leaves the hold as it was; a renewal is safe to send again.
func (w *Watchdog) Extend(ctx context.Context, name, owner string, d time.Duration) error {
	w.mu.Lock()
	h := w.holds[holdKey{name, owner}]
	w.mu.Unlock()
	if h == nil {
		return lockerr.ErrNotHeld
	}
	call := renewal([]*Hold{h}, strconv.FormatInt(d.Milliseconds(), 10))
	sent := time.Now()
	results, _ := script.Batch(ctx, w.rc, []script.Call{call})
	renewed, err := results[0].AsIntSlice()
	if err == nil && len(renewed) != 1 {
		err = errors.New("renewal reply of the wrong length")
	}
	if err != nil {
		return err
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.holds[h.key] != h {
		return lockerr.ErrNotHeld // released or lost meanwhile
	}
	if renewed[0] == 0 {
		w.drop(h, lockerr.ErrLeaseLost)
		return lockerr.ErrNotHeld
	}
	w.setDeadline(h, later(h.deadline, Until(sent, d)))
	if renewed[0] == 2 {
		w.keepWrite(h)
	}
	return nil
}

// renewal is the renewal script call for holds, all of one kind (and in a cluster of one
// slot), with lease ms as its lease ("0": check only).
func renewal(holds []*Hold, lease string) script.Call {
	call := script.Call{Script: holds[0].renewal, Keys: make([]string, 0, 2*len(holds)), Args: make([]string, 1, len(holds)+1)}
	call.Args[0] = lease
	for _, h := range holds {
		call.Keys = append(call.Keys, h.key.name)
		if h.extra != "" {
			call.Keys = append(call.Keys, h.extra)
		}
		call.Args = append(call.Args, h.key.owner)
	}
	return call
}

// send pipelines one renewal call per chunk (a chunk holds one kind of lock).
func (w *Watchdog) send(ctx context.Context, chunks []chunk) []rueidis.RedisResult {
	calls := make([]script.Call, len(chunks))
	for i, c := range chunks {
		lease := w.leaseMs
		if c.check {
			lease = "0" // check only
		}
		calls[i] = renewal(c.holds, lease)
	}
	results, resent := script.Batch(ctx, w.rc, calls)
	w.calls.Add(uint64(len(calls) + resent))
	w.batches.Add(1)
	if resent > 0 {
		w.batches.Add(1)
	}
	return results
}
