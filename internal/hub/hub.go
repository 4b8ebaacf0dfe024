// Package hub is the implementation of package pubsub: the subscriber connection, the
// reference-counted channel subscriptions that linger after their last subscriber, their
// permits, marks and timers. Package pubsub documents the behaviour; the lock engine is
// this package's only caller.
package hub

import (
	"context"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/rueidis"

	"github.com/relock-go/relock/internal/lockerr"
	"github.com/relock-go/relock/observe"
	"github.com/relock-go/relock/pubsub"
)

// Messages published on lock channels. WakeOne is Redisson's unlock message; WakeAll is
// its read-unlock message, after which every waiting reader may enter. Recheck tells one
// fair-lock waiter that the owner whose turn it was took the lock, so that it sleeps until
// that hold ends rather than until its own refresh; like WakeOne it wakes one waiter.
const (
	WakeOne = "0"
	WakeAll = "1"
	Recheck = "2"
)

// Reconnect delays after the subscriber connection is lost.
const (
	minBackoff = 10 * time.Millisecond
	maxBackoff = time.Second
)

// Linger is how long a channel stays subscribed after its last subscriber leaves. A lock
// contended in bursts would otherwise be unsubscribed and subscribed again between them:
// two commands on the subscriber connection, a confirmation to wait for, and a next waiter
// that cannot rely on the subscription to spare its second attempt (see Sub.QuietSince). A
// second is long next to the gap between two acquisitions of a hot lock, and short enough
// that a client which stopped using a lock soon lets go of its channel.
const Linger = time.Second

// Hub is a client's subscriber: one connection, reference-counted subscriptions, and
// counting permits per channel. It is safe for concurrent use.
type Hub struct {
	rc      rueidis.Client
	sharded bool   // SSUBSCRIBE per channel (cluster) rather than one SUBSCRIBE connection
	code    string // this client's wake code (see wake.go)
	name    string // the subscriber connection's client name; "" for none
	publish string // the publish command of a pass-on: "publish", or "spublish" sharded
	// onReconnect, when set, is called (with mu possibly held: it must not block) once
	// Redis answers again on a connection made after one was lost.
	onReconnect func()
	obs         observe.Observer // nil: none
	ctx         context.Context  // ended by Close; bounds every command on the connection
	cancel      context.CancelFunc
	kick        chan struct{} // tells run that subscriptions changed
	done        chan struct{} // closed when run has returned

	// clock counts the events that decide QuietSince: confirmations and messages. Marks
	// read it without mu; it moves under mu.
	clock atomic.Uint64

	// subs counts the subscriptions held (Sub), so that a client with no waiters at all
	// finds that out without the mutex (see Lined and Claim).
	subs atomic.Int64

	mu     sync.Mutex
	chans  map[string]*channel
	passes []pass        // wake-ups this client cannot use, for the hub's goroutine to pass on
	linger time.Duration // Linger, but for tests

	log       atomic.Pointer[slog.Logger] // see SetLogger
	down      atomic.Bool                 // the connection was lost and is not back yet: logged once
	downSince atomic.Int64                // when it was lost, in Unix nanoseconds

	messages   atomic.Uint64
	woken      atomic.Uint64
	timedOut   atomic.Uint64
	reconnects atomic.Uint64
}

// channel is the hub's state for one channel. All fields are guarded by Hub.mu.
type channel struct {
	refs    int     // subscribers holding it
	reading Reading // how its messages wake its waiters

	reg  Registry // the lock's wake registries, if its waiters register (see wake.go)
	skip int      // messages to ignore: each follows a wake code (see wake.go)

	// Server-side state on the current connection. sent says what the last command sent
	// for this channel was (SUBSCRIBE or UNSUBSCRIBE); pending counts commands whose
	// confirmation has not arrived. The subscription is confirmed when the last command
	// was SUBSCRIBE and nothing is pending, which stays right however subscribes and
	// unsubscribes of one channel interleave.
	sent      bool
	pending   int
	confirmed bool
	ready     chan struct{} // closed when confirmed; replaced when it stops being so

	// since is the hub's clock at the confirmation, heard at the last message on the
	// channel, whether anyone was subscribed then or not (see QuietSince).
	since, heard uint64

	// idle is when the linger of a channel nobody subscribes ends; set when refs falls to 0.
	idle time.Time

	// lost is set when the connection dropped while the channel was wanted: messages may
	// have been missed, so its next confirmation wakes every waiter once.
	lost bool

	// stop ends the channel's receiver in sharded mode; nil when none runs.
	stop context.CancelFunc

	permits int // wake-ups for subscribers that were not parked when they came
	waiters []*waiter
	owned   []*Sub // the subscribers that said whose waits theirs are (see Own)
	// run counts the handoffs in a row on the channel since one of its waiters last got
	// the lock by its own attempt (see Claim).
	run int

	// The channel's timer, at due: the earliest bound of the waiters parked with Wait
	// since it last fired. Zero due: not armed.
	due   time.Time
	timer *time.Timer
}

