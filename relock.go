// Package relock brings Redisson's distributed locks to Go on the rueidis client: a
// reentrant lock whose owner travels in a context.Context, waiters woken by pub/sub
// instead of polling, and the same data layout as Redisson, so that Go and Java services
// can share a lock.
//
// A Client is made once per process and Redis deployment; locks hang off it:
//
//	c, err := relock.New(rc)
//	defer c.Close()
//	mu := c.Lock("orders:42")
//	ctx, err = mu.Lock(ctx)
//	if err != nil { ... }
//	defer mu.Unlock(ctx)
package relock

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/redis/rueidis"

	"github.com/relock-go/relock/countdown"
	"github.com/relock-go/relock/fairlock"
	"github.com/relock-go/relock/internal/core"
	icountdown "github.com/relock-go/relock/internal/countdown"
	"github.com/relock-go/relock/internal/engine"
	"github.com/relock-go/relock/internal/lockerr"
	"github.com/relock-go/relock/internal/lockopt"
	"github.com/relock-go/relock/internal/owner"
	"github.com/relock-go/relock/internal/permits"
	"github.com/relock-go/relock/internal/redisurl"
	"github.com/relock-go/relock/multilock"
	"github.com/relock-go/relock/observe"
	"github.com/relock-go/relock/pubsub"
	"github.com/relock-go/relock/rlock"
	"github.com/relock-go/relock/rwlock"
	"github.com/relock-go/relock/semaphore"
	"github.com/relock-go/relock/spinlock"
	"github.com/relock-go/relock/watchdog"
)

// Defaults of the client options.
const (
	DefaultWatchdogTimeout = 30 * time.Second
	DefaultTimeout         = 3 * time.Second
)

// Client is relock's handle on one Redis deployment: it owns the client id that owners
// are made from and the subscriber connection that wakes waiters. Make one per process
// and deployment with New, share it, and Close it when done. It is safe for concurrent use.
type Client struct {
	core        *core.Client
	keepOnClose bool
	own         rueidis.Client // the rueidis client Dial made, which Close closes; nil after New
	gates       *permits.Gates // the semaphores' waiters and held permits
}

// Option configures a Client.
type Option func(*config) error

type config struct {
	lease        time.Duration
	timeout      time.Duration
	sharded      *bool // nil: decided from the client (cluster, Redis 7+)
	syncReplicas int
	syncTimeout  time.Duration
	keepOnClose  bool
	logger       *slog.Logger
	observer     observe.Observer
}

// WithObserver sets the observer that hears of the client's acquisitions (with their wait
// and what ended it), releases (with the time held), lost and abandoned holds, lease
// renewals failing and recovering, and the subscriber connection coming back (see package
// observe). Without one (the default, or nil) the client pays nothing for it.
func WithObserver(o observe.Observer) Option {
	return func(c *config) error {
		c.observer = o
		return nil
	}
}

// WithLogger sets where the client logs what an operator should hear of: a lease renewal
// round that fails (once, until one succeeds again) and its recovery, a hold found lost,
// and the subscriber connection going down and coming back. The default is
// slog.Default(); nil logs nothing. The counters (WatchdogStats, PubSubStats) are kept
// either way.
func WithLogger(l *slog.Logger) Option {
	return func(c *config) error {
		c.logger = l // nil: the watchdog and the hub log nowhere
		return nil
	}
}

// WithReleaseOnClose sets whether Close releases the client's holds (default true). With
// false, Close leaves them to run out their leases, as a client that dies does: use it when
// another process is to take over the holds' work only after the leases end.
func WithReleaseOnClose(release bool) Option {
	return func(c *config) error {
		c.keepOnClose = !release
		return nil
	}
}

// WithShardedPubSub forces sharded pub/sub (SSUBSCRIBE, SPUBLISH) on or off. By default it
// is on for a cluster client whose nodes run Redis 7 or newer: classic PUBLISH is
// broadcast to every node of a cluster, which does not scale with the lock traffic. Every
// client that shares a lock, relock's or Redisson's, must use the same mode, or waiters
// are woken only by their lease running out.
func WithShardedPubSub(on bool) Option {
	return func(c *config) error {
		c.sharded = &on
		return nil
	}
}

