//go:build linux

package torture

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"strconv"
	"sync"
	"time"

	"github.com/redis/rueidis"
	"go.uber.org/goleak"

	"github.com/relock-go/relock"
	"github.com/relock-go/relock/fairlock"
	"github.com/relock-go/relock/rlock"
	"github.com/relock-go/relock/rwlock"
)

// Environment of a worker process: the test binary run again by the parent.
const (
	envWorker  = "RELOCK_TORTURE_WORKER" // the worker's id; set only in workers
	envLock    = "RELOCK_TORTURE_LOCK"   // the lock server, through the worker's proxy
	envRes     = "RELOCK_TORTURE_RES"    // the resource server holding the fenced counters
	envHistory = "RELOCK_TORTURE_HISTORY"
	envName    = "RELOCK_TORTURE_NAME" // the locks' base name; lockKey appends the kind
	envGs      = "RELOCK_TORTURE_GOROUTINES"
	envIters   = "RELOCK_TORTURE_ITERS"
)

// Torture parameters shared by parent and workers.
const (
	watchdogTimeout = 1500 * time.Millisecond
	callTimeout     = 100 * time.Millisecond // relock.WithTimeout: latches live 2×
	lockWait        = 5 * time.Second        // bound of one Lock call
	writeTimeout    = time.Second            // bound of one fenced write
	longSection     = 200 * time.Millisecond // one section in a hundred
	// refreshPeriod of the fair lock's waiters and of the read-write lock's waiting
	// writers: an entry of a killed waiter lives two periods, within the wait for keys.
	refreshPeriod = 500 * time.Millisecond
)

// The kinds of lock the workers take, each on a lock of its own (lockKey) with a fenced
// counter of its own: the reentrant mutex, the fair lock, and the read-write lock, whose
// sections are read sections or write sections at random (only write sections write).
const (
	kindRLock = "rlock"
	kindFair  = "fair"
	kindRW    = "rwlock"
)

var kinds = []string{kindRLock, kindFair, kindRW}

// lockKey is the name (and key) of the lock of kind.
func lockKey(base, kind string) string { return base + ":" + kind }

// Keys of the resource server: the fenced counter of each kind, and the highest token it
// accepted.
func counterKey(kind string) string { return "torture:counter:" + kind }
func tokenKey(kind string) string   { return "torture:token:" + kind }

// fencedWrite rejects a token lower than the highest accepted one; otherwise it records
// the token and counts the write. It replies {1, counter, token} or {0, 0, last}.
var fencedWrite = rueidis.NewLuaScript(`
local last = tonumber(redis.call('GET', KEYS[2]) or '0')
local tok = tonumber(ARGV[1])
if tok < last then return {0, 0, last} end
redis.call('SET', KEYS[2], ARGV[1])
return {1, redis.call('INCR', KEYS[1]), tok}
`)

// historyFile appends JSON lines, each written whole with one write(2), so a worker
// killed at any moment leaves complete lines behind.
type historyFile struct {
	mu sync.Mutex
	f  *os.File
}