type waiter struct {
	s       *Sub
	class   any           // the subscriber's class (see Subscribe)
	ch      chan struct{} // closed on grant
	shared  bool          // parked with Wait: its bound set the channel's timer
	granted bool          // guarded by Hub.mu
	byTimer bool          // granted by the channel's timer; written before ch is closed
	// offer is the subscriber's offer when it parked (see Sub.Offer); claimed is set while
	// a Claim holds the waiter, and handed is what the claim settled with. Guarded by Hub.mu.
	offer   any
	claimed bool
	handed  any
	// joined is set when the waiter was woken because its owner took the lock (see
	// Joined): a wake-up of its own, which it owes nobody. Guarded by Hub.mu.
	joined bool
}

// Config is what a hub is made from.
type Config struct {
	// Sharded: a receiver per wanted channel, subscribed with SSUBSCRIBE on the node that
	// owns its slot (a cluster client); locks must then publish with SPUBLISH.
	Sharded bool
	// Code is the client's wake code, which the unlock scripts publish to wake one of its
	// waiters (see wake.go).
	Code string
	// Name is the client name the subscriber connection takes (CLIENT SETNAME), so that an
	// operator can tell which process holds or waits; "" leaves it unnamed.
	Name string
	// OnReconnect, if not nil, is called whenever the subscriber connection (or, sharded,
	// a channel's) is made again after it was lost and Redis answers on it: a Redis that
	// restarted may have lost every lock. It must not block.
	OnReconnect func()
	// Observer, if not nil, hears when the subscriber connection is back after an outage.
	Observer observe.Observer
}

// New starts a hub on rc. Classic: one subscriber connection, made at once and remade
// whenever it drops, until Close. Sharded: a receiver per wanted channel.
func New(rc rueidis.Client, cfg Config) *Hub {
	ctx, cancel := context.WithCancel(context.Background())
	sharded := cfg.Sharded
	h := &Hub{
		rc:          rc,
		onReconnect: cfg.OnReconnect,
		obs:         cfg.Observer,
		sharded:     sharded,
		code:        cfg.Code,
		name:        cfg.Name,
		publish:     PublishCommand(sharded),
		ctx:         ctx,
		cancel:      cancel,
		kick:        make(chan struct{}, 1),
		done:        make(chan struct{}),
		chans:       make(map[string]*channel),
		linger:      Linger,
	}
	h.log.Store(discard)
	if sharded {
		go h.runSharded()
	} else {
		go h.run()
	}
	return h
}

// discard is the logger of a hub that was given none.
var discard = slog.New(slog.DiscardHandler)

// SetLogger sets where the hub logs its connection going down and coming back, once
// each per outage; nil: nowhere.
func (h *Hub) SetLogger(l *slog.Logger) {
	if l == nil {
		l = discard
	}
	h.log.Store(l)
}

// Close stops the hub and closes its connection. Parked and later waits return ErrClosed.
// It waits for the hub's goroutine to end and may be called more than once.
func (h *Hub) Close() {
	h.cancel()
	<-h.done
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, c := range h.chans {
		c.disarm()
	}
}

// Mark is a point in the hub's history: see Hub.Mark and Sub.QuietSince.
type Mark uint64

// Mark returns the present point of the hub's history. It allocates nothing and takes no
// lock: a waiter takes it before every acquisition attempt that may lead to a wait, so
// that a free lock costs nothing more.
func (h *Hub) Mark() Mark { return Mark(h.clock.Load()) }