// WithSyncReplicas makes every acquisition of a lock (of every kind: the reentrant, fair,
// read-write and spin locks, and each member of a MultiLock) wait until n replicas have
// it, at most timeout (WAIT, sent in the same round trip as the acquire script). A
// semaphore's permits and a latch's count are not waited for, as in Redisson. When no
// replica confirms it in time the acquisition is rolled back and fails with ErrNotSynced;
// when some but fewer than n do, it stands. It narrows, but cannot close, the window in which a failover loses
// a lock just granted: replication stays asynchronous (see docs/operations.md). n must be
// at least 1 and timeout at least a millisecond (WAIT counts whole milliseconds, and takes
// 0 for no bound), else New fails with ErrInvalidOption.
func WithSyncReplicas(n int, timeout time.Duration) Option {
	return func(c *config) error {
		if n < 1 || timeout < time.Millisecond {
			return fmt.Errorf("relock: sync replicas %d within %v: %w", n, timeout, ErrInvalidOption)
		}
		c.syncReplicas, c.syncTimeout = n, timeout
		return nil
	}
}

// WithWatchdogTimeout sets the lease of holds taken without rlock.WithLease (default 30s).
// The watchdog renews such holds every third of it until they are released.
func WithWatchdogTimeout(d time.Duration) Option {
	return func(c *config) error {
		lease, ok := lockopt.Lease(d)
		if !ok {
			return fmt.Errorf("relock: watchdog timeout %v: %w", d, ErrInvalidLease)
		}
		c.lease = lease
		return nil
	}
}

// WithTimeout bounds each Redis call that does not follow the caller's context (default
// 3s): an acquire attempt, which is finished even if the caller's context ends so that no
// hold is left behind unknown, and Unlock, which must work after cancellation. A waiter
// whose attempt runs out of it keeps waiting while its context lives, trying again each
// second, for up to a lease of such failures (see docs/reliability.md, "A stall while
// waiting"); a call's first attempt returns the error. A timeout of more than a hundred
// years is taken as a hundred years.
func WithTimeout(d time.Duration) Option {
	return func(c *config) error {
		if d <= 0 {
			return fmt.Errorf("relock: timeout %v must be positive: %w", d, ErrInvalidOption)
		}
		// Bounds are kept as the clock plus the timeout: a longer one would wrap around
		// into the past and end every call at once.
		c.timeout = min(d, lockopt.Forever)
		return nil
	}
}

// New returns a client on rc, which may be any rueidis client: single node, sentinel or
// cluster. relock does not close rc; close it after the Client. New sends nothing to Redis
// itself, except for a cluster client, which it asks for the server version (to choose
// sharded pub/sub) unless WithShardedPubSub decided; the subscriber connection is opened
// in the background.
func New(rc rueidis.Client, opts ...Option) (*Client, error) {
	return newClient(rc, uuid.NewString(), "", opts)
}

// newClient is New with the client id and wake code ("": a new one) chosen by the caller.
func newClient(rc rueidis.Client, id, code string, opts []Option) (*Client, error) {
	if rc == nil {
		return nil, errors.New("relock: New needs a rueidis client, got nil")
	}
	cfg := config{lease: DefaultWatchdogTimeout, timeout: DefaultTimeout, logger: slog.Default()}
	for _, o := range opts {
		if o == nil {
			continue
		}
		if err := o(&cfg); err != nil {
			return nil, err
		}
	}
	sharded := false
	if cfg.sharded != nil {
		sharded = *cfg.sharded
	} else if rc.Mode() == rueidis.ClientModeCluster {
		sharded = shardedPubSubSupported(rc, cfg.timeout)
	}
	return &Client{keepOnClose: cfg.keepOnClose, gates: permits.NewGates(), core: core.New(rc, core.Config{
		ID:           id,
		Lease:        cfg.lease,
		Timeout:      cfg.timeout,
		Sharded:      sharded,
		SyncReplicas: cfg.syncReplicas,
		SyncTimeout:  cfg.syncTimeout,
		Logger:       cfg.logger,
		Observer:     cfg.observer,
		WakeCode:     code,
	})}, nil
}

