package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/bsm/redislock"
	"github.com/go-redsync/redsync/v4"
	"github.com/go-redsync/redsync/v4/redis/goredis/v9"
	goredislib "github.com/redis/go-redis/v9"
	"github.com/redis/rueidis"
	"github.com/redis/rueidis/rueidislock"

	"github.com/relock-go/relock"
	"github.com/relock-go/relock/internal/keys"
	"github.com/relock-go/relock/internal/script"
)

// locker is one per-goroutine handle on one key. Lock waits until the lock is held or ctx
// ends; the returned func releases it.
type locker interface {
	Lock(ctx context.Context) (unlock func() error, err error)
}

// instance is one library's client for one run of one scenario.
type instance interface {
	// Handle returns a handle on key for one goroutine.
	Handle(key string) locker
	Close()
}

// library is one contender: how to make a client, and what settings it runs with.
type library struct {
	name     string
	settings string
	open     func(e endpoint) (instance, error)
}

func libraries() []library {
	return []library{
		{"relock", "rlock.Mutex, default options (30 s lease renewed by the watchdog; waiters woken by pub/sub, or handed the lock by an unlock of their own process)", openRelock(false)},
		{"relock fair", "fairlock.Mutex (FIFO), default options; the unlock wakes the head of the queue only", openRelock(true)},
		{"raw scripts", "relock's acquire/unlock Lua scripts sent straight through rueidis; on a busy lock, sleep 1 ms and retry", openRaw},
		{"redsync", "v4, go-redis v9 pool, defaults (8 s expiry, 32 tries, 50-250 ms random retry delay)", openRedsync(false)},
		{"redsync tuned", "as redsync, with WithRetryDelay(1 ms) and WithTries(1e6)", openRedsync(true)},
		{"redislock", "go-redis v9, 30 s TTL; LinearBackoff(100 ms) retry (its default Obtain does not retry, so it could not wait at all)", openRedislock(100 * time.Millisecond)},
		{"redislock tuned", "as redislock, with LinearBackoff(1 ms) retry", openRedislock(time.Millisecond)},
		{"rueidislock", "defaults: client-side caching on (waiters woken by invalidations), KeyMajority 2 (3 keys per lock), 5 s validity extended every 2.5 s", openRueidislock(false)},
		{"rueidislock nocache", "as rueidislock, with DisableCache (waiters retry every TryNextAfter, 20 ms)", openRueidislock(true)},
	}
}

// --- relock

type relockInst struct {
	rc   rueidis.Client
	c    *relock.Client
	fair bool
}

func openRelock(fair bool) func(endpoint) (instance, error) {
	return func(e endpoint) (instance, error) {
		rc, c, err := dialRelock(e)
		if err != nil {
			return nil, err
		}
		return &relockInst{rc: rc, c: c, fair: fair}, nil
	}
}

// dialRelock makes a rueidis client of e and a relock client on it, with relock's defaults.
func dialRelock(e endpoint) (rueidis.Client, *relock.Client, error) {
	rc, err := rueidis.NewClient(e.rueidisOption())
	if err != nil {
		return nil, nil, err
	}
	c, err := relock.New(rc)
	if err != nil {
		rc.Close()
		return nil, nil, err
	}
	return rc, c, nil
}

func (r *relockInst) Handle(key string) locker {
	if r.fair {
		mu := r.c.FairLock(key)
		return relockHandle{func(ctx context.Context) (context.Context, error) { return mu.Lock(ctx) }, mu.Unlock}
	}
	mu := r.c.Lock(key)
	return relockHandle{func(ctx context.Context) (context.Context, error) { return mu.Lock(ctx) }, mu.Unlock}
}

func (r *relockInst) Close() { _ = r.c.Close(); r.rc.Close() }

// relockHandle is what rlock.Mutex and fairlock.Mutex have in common here.
type relockHandle struct {
	lock   func(ctx context.Context) (context.Context, error)
	unlock func(ctx context.Context) error
}

func (h relockHandle) Lock(ctx context.Context) (func() error, error) {
	// ctx carries no owner: every acquisition is a new owner, as a new request would be.
	held, err := h.lock(ctx)
	if err != nil {
		return nil, err
	}
	return func() error { return h.unlock(held) }, nil
}

// --- raw scripts through rueidis

var (
	rawSeq atomic.Int64
	// rawID makes raw owners unique across the worker processes as well: an owner that
	// two processes shared would re-enter the other's hold.
	rawID = strconv.Itoa(os.Getpid()) + "-" + strconv.FormatInt(time.Now().UnixNano(), 36)
)

type rawInst struct{ rc rueidis.Client }

func openRaw(e endpoint) (instance, error) {
	rc, err := rueidis.NewClient(e.rueidisOption())
	if err != nil {
		return nil, err
	}
	return &rawInst{rc: rc}, nil
}

func (r *rawInst) Close() { r.rc.Close() }