// Idle reports whether no waiter of this client is subscribed to any channel: the
// uncontended path asks it before it names a channel (which for a fair lock's waiter is
// a string made for the call) or takes the hub's mutex.
func (h *Hub) Idle() bool { return h.subs.Load() == 0 }

// Sub is one subscriber's hold on a channel. Release it when done waiting. A Sub is used
// by one goroutine at a time.
type Sub struct {
	h        *Hub
	name     string
	c        *channel
	class    any
	released bool // guarded by Hub.mu
	// owes is set while the subscriber holds a wake-up it has not acted on: it was
	// granted one, and has neither waited again nor passed it on. One that leaves with it
	// must pass it on (Release does), or the others could be left with no timer. Guarded
	// by Hub.mu.
	owes bool
	// timed is set when the last Wait that returned nil ended by a time bound (the
	// channel's timer, or WaitOwn's own) rather than by a message. Only the subscriber's
	// goroutine touches it.
	timed bool
	// offer is what the subscriber's waits offer to a Claim (see Offer); handed is what
	// the last Wait that returned nil was handed by one, nil when it was woken otherwise.
	// Only the subscriber's goroutine touches them, but for offer under Hub.mu.
	offer  any
	handed any
	// owner is whose waits the subscriber's are (see Own), "" for nobody's; joined is set
	// when that owner took the lock while the subscriber was not parked: its next wait
	// returns at once. Guarded by Hub.mu.
	owner  string
	joined bool
}

// Timed reports whether the last Wait or WaitOwn that returned nil was ended by its time
// bound (the holder's lease as the waiters saw it) rather than by a wake-up message.
func (s *Sub) Timed() bool { return s.timed }

// Subscribe registers interest in a channel and returns at once; the subscription is
// made in the background (use Ready to wait for it). It returns ErrClosed after Close.
//
// r says how the channel's messages wake its waiters; every subscriber of a channel passes
// the same one, since a channel's name says its kind.
//
// class groups the channel's subscribers that are interchangeable: one attempt by any of
// them tells whether the others' would succeed (a lock's waiters of one kind; a reader
// and a writer of a read-write lock are not). It is compared with ==; nil is a class like
// any other. The channel's timer wakes one waiter of each class.
//
// reg names the lock's wake registries when its waiters register their client in them
// (see wake.go), and is zero when they do not.
func (h *Hub) Subscribe(name string, r Reading, class any, reg Registry) (*Sub, error) {
	if h.ctx.Err() != nil {
		return nil, lockerr.ErrClosed
	}
	h.mu.Lock()
	c := h.chans[name]
	if c == nil {
		c = &channel{ready: make(chan struct{}), reading: r}
		h.chans[name] = c
	}
	if reg != (Registry{}) {
		c.reg = reg
	}
	c.refs++
	h.subs.Add(1)
	needed := !c.sent // a lingering channel is still subscribed: nothing to send
	h.mu.Unlock()
	if needed {
		h.poke()
	}
	return &Sub{h: h, name: name, c: c, class: class}, nil
}

// Ready waits until the subscription is confirmed, at most bound. It returns nil when
// confirmed or when bound ran out (the caller then falls back on its TTL bound), the
// context's error when ctx ended first, and ErrClosed when the hub was closed.
func (s *Sub) Ready(ctx context.Context, bound time.Duration) error {
	h := s.h
	h.mu.Lock()
	confirmed, ready := s.c.confirmed, s.c.ready
	h.mu.Unlock()
	if confirmed {
		return nil
	}
	t := time.NewTimer(bound)
	defer t.Stop()
	select {
	case <-ready:
		return nil
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	case <-h.ctx.Done():
		return lockerr.ErrClosed
	}
}