// Dial returns a client on a Redis named by a URL (redis://[user:password@]host:port/db,
// rediss:// for TLS, unix://; as rueidis.ParseURL reads them), with a rueidis client of its
// own that Close closes. It is the one line a service on another Go Redis client needs to
// adopt relock: the locks are shared through Redis, not through the client. An error
// never shows the URL's password or user.
func Dial(redisURL string, opts ...Option) (*Client, error) {
	opt, err := redisurl.Parse(redisURL)
	if err != nil {
		return nil, fmt.Errorf("relock: %w", err)
	}
	opt.DisableCache = true // relock reads nothing through the client-side cache
	id, code := uuid.NewString(), core.NewWakeCode()
	if opt.ClientName == "" {
		opt.ClientName = core.ConnName(id, code) // every connection, so that CLIENT LIST tells this process
	}
	rc, err := rueidis.NewClient(opt)
	if err != nil {
		return nil, fmt.Errorf("relock: connecting to %s: %w", redisurl.Redact(redisURL), err)
	}
	c, err := newClient(rc, id, code, opts)
	if err != nil {
		rc.Close()
		return nil, err
	}
	c.own = rc
	return c, nil
}

// shardedPubSubSupported reports whether the cluster's nodes run Redis 7 or newer, which
// have sharded pub/sub. When it cannot tell, it answers no: classic pub/sub works on every
// version, only less efficiently.
func shardedPubSubSupported(rc rueidis.Client, timeout time.Duration) bool {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	info, err := rc.Do(ctx, rc.B().Info().Section("server").Build()).ToString()
	if err != nil {
		return false
	}
	for _, line := range strings.Split(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "redis_version:"); ok {
			major, _, _ := strings.Cut(v, ".")
			n, err := strconv.Atoi(major)
			return err == nil && n >= 7
		}
	}
	return false
}

// Close stops the client. It first releases every hold the client has, through each
// lock's unlock path, so that their waiters, in this process or another, are woken and
// take the locks at once, as etcd's Session.Close frees a session's locks; an acquisition
// that completes meanwhile is released too. The releases run concurrently, all within the
// client's timeout (WithTimeout), and Close returns their errors joined, each naming its
// lock: a hold that could not be released runs out its lease. A release sent to a node
// whose connection rueidis is dialling again waits for that dial, as an Unlock does (its
// Dialer.Timeout bounds it; see docs/operations.md), and Close returns once it ends; the
// releases on the other nodes are not held up by it. Then renewal stops, waiters
// return ErrClosed, and every later call does too. The holds' contexts end with cause
// ErrClosed. A semaphore's leased permits are given back as holds are; its plain permits,
// which, as Redisson's, have no holder in Redis, stay taken: Release them before Close.
//
// WithReleaseOnClose(false) skips the releases: the holds run out their leases.
//
// Close is idempotent: a later call returns nil.
//
// A Client that New did not make (nil, or a zero value) has nothing to close: Close
// returns ErrInvalidOption, and its locks, semaphores and latches fail every call so.
func (c *Client) Close() error {
	if c.made() == nil {
		return lockerr.New("close", "", lockerr.ErrNotMade)
	}
	err := c.core.Close(!c.keepOnClose)
	if c.own != nil {
		c.own.Close() // idempotent
	}
	return err
}

// ID returns the client's UUID: the first part of every owner it makes, as in Redisson.
// A Client that New did not make has none: "".
func (c *Client) ID() string {
	if c.made() == nil {
		return ""
	}
	return c.core.ID
}

// Lock returns the reentrant mutex named name. The name is the lock's Redis key. Options
// apply to every acquisition through the returned Mutex. An invalid name is reported by
// the Mutex's methods (ErrInvalidName), so Lock never fails.
func (c *Client) Lock(name string, opts ...rlock.Option) *rlock.Mutex {
	return (*rlock.Mutex)(engine.New(c.made(), engine.Plain, name, lockopt.Merge(&lockopt.Settings{}, opts)))
}

// FairLock returns the fair (FIFO) reentrant mutex named name: waiters get the lock in the
// order they arrived. Options are those of package fairlock and package rlock.
func (c *Client) FairLock(name string, opts ...fairlock.Option) *fairlock.Mutex {
	return (*fairlock.Mutex)(engine.New(c.made(), engine.Fair, name, lockopt.Merge(&lockopt.Settings{}, opts)))
}

