// Package hub is the implementation of package pubsub: the subscriber connection, the
// reference-counted channel subscriptions and their permits. Package pubsub documents the
// behaviour; the lock engine is this package's only caller.
package hub

import (
	"context"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/rueidis"

	"github.com/relock-go/relock/internal/lockerr"
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

// Hub is a client's subscriber: one connection, reference-counted subscriptions, and
// counting permits per channel. It is safe for concurrent use.
type Hub struct {
	rc      rueidis.Client
	sharded bool // SSUBSCRIBE per channel (cluster) rather than one SUBSCRIBE connection
	// onReconnect, when set, is called (with mu possibly held: it must not block) once
	// Redis answers again on a connection made after one was lost.
	onReconnect func()
	ctx         context.Context // ended by Close; bounds every command on the connection
	cancel      context.CancelFunc
	kick        chan struct{} // tells run that subscriptions changed
	done        chan struct{} // closed when run has returned

	mu    sync.Mutex
	chans map[string]*channel

	messages   atomic.Uint64
	woken      atomic.Uint64
	timedOut   atomic.Uint64
	reconnects atomic.Uint64
}

// channel is the hub's state for one channel. All fields are guarded by Hub.mu.
type channel struct {
	refs int // subscribers holding it

	// Server-side state on the current connection. sent says what the last command sent
	// for this channel was (SUBSCRIBE or UNSUBSCRIBE); pending counts commands whose
	// confirmation has not arrived. The subscription is confirmed when the last command
	// was SUBSCRIBE and nothing is pending, which stays right however subscribes and
	// unsubscribes of one channel interleave.
	sent      bool
	pending   int
	confirmed bool
	ready     chan struct{} // closed when confirmed; replaced when it stops being so

	// lost is set when the connection dropped while the channel was wanted: messages may
	// have been missed, so its next confirmation wakes every waiter once.
	lost bool

	// stop ends the channel's receiver in sharded mode; nil when none runs.
	stop context.CancelFunc

	permits int // wake-ups for subscribers that were not parked when they came
	waiters []*waiter
}

type waiter struct {
	ch      chan struct{} // closed on grant
	granted bool          // guarded by Hub.mu
}

// New starts a hub on rc. Classic: one subscriber connection, made at once and remade
// whenever it drops, until Close. Sharded (for a cluster client): a receiver per wanted
// channel, subscribed with SSUBSCRIBE on the node that owns its slot; locks must then
// publish with SPUBLISH.
//
// onReconnect, if not nil, is called whenever the subscriber connection (or, sharded, a
// channel's) is made again after it was lost and Redis answers on it: a Redis that
// restarted may have lost every lock. It must not block.
func New(rc rueidis.Client, sharded bool, onReconnect func()) *Hub {
	ctx, cancel := context.WithCancel(context.Background())
	h := &Hub{
		rc:          rc,
		onReconnect: onReconnect,
		sharded:     sharded,
		ctx:         ctx,
		cancel:      cancel,
		kick:        make(chan struct{}, 1),
		done:        make(chan struct{}),
		chans:       make(map[string]*channel),
	}
	if sharded {
		go h.runSharded()
	} else {
		go h.run()
	}
	return h
}

// Close stops the hub and closes its connection. Parked and later waits return ErrClosed.
// It waits for the hub's goroutine to end and may be called more than once.
func (h *Hub) Close() {
	h.cancel()
	<-h.done
}

// Sub is one subscriber's hold on a channel. Release it when done waiting.
type Sub struct {
	h        *Hub
	name     string
	c        *channel
	released bool // guarded by Hub.mu
}

// Subscribe registers interest in a channel and returns at once; the subscription is
// made in the background (use Ready to wait for it). It returns ErrClosed after Close.
func (h *Hub) Subscribe(name string) (*Sub, error) {
	if h.ctx.Err() != nil {
		return nil, lockerr.ErrClosed
	}
	h.mu.Lock()
	c := h.chans[name]
	if c == nil {
		c = &channel{ready: make(chan struct{})}
		h.chans[name] = c
	}
	c.refs++
	needed := !c.sent
	h.mu.Unlock()
	if needed {
		h.poke()
	}
	return &Sub{h: h, name: name, c: c}, nil
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

// Wait blocks until a wake-up for this channel arrives or bound runs out; either way the
// caller should try the lock again. It returns the context's error when ctx ended first
// and ErrClosed when the hub was closed. If ctx is already done, Wait may still consume a
// permit that was waiting and return nil.
func (s *Sub) Wait(ctx context.Context, bound time.Duration) error {
	h, c := s.h, s.c
	h.mu.Lock()
	if h.ctx.Err() != nil {
		h.mu.Unlock()
		return lockerr.ErrClosed
	}
	if c.permits > 0 {
		c.permits--
		h.mu.Unlock()
		h.woken.Add(1)
		return nil
	}
	w := &waiter{ch: make(chan struct{})}
	c.waiters = append(c.waiters, w)
	h.mu.Unlock()

	t := time.NewTimer(bound)
	defer t.Stop()
	var err error
	select {
	case <-w.ch:
		h.woken.Add(1)
		return nil
	case <-t.C:
	case <-ctx.Done():
		err = ctx.Err()
	case <-h.ctx.Done():
		err = lockerr.ErrClosed
	}

	h.mu.Lock()
	defer h.mu.Unlock()
	if w.granted {
		// The wake-up raced with the timer or the cancellation and was granted to us
		// after all. A waiter that stays takes it; one that leaves must pass it on, or
		// the unlock it stands for would be lost for everybody else on this channel.
		if err == nil {
			h.woken.Add(1)
		} else {
			h.grantOne(c)
		}
		return err
	}
	if i := slices.Index(c.waiters, w); i >= 0 {
		c.waiters = slices.Delete(c.waiters, i, i+1)
	}
	if err == nil {
		h.timedOut.Add(1)
	}
	return err
}

// Release gives up the subscription; after the last subscriber of a channel releases it,
// the hub unsubscribes. Release is idempotent.
func (s *Sub) Release() {
	h := s.h
	h.mu.Lock()
	if s.released {
		h.mu.Unlock()
		return
	}
	s.released = true
	c := s.c
	c.refs--
	if c.permits > c.refs {
		c.permits = c.refs
	}
	last := c.refs == 0
	h.mu.Unlock()
	if last {
		h.poke()
	}
}

// PassOn wakes one other waiter parked on the channel, if there is one. A waiter that got
// the lock calls it: the waiters still parked were told how long to sleep by attempts made
// while the previous holder held the lock, and one of them must learn the new hold's
// lease, or the lock could stand free until their old bounds run out (a new holder that
// never unlocks: it crashed, or its fixed lease ran out).
func (s *Sub) PassOn() {
	h := s.h
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(s.c.waiters) > 0 {
		h.grantOne(s.c)
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
		w := c.waiters[0]
		c.waiters[0] = nil
		c.waiters = c.waiters[1:]
		w.granted = true
		close(w.ch)
		return
	}
	if c.permits < c.refs {
		c.permits++
	}
}

// grantAll wakes every parked waiter of c and gives a permit to every other subscriber.
// h.mu must be held.
func (h *Hub) grantAll(c *channel) {
	n := len(c.waiters)
	for _, w := range c.waiters {
		w.granted = true
		close(w.ch)
	}
	c.waiters = nil
	c.permits = max(c.permits, c.refs-n)
}

func (h *Hub) onMessage(m rueidis.PubSubMessage) {
	h.messages.Add(1)
	h.mu.Lock()
	if c := h.chans[m.Channel]; c != nil && c.refs > 0 {
		if m.Message == WakeAll {
			h.grantAll(c)
		} else {
			h.grantOne(c)
		}
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
		delete(h.chans, s.Channel)
	}
}

// confirm marks c subscribed and, if a message may have been missed meanwhile, wakes every
// waiter once. h.mu must be held.
func (h *Hub) confirm(c *channel) {
	if !c.confirmed {
		c.confirmed = true
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
		h.serve(dc, lost, h.reconnects.Load() > 0)
		// Close rather than release: a connection still subscribed must not go back to
		// the pool. The hooks are done once lost is closed.
		dc.Close()
		for range lost {
		}
		h.reset()
		if h.ctx.Err() != nil {
			return
		}
		delay = h.backOff(h.ctx, start, delay)
	}
}

// backOff counts a lost connection or subscription that had been made at start, waits
// delay before the next attempt (unless ctx ends), and returns the delay after that one:
// doubled, up to maxBackoff, and back to minBackoff after a connection that lived longer.
func (h *Hub) backOff(ctx context.Context, start time.Time, delay time.Duration) time.Duration {
	h.reconnects.Add(1)
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
// return, on a connection made after one was lost (again), is told to the hub's owner.
func (h *Hub) serve(dc rueidis.DedicatedClient, lost <-chan error, again bool) {
	if dc.Do(h.ctx, dc.B().Ping().Build()).Error() != nil {
		return
	}
	if again {
		h.reconnected()
	}
	for {
		if h.sync(dc) != nil {
			return
		}
		select {
		case <-h.kick:
		case <-lost:
			return
		case <-h.ctx.Done():
			return
		}
	}
}

// sync sends the SUBSCRIBE and UNSUBSCRIBE commands that bring the server's subscriptions
// in line with the wanted ones. Only run calls it, so commands on the connection are never
// concurrent. h.mu is not held while sending: confirmations take it in the hooks.
func (h *Hub) sync(dc rueidis.DedicatedClient) error {
	var sub, unsub []string
	h.mu.Lock()
	for name, c := range h.chans {
		switch {
		case c.refs > 0 && !c.sent:
			c.sent = true
			c.pending++
			sub = append(sub, name)
		case c.refs == 0 && c.sent:
			c.sent = false
			c.pending++
			c.unconfirm()
			unsub = append(unsub, name)
		case c.refs == 0 && c.pending == 0:
			delete(h.chans, name)
		}
	}
	h.mu.Unlock()
	if len(sub) > 0 {
		if err := dc.Do(h.ctx, dc.B().Subscribe().Channel(sub...).Build()).Error(); err != nil {
			return err
		}
	}
	if len(unsub) > 0 {
		if err := dc.Do(h.ctx, dc.B().Unsubscribe().Channel(unsub...).Build()).Error(); err != nil {
			return err
		}
	}
	return nil
}

// reset forgets the server-side state of a dropped connection. Channels still wanted are
// subscribed again by the next sync, and their waiters are woken once when that is
// confirmed, since a message may have been published while nobody listened.
func (h *Hub) reset() {
	h.mu.Lock()
	defer h.mu.Unlock()
	for name, c := range h.chans {
		if c.refs == 0 {
			delete(h.chans, name)
			continue
		}
		c.sent = false
		c.pending = 0
		c.lost = true
		c.unconfirm()
	}
}

func (c *channel) unconfirm() {
	if c.confirmed {
		c.confirmed = false
		c.ready = make(chan struct{})
	}
}