// QuietSince reports whether every message published on the channel after m will reach
// this subscriber and no wake-up for this client has arrived since m: the channel's
// subscription was confirmed at m and has stayed so (no unsubscription, no dropped
// connection), and no message that wakes this client's waiters came, not even while the
// channel lingered with nobody subscribed. Call it after Subscribe.
//
// A waiter that took m before its last attempt and finds the channel quiet need not try
// again before it waits: an unlock after that attempt publishes after it, and its message
// wakes this subscriber or leaves it a permit. Otherwise (false) it waits for Ready and
// tries again, since an unlock may have happened while nobody listened.
//
// A release that woke another client by its code (see wake.go) does not count: if it came
// after the attempt, that attempt had registered this client, which the release passed
// over by design (the caller checks that the client's presence channel was subscribed
// since m as well); if it came before, the attempt saw its outcome. A new hold's lease
// does not count either: it frees nothing.
//
// A connection that died before m without the hub knowing yet is not seen here; the hub
// wakes every subscriber of the channel once it is subscribed again.
func (s *Sub) QuietSince(m Mark) bool {
	h, c := s.h, s.c
	h.mu.Lock()
	defer h.mu.Unlock()
	return c.confirmed && c.since <= uint64(m) && c.heard <= uint64(m)
}

// Wait blocks until a wake-up for this channel arrives or the channel's timer wakes this
// waiter; either way the caller should try the lock again. The channel keeps one timer for
// all the waiters parked with Wait, at the earliest of their bounds (the holder's
// remaining lease as each one's last attempt saw it); when it fires it wakes one of them
// per class, the longest parked, and forgets the others' bounds: they were told of the
// same lease, and the woken one tries, then waits again with what it learnt, which sets
// the timer again, or gets the lock and calls Took. So a process checks a held lock once
// per lease and class however many of its waiters wait. A waiter may therefore sleep past
// its own bound, never past its context.
//
// Wait returns the context's error when ctx ended first and ErrClosed when the hub was
// closed. If ctx is already done, Wait may still consume a permit that was waiting and
// return nil. A waiter that returns nil owes the channel an attempt: it must try, then
// Wait again, call Took, or Release, which passes the wake-up on.
func (s *Sub) Wait(ctx context.Context, bound time.Duration) error {
	return s.wait(ctx, bound, true)
}

// WaitOwn is Wait for a waiter that must come back on its own schedule (a fair-lock
// waiter or a preferred writer, which refreshes its queue entry): it returns at bound
// whatever the others do, its bound does not set the channel's timer, and the timer never
// wakes it.
func (s *Sub) WaitOwn(ctx context.Context, bound time.Duration) error {
	return s.wait(ctx, bound, false)
}

func (s *Sub) wait(ctx context.Context, bound time.Duration, shared bool) error {
	h, c := s.h, s.c
	h.mu.Lock()
	if h.ctx.Err() != nil {
		h.mu.Unlock()
		return lockerr.ErrClosed
	}
	s.handed = nil
	if s.joined {
		// Its owner took the lock since its last attempt: the next may re-enter.
		s.joined, s.timed = false, false
		h.mu.Unlock()
		return nil
	}
	if c.permits > 0 {
		c.permits--
		s.owes, s.timed = true, false
		h.mu.Unlock()
		h.woken.Add(1)
		return nil
	}
	// Parking: the subscriber has acted on any wake-up it held by the attempt it made
	// since, and a shared waiter's bound, from that attempt, now sets the channel's timer.
	s.owes = false
	w := &waiter{s: s, class: s.class, ch: make(chan struct{}), shared: shared, offer: s.offer}
	c.waiters = append(c.waiters, w)
	if shared {
		h.arm(c, bound)
	}
	h.mu.Unlock()

	var expired <-chan time.Time
	if !shared {
		t := time.NewTimer(bound)
		defer t.Stop()
		expired = t.C
	}
	var err error
	select {
	case <-w.ch: // granted: owes is set, unless it was handed the lock
		h.count(w)
		s.timed, s.handed = w.byTimer, w.handed
		return nil
	case <-expired:
	case <-ctx.Done():
		err = ctx.Err()
	case <-h.ctx.Done():
		err = lockerr.ErrClosed
	}

	h.mu.Lock()
	defer h.mu.Unlock()
	if w.claimed {
		// A release is handing the lock to this waiter, or may be: its call is in flight,
		// bounded by the client's timeout. Its outcome is this waiter's, as an attempt's
		// in flight is (see Claim).
		h.mu.Unlock()
		<-w.ch
		h.mu.Lock()
	}
	if w.handed != nil {
		// Handed the lock, or maybe: the caller acts on it whatever else ended the wait.
		h.count(w)
		s.timed, s.handed = false, w.handed
		return nil
	}
	if w.granted {
		// The wake-up raced with the timer or the cancellation and was granted to us
		// after all. A waiter that stays takes it; one that leaves must pass it on, or
		// the unlock it stands for (or the timer's check) would be lost for everybody
		// else on this channel.
		switch {
		case err == nil:
			h.count(w)
			s.timed = w.byTimer
		case !w.joined:
			s.owes = false
			h.handOff(c, s.class, true)
		}
		return err
	}
	if i := slices.Index(c.waiters, w); i >= 0 {
		c.waiters = slices.Delete(c.waiters, i, i+1)
	}
	if err == nil {
		h.timedOut.Add(1)
		s.timed = true
	}
	return err
}