// RWLock returns the reentrant read-write lock named name, with Redisson's RReadWriteLock
// layout. Options are those of package rwlock and package rlock.
func (c *Client) RWLock(name string, opts ...rwlock.Option) *rwlock.RWMutex {
	return (*rwlock.RWMutex)(engine.NewRW(c.made(), name, lockopt.Merge(&lockopt.Settings{}, opts)))
}

// SpinLock returns the reentrant spin lock named name: rlock's data (Redisson's RSpinLock),
// whose waiters try again after a back-off instead of subscribing to a channel. Options
// are those of package spinlock and package rlock.
func (c *Client) SpinLock(name string, opts ...spinlock.Option) *spinlock.Mutex {
	return (*spinlock.Mutex)(engine.New(c.made(), engine.Spin, name, lockopt.Merge(&lockopt.Settings{}, opts)))
}

// MultiLock returns the locks of members as one lock, all or nothing (Redisson's
// RedissonMultiLock): see package multilock. Make the members with Member, ReadMember and
// WriteMember. A MultiLock of no members, or with a member of an invalid name, fails every
// call.
func (c *Client) MultiLock(members ...multilock.Member) *multilock.MultiLock {
	return (*multilock.MultiLock)(engine.NewMulti(members))
}

// Member makes l a member of a MultiLock.
func Member[L *rlock.Mutex | *fairlock.Mutex | *spinlock.Mutex](l L) multilock.Member {
	return multilock.Member{L: (*engine.Lock)(l)}
}

// ReadMember makes the read side of rw a member of a MultiLock: it takes a read hold.
func ReadMember(rw *rwlock.RWMutex) multilock.Member {
	return multilock.Member{L: (*engine.RW)(rw).Read()}
}

// WriteMember makes the write side of rw a member of a MultiLock: it takes the write hold.
func WriteMember(rw *rwlock.RWMutex) multilock.Member {
	return multilock.Member{L: (*engine.RW)(rw).Write()}
}

// Semaphore returns the semaphore named name, with Redisson's RSemaphore layout. The name is
// its Redis key. An invalid name is reported by the semaphore's methods (ErrInvalidName).
func (c *Client) Semaphore(name string) *semaphore.Weighted {
	return (*semaphore.Weighted)(permits.New(c.made(), lockerr.OrZero(c).gates, name))
}

// CountDownLatch returns the count-down latch named name, with Redisson's RCountDownLatch
// layout. The name is its Redis key. An invalid name is reported by the latch's methods
// (ErrInvalidName).
func (c *Client) CountDownLatch(name string) *countdown.Latch {
	return (*countdown.Latch)(icountdown.New(c.made(), name))
}

// PubSubStats returns a snapshot of the client's waiting activity: subscriptions, parked
// waiters, wake-up messages, and waits ended by messages or by their TTL bound.
func (c *Client) PubSubStats() pubsub.Stats {
	if c.made() == nil {
		return pubsub.Stats{}
	}
	return c.core.Hub.Stats()
}

// WatchdogStats returns a snapshot of the client's lease renewals: holds known, renewal
// rounds, script calls and round trips, renewals, and holds found lost.
func (c *Client) WatchdogStats() watchdog.Stats {
	if c.made() == nil {
		return watchdog.Stats{}
	}
	return c.core.Watchdog.Stats()
}

// made returns the client's core, or nil for a Client that New did not make (nil, or a
// zero value): the locks, semaphores and latches made on it then fail every call with
// ErrNotMade.
func (c *Client) made() *core.Client { return lockerr.OrZero(c).core }

// NewOwner returns a context that carries a new owner, whatever ctx carries: every lock
// taken with it, or with a context derived from it, is taken by that owner (on each client
// its own "<id>:<n>"), and it can unlock them as the contexts Lock returns can. Use it for
// a worker spawned from a context that already holds locks, which would otherwise re-enter
// them, or to keep an owner that several calls share.
//
// A hold lives as long as some context can name its owner: once every context that
// carries it is unreachable without an Unlock, the hold is abandoned (see Client.Lock).
// A nil ctx is taken as context.Background().
func NewOwner(ctx context.Context) context.Context { return owner.Fresh(ctx) }