func (r *rawInst) Handle(key string) locker {
	// Keys as relock lays them out.
	names := keys.Of(key)
	return &rawHandle{rc: r.rc, key: key,
		channel: names.Channel,
		wake:    names.Wake,
		owner:   "raw:" + rawID + ":" + strconv.FormatInt(rawSeq.Add(1), 10)}
}

type rawHandle struct {
	rc                 rueidis.Client
	key, channel, wake string
	owner              string
}

func (h *rawHandle) Lock(ctx context.Context) (func() error, error) {
	for {
		// TryLock's arguments: no wake code, since this locker polls.
		v, err := script.AcquireReply(nil, script.RLockAcquire().Exec(ctx, h.rc, []string{h.key, h.wake}, []string{"30000", h.owner, "", "", h.channel, "publish"}))
		if err != nil {
			return nil, err
		}
		if len(v) > 0 && v[0] == 1 {
			break
		}
		t := time.NewTimer(time.Millisecond)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, ctx.Err()
		case <-t.C:
		}
	}
	// The handle holds the lock once: the unlock expects a count of one.
	return func() error {
		return script.RLockUnlock().Exec(context.Background(), h.rc, []string{h.key, h.channel, h.wake},
			[]string{"0", h.owner, "1", "publish"}).Error()
	}, nil
}

// --- redsync

type redsyncInst struct {
	gc    *goredislib.Client
	rs    *redsync.Redsync
	tuned bool
}

func openRedsync(tuned bool) func(endpoint) (instance, error) {
	return func(e endpoint) (instance, error) {
		gc := goredislib.NewClient(e.goredisOptions())
		return &redsyncInst{gc: gc, rs: redsync.New(goredis.NewPool(gc)), tuned: tuned}, nil
	}
}

func (r *redsyncInst) Close() { _ = r.gc.Close() }

func (r *redsyncInst) Handle(key string) locker {
	var opts []redsync.Option
	if r.tuned {
		opts = append(opts, redsync.WithRetryDelay(time.Millisecond), redsync.WithTries(1_000_000))
	}
	return redsyncHandle{r.rs.NewMutex(key, opts...)}
}

type redsyncHandle struct{ m *redsync.Mutex }

func (h redsyncHandle) Lock(ctx context.Context) (func() error, error) {
	if err := h.m.LockContext(ctx); err != nil {
		return nil, err
	}
	return func() error {
		ok, err := h.m.UnlockContext(context.Background())
		if err == nil && !ok {
			err = errors.New("redsync: unlock found the lock not held")
		}
		return err
	}, nil
}

// --- bsm/redislock

type redislockInst struct {
	gc      *goredislib.Client
	c       *redislock.Client
	backoff time.Duration
}

func openRedislock(backoff time.Duration) func(endpoint) (instance, error) {
	return func(e endpoint) (instance, error) {
		gc := goredislib.NewClient(e.goredisOptions())
		return &redislockInst{gc: gc, c: redislock.New(gc), backoff: backoff}, nil
	}
}

func (r *redislockInst) Close() { _ = r.gc.Close() }

func (r *redislockInst) Handle(key string) locker { return redislockHandle{r, key} }

type redislockHandle struct {
	r   *redislockInst
	key string
}

func (h redislockHandle) Lock(ctx context.Context) (func() error, error) {
	l, err := h.r.c.Obtain(ctx, h.key, 30*time.Second,
		&redislock.Options{RetryStrategy: redislock.LinearBackoff(h.r.backoff)})
	if err != nil {
		return nil, err
	}
	return func() error { return l.Release(context.Background()) }, nil
}

// --- rueidislock

type rueidislockInst struct{ l rueidislock.Locker }

func openRueidislock(nocache bool) func(endpoint) (instance, error) {
	return func(e endpoint) (instance, error) {
		opt := e.rueidisOption()
		opt.DisableCache = nocache
		l, err := rueidislock.NewLocker(rueidislock.LockerOption{ClientOption: opt})
		if err != nil {
			return nil, fmt.Errorf("rueidislock: %w", err)
		}
		return &rueidislockInst{l: l}, nil
	}
}

func (r *rueidislockInst) Close()                   { r.l.Close() }
func (r *rueidislockInst) Handle(key string) locker { return rueidislockHandle{r.l, key} }

type rueidislockHandle struct {
	l   rueidislock.Locker
	key string
}

func (h rueidislockHandle) Lock(ctx context.Context) (func() error, error) {
	_, cancel, err := h.l.WithContext(ctx, h.key)
	if err != nil {
		return nil, err
	}
	return func() error { cancel(); return nil }, nil
}

// libIndex returns the index of the library called name in libraries(); it panics on a
// name that is not there, which is a mistake in this program.
func libIndex(name string) int {
	for i, l := range libraries() {
		if l.name == name {
			return i
		}
	}
	panic("bench: no library " + name)
}