func (h *historyFile) add(r Record) {
	b, err := json.Marshal(r)
	if err != nil {
		panic(err)
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if _, err := h.f.Write(append(b, '\n')); err != nil {
		fmt.Fprintln(os.Stderr, "torture worker: history:", err)
		os.Exit(2)
	}
}

func workerOption(addr string) rueidis.ClientOption {
	return rueidis.ClientOption{
		InitAddress:       []string{addr},
		DisableCache:      true,
		ForceSingleClient: true,
		Dialer:            net.Dialer{Timeout: time.Second},
	}
}

// locker is one kind of lock as a section takes it.
type locker struct {
	kind   string
	lock   func(context.Context, bool) (context.Context, error) // true: a read hold
	unlock func(context.Context, bool) error
	token  func(context.Context) (int64, bool)
}

func newLocker(c *relock.Client, base, kind string) locker {
	name := lockKey(base, kind)
	switch kind {
	case kindFair:
		mu := c.FairLock(name, fairlock.WithFencing(), fairlock.WithRefreshPeriod(refreshPeriod))
		return locker{kind: kind,
			lock:   func(ctx context.Context, _ bool) (context.Context, error) { return mu.Lock(ctx) },
			unlock: func(ctx context.Context, _ bool) error { return mu.Unlock(ctx) },
			token:  mu.Token}
	case kindRW:
		// Writer preference, given to readers and writers alike, keeps a stream of
		// overlapping readers from starving the writers.
		rw := c.RWLock(name, rwlock.WithFencing(), rwlock.WithWriterPreference(), rwlock.WithRefreshPeriod(refreshPeriod))
		return locker{kind: kind,
			lock: func(ctx context.Context, read bool) (context.Context, error) {
				if read {
					return rw.RLock(ctx)
				}
				return rw.Lock(ctx)
			},
			unlock: func(ctx context.Context, read bool) error {
				if read {
					return rw.RUnlock(ctx)
				}
				return rw.Unlock(ctx)
			},
			token: rw.Token}
	}
	mu := c.Lock(name, rlock.WithFencing())
	return locker{kind: kind,
		lock:   func(ctx context.Context, _ bool) (context.Context, error) { return mu.Lock(ctx) },
		unlock: func(ctx context.Context, _ bool) error { return mu.Unlock(ctx) },
		token:  mu.Token}
}

// workerMain runs, for each kind of lock, M goroutines that each enter that lock's
// critical section iters times. When they are done and every client is closed, no
// goroutine of relock or rueidis may be left (goleak); a leak is reported on stderr and in
// the exit code, after the Done record.
func workerMain() int {
	ignore := goleak.IgnoreCurrent()
	id := os.Getenv(envWorker)
	gs, _ := strconv.Atoi(os.Getenv(envGs))
	iters, _ := strconv.Atoi(os.Getenv(envIters))
	f, err := os.OpenFile(os.Getenv(envHistory), os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		fmt.Fprintln(os.Stderr, "torture worker:", err)
		return 2
	}
	defer f.Close()
	hist := &historyFile{f: f}

	lrc, err := rueidis.NewClient(workerOption(os.Getenv(envLock)))
	if err != nil {
		fmt.Fprintln(os.Stderr, "torture worker: lock client:", err)
		return 2
	}
	rrc, err := rueidis.NewClient(workerOption(os.Getenv(envRes)))
	if err != nil {
		lrc.Close()
		fmt.Fprintln(os.Stderr, "torture worker: resource client:", err)
		return 2
	}
	c, err := relock.New(lrc, relock.WithWatchdogTimeout(watchdogTimeout), relock.WithTimeout(callTimeout))
	if err != nil {
		rrc.Close()
		lrc.Close()
		fmt.Fprintln(os.Stderr, "torture worker:", err)
		return 2
	}
	base := os.Getenv(envName)
	hist.add(Record{Hello: true, Worker: id, Client: c.ID(), PID: os.Getpid()})

	var wg sync.WaitGroup
	for _, kind := range kinds {
		lk := newLocker(c, base, kind)
		for g := range gs {
			wg.Go(func() {
				for i := range iters {
					// Read-write lock: half the sections read, half write.
					read := kind == kindRW && rand.IntN(2) == 0
					hist.add(section(lk, read, rrc, id, g, i))
				}
			})
		}
	}
	wg.Wait()
	_ = c.Close()
	rrc.Close()
	lrc.Close()
	leak := goleak.Find(ignore)
	hist.add(Record{Done: true, Worker: id})
	if leak != nil {
		fmt.Fprintln(os.Stderr, "torture worker: goroutines left after Close:", leak)
		return 3
	}
	return 0
}

// section makes one attempt: lock, a fenced write (a read of the counter in a read
// section), unlock.
func section(lk locker, read bool, rrc rueidis.Client, id string, g, i int) Record {
	r := Record{Worker: id, Lock: lk.kind, G: g, I: i}
	if read {
		r.Mode = ModeRead
	}
	ctx, cancel := context.WithTimeout(context.Background(), lockWait)
	defer cancel()
	r.Call = time.Now().UnixNano()
	held, err := lk.lock(ctx, read)
	r.Acq = time.Now().UnixNano()
	if err != nil {
		r.LockErr = err.Error()
		time.Sleep(5 * time.Millisecond)
		return r
	}
	if !read {
		r.Token, _ = lk.token(held)
	}
	// Mostly short sections, and now and then a long one, so that a fault aimed at the
	// holder often lands inside a section and its write reaches the resource late.
	if rand.IntN(100) == 0 {
		time.Sleep(longSection)
	} else {
		time.Sleep(time.Duration(rand.IntN(300)) * time.Microsecond)
	}
	if read {
		readCounter(rrc, lk.kind)
	} else {
		r.Write = write(rrc, lk.kind, r.Token, &r)
	}
	r.Check = time.Now().UnixNano()
	r.Live = held.Err() == nil
	r.End = time.Now().UnixNano()
	if !r.Live {
		r.Cause = fmt.Sprint(context.Cause(held))
	}
	err = lk.unlock(held, read)
	r.Rel = time.Now().UnixNano()
	r.UnlockOK = err == nil
	if err != nil {
		r.Unlock = err.Error()
	}
	return r
}

// readCounter is a read section's visit to the resource: the counter is read, not
// written, so the section takes as long as a write section.
func readCounter(rrc rueidis.Client, kind string) {
	ctx, cancel := context.WithTimeout(context.Background(), writeTimeout)
	defer cancel()
	_ = rrc.Do(ctx, rrc.B().Get().Key(counterKey(kind)).Build()).Error()
}

// write is the critical section's effect: the fenced counter, written whatever the
// hold's context says, so that stale holders reach the resource and are turned away.
func write(rrc rueidis.Client, kind string, token int64, r *Record) string {
	ctx, cancel := context.WithTimeout(context.Background(), writeTimeout)
	defer cancel()
	vs, err := fencedWrite.Exec(ctx, rrc, []string{counterKey(kind), tokenKey(kind)}, []string{strconv.FormatInt(token, 10)}).AsIntSlice()
	if err == nil && len(vs) != 3 {
		err = errors.New("malformed reply")
	}
	if err != nil {
		r.WriteErr = err.Error()
		return WriteError
	}
	if vs[0] == 1 {
		r.Count = vs[1]
		return WriteAccepted
	}
	r.Last = vs[2]
	return WriteRejected
}