// count counts a granted wait: the channel's timer is a time bound, the rest wake-ups.
func (h *Hub) count(w *waiter) {
	if w.byTimer {
		h.timedOut.Add(1)
	} else {
		h.woken.Add(1)
	}
}

// Release gives up the subscription; a wake-up the subscriber holds and has not acted on
// is passed on. After the last subscriber of a channel releases it, the channel lingers
// (see Linger) and the hub then unsubscribes it, unless a subscriber came back meanwhile.
// Release is idempotent.
func (s *Sub) Release() {
	h := s.h
	h.mu.Lock()
	defer h.mu.Unlock()
	if s.released {
		return
	}
	s.released = true
	c := s.c
	if s.owner != "" {
		s.disown()
	}
	c.refs--
	h.subs.Add(-1)
	if c.refs == 0 && (s.owes || c.permits > 0) {
		// The last subscriber leaves with a wake-up nobody here will act on. It may
		// have been this client's alone (its wake code): another client must get it.
		h.passLater(s.name, c)
	}
	if s.owes {
		// After refs fell: a permit, if nobody is parked, is for another subscriber.
		s.owes = false
		h.handOff(c, s.class, true)
	}
	if c.permits > c.refs {
		c.permits = c.refs
	}
	if c.refs == 0 {
		c.idle = time.Now().Add(h.linger)
		c.disarm() // nobody is parked
		h.poke()   // the loop schedules the unsubscription
	}
}

// Took settles the wake-up this subscriber held: its waiter got the lock, whose new hold
// lasts at least lease. The waiters still parked were told how long to sleep by attempts
// made while the previous holder held the lock, and the channel's timer may have been
// forgotten when it woke this one: it is set for the new hold's lease, so that they look
// when that runs out if nobody unlocks first (a new holder that never unlocks: it crashed,
// or its fixed lease ran out). A shorter lease than they sleep is also announced to every
// client (lua/wake.lua). When share is set (holds of one class can coexist: readers), the
// longest-parked waiter of this subscriber's class is woken as well, since it may get the
// lock beside this one, and it takes its turn the same way.
func (s *Sub) Took(lease time.Duration, share bool) {
	h, c := s.h, s.c
	h.mu.Lock()
	defer h.mu.Unlock()
	s.owes = false
	c.run = 0 // the client's run of handoffs starts again (see Claim)
	if share {
		if i := slices.IndexFunc(c.waiters, func(w *waiter) bool { return w.class == s.class }); i >= 0 {
			h.wake(c, i, false)
		}
	}
	if slices.ContainsFunc(c.waiters, func(w *waiter) bool { return w.shared }) {
		h.arm(c, lease)
	}
}

// Stats returns a snapshot of the hub's counters.
func (h *Hub) Stats() pubsub.Stats {
	h.mu.Lock()
	st := pubsub.Stats{Channels: len(h.chans)}
	for _, c := range h.chans {
		st.Waiting += len(c.waiters)
	}
	h.mu.Unlock()
	st.Messages = h.messages.Load()
	st.Woken = h.woken.Load()
	st.TimedOut = h.timedOut.Load()
	st.Reconnects = h.reconnects.Load()
	return st
}

// grantOne wakes the longest-parked waiter of c, or keeps a permit for a subscriber that
// is between attempts. Permits never exceed the subscribers: more would only cause
// useless attempts. h.mu must be held.
func (h *Hub) grantOne(c *channel) {
	if len(c.waiters) > 0 {
		h.wake(c, 0, false)
		return
	}
	if c.permits < c.refs {
		c.permits++
	}
}

