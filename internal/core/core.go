// Package core holds the parts of a relock client that every lock kind uses: the Redis
// client, the client id and its owners, the pub/sub hub, and the settings. The root
// package builds one per relock.Client; lock packages receive it and never import the root.
package core

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"log/slog"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/redis/rueidis"
	"golang.org/x/sync/errgroup"

	"github.com/relock-go/relock/internal/hub"
	"github.com/relock-go/relock/internal/leases"
	"github.com/relock-go/relock/internal/owner"
	"github.com/relock-go/relock/observe"
)

// Client is shared by all locks of one relock.Client.
type Client struct {
	Redis  rueidis.Client
	ID     string        // the client's UUID, the first part of every owner it makes
	Owners *owner.Issuer // owners "<ID>:<n>"

	Hub      *hub.Hub
	Watchdog *leases.Watchdog
	// Observer hears of acquisitions (the watchdog and the hub of the rest); nil: none.
	Observer observe.Observer

	// Lease is the lease of a hold taken without an explicit one: the watchdog timeout.
	Lease time.Duration
	// Timeout bounds a Redis call that cannot follow the caller's context: an acquire
	// attempt whose outcome must be known, and Unlock, which must work after cancellation.
	Timeout time.Duration
	// Publish is the command the scripts publish wake-ups with: "publish", or "spublish"
	// with sharded pub/sub.
	Publish string
	// WakeCode names this client in the wake registries of the locks it waits for: an
	// unlock that picks this client publishes it on the lock's channel (see lua/wake.lua).
	// It is a decimal number of at least 1000, which Redisson's clients ignore.
	WakeCode string
	// SyncReplicas, when above 0, makes every acquisition of a lock (the engine's kinds;
	// not a semaphore's permits) wait (WAIT) for that many replicas, at most
	// SyncTimeout; one that no replica confirmed is rolled back.
	SyncReplicas int
	SyncTimeout  time.Duration

	leaseMs   string
	closed    atomic.Bool
	closing   chan struct{} // closed by Close, after closed is set
	deadlines *deadlines
}

// Config is what a core is made from.
type Config struct {
	ID           string
	Lease        time.Duration
	Timeout      time.Duration
	Sharded      bool // sharded pub/sub (SSUBSCRIBE, SPUBLISH)
	SyncReplicas int
	SyncTimeout  time.Duration
	Logger       *slog.Logger // where renewal failures, lost leases and reconnects are logged; nil: nowhere
	Observer     observe.Observer
	WakeCode     string // "": a new one (NewWakeCode)
}

// New returns a core for rc, with its own hub and watchdog; Close stops them.
func New(rc rueidis.Client, cfg Config) *Client {
	owners := owner.NewIssuer(cfg.ID)
	w := leases.New(rc, cfg.Lease, owners, cfg.Observer)
	w.SetLogger(cfg.Logger)
	owners.OnGone(w.Abandon)
	code := cfg.WakeCode
	if code == "" {
		code = NewWakeCode()
	}
	h := hub.New(rc, hub.Config{Sharded: cfg.Sharded, Code: code, Name: ConnName(cfg.ID, code), OnReconnect: w.Check, Observer: cfg.Observer})
	h.SetLogger(cfg.Logger)
	return &Client{
		Redis:  rc,
		ID:     cfg.ID,
		Owners: owners,
		// A subscriber that reconnects means Redis may have restarted and lost every
		// lock: the watchdog checks every hold at once, not at its next tick.
		Hub:          h,
		Watchdog:     w,
		Lease:        cfg.Lease,
		Timeout:      cfg.Timeout,
		Publish:      hub.PublishCommand(cfg.Sharded),
		WakeCode:     code,
		SyncReplicas: cfg.SyncReplicas,
		SyncTimeout:  cfg.SyncTimeout,
		Observer:     cfg.Observer,
		leaseMs:      strconv.FormatInt(cfg.Lease.Milliseconds(), 10),
		deadlines:    newDeadlines(cfg.Timeout),
		closing:      make(chan struct{}),
	}
}

// Close marks the client closed and stops its hub and watchdog. With release, it also
// releases every hold the client knows of through its lock's unlock path, all at once,
// within the client's Timeout; an acquisition that lands meanwhile is released by its
// caller (Watchdog.Closing). It returns the releases' errors. It is idempotent: a later
// call returns nil at once.
//
// The hub stops before the releases: the client's waiters end with ErrClosed, and its
// subscriber connection, with the presence channels on which the wake registries see
// that it listens, is closed. A release then wakes another client's waiter; made while
// the hub still ran, it could pick this client, whose waiters no longer act on a wake-up,
// and the other clients' waiters would sleep out the lease.
func (c *Client) Close(release bool) error {
	if !c.closed.CompareAndSwap(false, true) {
		return nil
	}
	close(c.closing)
	var known []leases.Known
	if release {
		known = c.Watchdog.Closing() // from here, a hold taken is released by its taker
	}
	c.Hub.Close()
	var err error
	if release {
		err = c.releaseAll(known)
	}
	c.Watchdog.Close()
	return err
}

// releaseAll releases the holds known, concurrently (the calls pipeline on the client's
// connections), within Timeout.
func (c *Client) releaseAll(known []leases.Known) error {
	ctx, cancel := context.WithTimeout(context.Background(), c.Timeout)
	defer cancel()
	errs := make([]error, len(known))
	var g errgroup.Group
	g.SetLimit(64)
	for i, k := range known {
		g.Go(func() error {
			errs[i] = k.Lock.ReleaseAll(ctx, k.Owner)
			return nil
		})
	}
	_ = g.Wait()
	return errors.Join(errs...)
}

// Closed reports whether Close was called.
func (c *Client) Closed() bool { return c.closed.Load() }

// Closing returns a channel that is closed when Close is called: a wait that does not go
// through the hub (a spin lock's back-off) ends on it with ErrClosed.
func (c *Client) Closing() <-chan struct{} { return c.closing }

// LeaseMs is Lease in milliseconds, as the scripts take it.
func (c *Client) LeaseMs() string { return c.leaseMs }

// ConnName is the client name that a relock client's connections carry (CLIENT SETNAME):
// "relock:<id>:<wake code>", so that an operator can find the process behind an owner
// "<id>:<n>", or behind a wake code in a lock's registry of waiting clients, in CLIENT
// LIST (relock inspect does).
func ConnName(id, code string) string { return connPrefix + id + ":" + code }

// ParseConnName returns the client id and wake code of a connection name that ConnName
// made; ok is false for any other name.
func ParseConnName(name string) (id, code string, ok bool) {
	rest, ok := strings.CutPrefix(name, connPrefix)
	if !ok {
		return "", "", false
	}
	id, code, ok = strings.Cut(rest, ":")
	return id, code, ok && id != "" && code != ""
}

const connPrefix = "relock:"

// NewWakeCode returns a random wake code: at least 1000 (below are the lock messages) and
// below 2^61, a number that Redisson's clients, which read a lock message as a Java long,
// parse and ignore.
func NewWakeCode() string {
	var b [8]byte
	_, _ = rand.Read(b[:]) // never fails (crypto/rand)
	return strconv.FormatUint(1000+binary.BigEndian.Uint64(b[:])>>4, 10)
}