// handOff passes on a wake-up that a subscriber of class leaves with: to the
// longest-parked waiter of that class that shares the channel's timer, since the wake-up
// may carry the timer's check for the class, and a waiter with its own timer does not set
// the channel's when it parks again; else to the longest-parked waiter sharing the timer;
// else to the longest-parked waiter; else, with permit, as a permit. h.mu must be held.
func (h *Hub) handOff(c *channel, class any, permit bool) {
	i := slices.IndexFunc(c.waiters, func(w *waiter) bool { return w.shared && w.class == class })
	if i < 0 {
		i = slices.IndexFunc(c.waiters, func(w *waiter) bool { return w.shared })
	}
	switch {
	case i >= 0:
		h.wake(c, i, false)
	case permit:
		h.grantOne(c)
	case len(c.waiters) > 0:
		h.wake(c, 0, false)
	}
}

// wakeEachClass wakes the longest-parked waiter of each class, among the waiters sharing
// the channel's timer when shared, else among all. h.mu must be held.
func (h *Hub) wakeEachClass(c *channel, shared, byTimer bool) {
	var buf [4]any // the classes woken: a lock's channel has one or two
	woken := buf[:0]
	for i := 0; i < len(c.waiters); {
		w := c.waiters[i]
		if (shared && !w.shared) || slices.Contains(woken, w.class) {
			i++
			continue
		}
		woken = append(woken, w.class)
		h.wake(c, i, byTimer) // removes c.waiters[i]
	}
}

// wake grants the wake-up to the parked waiter c.waiters[i]. h.mu must be held.
func (h *Hub) wake(c *channel, i int, byTimer bool) {
	w := c.waiters[i]
	if i == 0 {
		c.waiters[0] = nil
		c.waiters = c.waiters[1:]
	} else {
		c.waiters = slices.Delete(c.waiters, i, i+1)
	}
	w.granted, w.byTimer, w.s.owes = true, byTimer, true
	close(w.ch)
}

// arm sets the channel's timer to bound from now, and a little more (see renewalGrace),
// unless it is armed earlier. h.mu must be held.
func (h *Hub) arm(c *channel, bound time.Duration) {
	bound += renewalGrace(bound)
	at := time.Now().Add(bound)
	if !c.due.IsZero() && !at.Before(c.due) {
		return
	}
	c.due = at
	if c.timer == nil {
		c.timer = time.AfterFunc(bound, func() { h.fire(c) })
	} else {
		c.timer.Reset(bound)
	}
}

// renewalGrace is how long after a holder's lease was due to end, bound from now, the
// channel's timer wakes a waiter to look. A live holder's watchdog renews its lease every
// third of a lease, so the moment a lease was due to end, as a waiter last saw it, is also
// a moment its holder renews; a look just before that renewal lands finds two thirds of a
// lease left, one just after finds a whole lease. Looking a little late lets the renewal
// land first: the waiter then sleeps a whole lease, and a client looks at a held lock once
// per lease rather than about every two thirds of one. A holder that died is seen that
// much later: a sixty-fourth of the lease, at most a quarter second, in whole milliseconds
// as leases are.
func renewalGrace(bound time.Duration) time.Duration {
	return min(bound/64, 250*time.Millisecond).Truncate(time.Millisecond)
}

// fire wakes one waiter of each class sharing the channel's timer when the timer's bound
// has come. The others' bounds are forgotten: the woken ones set the timer again when they
// park, or pass the wake-up on.
func (h *Hub) fire(c *channel) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if c.due.IsZero() || time.Now().Before(c.due) {
		return // stopped, or set again since this run was due
	}
	c.due = time.Time{}
	h.wakeEachClass(c, true, true)
}

// disarm stops the channel's timer. h.mu must be held.
func (c *channel) disarm() {
	if c.timer != nil {
		c.timer.Stop()
	}
	c.due = time.Time{}
}

// drop forgets channel c, named name. h.mu must be held.
func (h *Hub) drop(name string, c *channel) {
	c.disarm()
	delete(h.chans, name)
}

// grantAll wakes every parked waiter of c and gives a permit to every other subscriber.
// h.mu must be held.
func (h *Hub) grantAll(c *channel) {
	n := len(c.waiters)
	for _, w := range c.waiters {
		w.granted, w.s.owes = true, true
		close(w.ch)
	}
	c.waiters = nil
	c.permits = max(c.permits, c.refs-n)
}

func (h *Hub) onMessage(m rueidis.PubSubMessage) {
	h.messages.Add(1)
	h.mu.Lock()
	if c := h.chans[m.Channel]; c != nil {
		c.reading.on(h, m.Channel, c, m.Message)
	}
	h.mu.Unlock()
}

func (h *Hub) onSubscription(s rueidis.PubSubSubscription) {
	switch s.Kind {
	case "subscribe", "unsubscribe", "ssubscribe", "sunsubscribe":
	default:
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	c := h.chans[s.Channel]
	if c == nil || c.pending == 0 {
		return
	}
	if c.pending--; c.pending > 0 {
		return
	}
	switch {
	case c.sent:
		h.confirm(c)
	case c.refs == 0:
		h.drop(s.Channel, c)
	}
}

// confirm marks c subscribed and, if a message may have been missed meanwhile, wakes every
// waiter once. h.mu must be held.
func (h *Hub) confirm(c *channel) {
	if !c.confirmed {
		c.confirmed = true
		c.since = h.clock.Add(1)
		close(c.ready)
	}
	if c.lost {
		c.lost = false
		h.grantAll(c)
		h.reconnected()
	}
}

// reconnected tells the hub's owner that Redis answers again after the connection was lost.
func (h *Hub) reconnected() {
	if h.down.CompareAndSwap(true, false) {
		down := time.Since(time.Unix(0, h.downSince.Load()))
		h.log.Load().Info("relock: subscriber reconnected; every waiter tries again", "down_for", down.Round(time.Millisecond))
		if h.obs != nil {
			h.obs.Reconnected(down)
		}
	}
	if h.onReconnect != nil {
		h.onReconnect()
	}
}

func (h *Hub) poke() {
	select {
	case h.kick <- struct{}{}:
	default:
	}
}

// run owns the subscriber connection: it makes it, keeps the server's subscriptions in
// line with the wanted ones, and makes it again after it drops.
func (h *Hub) run() {
	defer close(h.done)
	delay := minBackoff
	for h.ctx.Err() == nil {
		start := time.Now()
		dc, _ := h.subscriber().Dedicate()
		lost := dc.SetPubSubHooks(rueidis.PubSubHooks{
			OnMessage:      h.onMessage,
			OnSubscription: h.onSubscription,
		})
		cause := h.serve(dc, lost, h.reconnects.Load() > 0)
		// Close rather than release: a connection still subscribed must not go back to
		// the pool. The hooks are done once lost is closed.
		dc.Close()
		for range lost {
		}
		h.reset()
		if h.ctx.Err() != nil {
			return
		}
		delay = h.backOff(h.ctx, start, delay, cause)
	}
}

// backOff counts a lost connection or subscription that had been made at start, waits
// delay before the next attempt (unless ctx ends), and returns the delay after that one:
// doubled, up to maxBackoff, and back to minBackoff after a connection that lived longer.
// cause is what ended it, logged with the WARN that opens an episode: a refusal such as an
// ACL's NOPERM on SUBSCRIBE looks like a connection that keeps dropping, and only its
// error says why.
func (h *Hub) backOff(ctx context.Context, start time.Time, delay time.Duration, cause error) time.Duration {
	h.reconnects.Add(1)
	if h.down.CompareAndSwap(false, true) {
		h.downSince.Store(time.Now().UnixNano())
		const msg = "relock: subscriber connection down; reconnecting (waiters wait on their leases meanwhile)"
		if cause != nil {
			h.log.Load().Warn(msg, "err", cause)
		} else {
			h.log.Load().Warn(msg)
		}
	}
	if time.Since(start) > maxBackoff {
		delay = minBackoff
	}
	t := time.NewTimer(delay)
	select {
	case <-t.C:
	case <-ctx.Done():
		t.Stop()
	}
	return min(2*delay, maxBackoff)
}

// subscriber returns the client to take the subscriber connection from. Classic PUBLISH
// reaches every node of a cluster, so any node serves; a cluster client's own Dedicate
// would need a key to pick one.
func (h *Hub) subscriber() rueidis.Client {
	if h.rc.Mode() != rueidis.ClientModeCluster {
		return h.rc
	}
	for _, n := range h.rc.Nodes() {
		return n
	}
	return h.rc
}

// serve keeps one connection's subscriptions in line until it drops or the hub closes.
// It first makes sure the connection is made and Redis answers, even when no channel is
// wanted: the connection's loss is how the client learns that Redis went away, and its
// return, on a connection made after one was lost (again) once the subscriptions wanted
// are sent, is told to the hub's owner.
func (h *Hub) serve(dc rueidis.DedicatedClient, lost <-chan error, again bool) error {
	if err := dc.Do(h.ctx, dc.B().Ping().Build()).Error(); err != nil {
		return err
	}
	if h.name != "" {
		// Best effort: a server that refuses it (an ACL) still serves the subscriptions.
		_ = dc.Do(h.ctx, dc.B().ClientSetname().ConnectionName(h.name).Build()).Error()
	}
	lingered := time.NewTimer(time.Hour)
	defer lingered.Stop()
	for {
		h.passOn()
		next, err := h.sync(dc)
		if err != nil {
			return err
		}
		if again {
			// Back once the subscriptions are sent too: a server that answers PING but
			// refuses SUBSCRIBE (an ACL) is still down for the waiters, and one episode
			// of it is told once, not at every try.
			again = false
			h.reconnected()
		}
		var linger <-chan time.Time
		if !next.IsZero() {
			lingered.Reset(time.Until(next))
			linger = lingered.C
		}
		select {
		case <-h.kick:
		case <-linger:
		case err := <-lost:
			return err
		case <-h.ctx.Done():
			return nil
		}
	}
}

// sync sends the SUBSCRIBE and UNSUBSCRIBE commands that bring the server's subscriptions
// in line with the wanted ones: channels with subscribers, and channels that lost their
// last one less than the linger ago. It returns when the first linger still running ends
// (zero: none), for run to sync again then. Only run calls it, so commands on the
// connection are never concurrent. h.mu is not held while sending: confirmations take it
// in the hooks.
func (h *Hub) sync(dc rueidis.DedicatedClient) (time.Time, error) {
	var sub, unsub []string
	var regs []Registry
	var next time.Time
	now := time.Now()
	h.mu.Lock()
	for name, c := range h.chans {
		switch {
		case c.refs > 0 && !c.sent:
			c.sent = true
			c.pending++
			sub = append(sub, name)
		case c.refs == 0 && c.sent && now.Before(c.idle):
			next = earliest(next, c.idle)
		case c.refs == 0 && c.sent:
			c.sent = false
			c.pending++
			c.unconfirm()
			unsub = append(unsub, name)
			regs = append(regs, c.reg)
		case c.refs == 0 && c.pending == 0:
			h.drop(name, c)
		}
	}
	h.mu.Unlock()
	if len(sub) > 0 {
		if err := dc.Do(h.ctx, dc.B().Subscribe().Channel(sub...).Build()).Error(); err != nil {
			return next, err
		}
	}
	if len(unsub) > 0 {
		// Out of the registries first, so that no unlock picks this client once it no
		// longer hears the channel; a code that comes meanwhile is passed on.
		h.unregister(regs)
		if err := dc.Do(h.ctx, dc.B().Unsubscribe().Channel(unsub...).Build()).Error(); err != nil {
			return next, err
		}
	}
	return next, nil
}

// earliest returns the earlier of a and b, a zero time standing for none.
func earliest(a, b time.Time) time.Time {
	if a.IsZero() || b.Before(a) {
		return b
	}
	return a
}

// reset forgets the server-side state of a dropped connection. Channels still wanted are
// subscribed again by the next sync, and their waiters are woken once when that is
// confirmed, since a message may have been published while nobody listened.
func (h *Hub) reset() {
	h.mu.Lock()
	defer h.mu.Unlock()
	for name, c := range h.chans {
		if c.refs == 0 {
			h.drop(name, c) // lingering: nothing to keep
			continue
		}
		c.sent = false
		c.pending = 0
		c.lost = true
		c.skip = 0 // a code's message may have been lost with the connection
		c.unconfirm()
	}
}

func (c *channel) unconfirm() {
	if c.confirmed {
		c.confirmed = false
		c.ready = make(chan struct{})
	}
}
