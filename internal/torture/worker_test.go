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
	"os/signal"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/redis/rueidis"
	"go.uber.org/goleak"

	"github.com/relock-go/relock"
	"github.com/relock-go/relock/fairlock"
	scripts "github.com/relock-go/relock/internal/script"
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
	callTimeout     = 100 * time.Millisecond // relock.WithTimeout
	lockWait        = 5 * time.Second        // bound of one Lock call
	writeTimeout    = time.Second            // bound of one fenced write
	longSection     = 200 * time.Millisecond // one section in a hundred
	// refreshPeriod of the fair lock's waiters and of the read-write lock's waiting
	// writers: an entry of a killed waiter lives two periods, within the wait for keys.
	refreshPeriod = 500 * time.Millisecond
	// entryLife is how long a fair waiter's queue entry lives without a refresh.
	entryLife = 2 * refreshPeriod
	// lingerMax bounds how long a lingering section waits for its context to end: past
	// the lease, which ends any hold's context whose renewals fail, and then some.
	lingerMax = 2*watchdogTimeout + time.Second
)

// Signals from the parent to a worker: lingerSignal asks that the next section to acquire
// (of any kind) linger, waiting for its context to end, so that its hold can be deleted
// behind its back; stopLingerSignal takes the request back.
const (
	lingerSignal     = syscall.SIGUSR1
	stopLingerSignal = syscall.SIGUSR2
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
		mu := c.FairLock(name, rlock.WithFencing(), fairlock.WithRefreshPeriod(refreshPeriod))
		return locker{kind: kind,
			lock:   func(ctx context.Context, _ bool) (context.Context, error) { return mu.Lock(ctx) },
			unlock: func(ctx context.Context, _ bool) error { return mu.Unlock(ctx) },
			token:  mu.Token}
	case kindRW:
		// Writer preference, given to readers and writers alike, keeps a stream of
		// overlapping readers from starving the writers.
		rw := c.RWLock(name, rlock.WithFencing(), rwlock.WithWriterPreference(), rwlock.WithRefreshPeriod(refreshPeriod))
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
// critical section iters times, and beside them semGoroutines that take permits of the
// semaphore until the locks' goroutines are done. When they are done and every client is
// closed, no goroutine of relock or rueidis may be left (goleak); a leak is reported on
// stderr and in the exit code, after the Done record.
func workerMain() int {
	// Before goleak's snapshot: the signal handling goroutines live as long as the process.
	var linger atomic.Bool
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, lingerSignal, stopLingerSignal)
	go func() {
		for s := range sigs {
			linger.Store(s == lingerSignal)
		}
	}()
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
	sp := newSpy(lrc)
	c, err := relock.New(sp, relock.WithWatchdogTimeout(watchdogTimeout), relock.WithTimeout(callTimeout))
	if err != nil {
		rrc.Close()
		lrc.Close()
		fmt.Fprintln(os.Stderr, "torture worker:", err)
		return 2
	}
	base := os.Getenv(envName)
	hist.add(Record{Hello: true, Worker: id, Client: c.ID(), PID: os.Getpid()})

	// The semaphore's goroutines work as long as the locks' do (semaphore_test.go).
	semStop, stopSem := context.WithCancel(context.Background())
	defer stopSem()
	semDone := runSemaphore(semStop, c.Semaphore(lockKey(base, LockSemaphore)), id, hist)

	var wg sync.WaitGroup
	for _, kind := range kinds {
		lk := newLocker(c, base, kind)
		for g := range gs {
			wg.Go(func() {
				for i := range iters {
					// Read-write lock: half the sections read, half write.
					read := kind == kindRW && rand.IntN(2) == 0
					hist.add(section(lk, read, rrc, id, g, i, &sectionEnv{spy: sp, linger: &linger, hist: hist, name: lockKey(base, kind)}))
				}
			})
		}
	}
	wg.Wait()
	stopSem()
	<-semDone
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

// sectionEnv is what a section needs besides its lock: the client's spy, the parent's
// request to linger, the history (for the linger note), and the lock's name.
type sectionEnv struct {
	spy    *spy
	linger *atomic.Bool
	hist   *historyFile
	name   string
}

// section makes one attempt: lock, a fenced write (a read of the counter in a read
// section), unlock. When the parent asked for it, the first section to acquire (with a
// field the spy saw) lingers after acquiring: it notes that in the history and waits (at most lingerMax) for its
// hold's context to end, then goes on (its write may then be a stale holder's).
func section(lk locker, read bool, rrc rueidis.Client, id string, g, i int, env *sectionEnv) Record {
	r := Record{Worker: id, Lock: lk.kind, G: g, I: i}
	if read {
		r.Mode = ModeRead
	}
	log := &attemptLog{}
	ctx, cancel := context.WithTimeout(context.WithValue(context.Background(), attemptKey{}, log), lockWait)
	defer cancel()
	r.Call = time.Now().UnixNano()
	held, err := lk.lock(ctx, read)
	r.Acq = time.Now().UnixNano()
	log.mu.Lock()
	r.Owner, r.Queued = log.field, log.queued
	grantSent, grantToken := log.grantSent, log.grantToken
	log.mu.Unlock()
	if lk.kind != kindFair {
		r.Queued = nil
	}
	if err != nil {
		r.LockErr = err.Error()
		time.Sleep(5 * time.Millisecond)
		return r
	}
	defer env.spy.forget(env.name, r.Owner)
	if !read {
		var known bool
		if r.Token, known = lk.token(held); !known {
			// The hold ended before the section could ask for its token: a worker stopped
			// past its lease while Lock returned, whose watchdog dropped the hold on waking
			// before this goroutine ran. Its token is the one the granting reply carried;
			// 0 would make the history illegal (tokens only grow) and say nothing. A
			// grant adopted after its reply was lost had no reply: its token stays 0,
			// and the model leaves the ended hold out (Operations).
			r.Token = grantToken
		}
	}
	// A hold handed over by an unlock of this process to a waiter that sent no attempt of
	// its own has no field the spy saw (r.Owner is empty): the parent could neither delete
	// that hold by its field nor tell its renewals apart, so it does not linger; the next
	// section does.
	if r.Owner != "" && env.linger.CompareAndSwap(true, false) {
		r.Lingered = true
		r.LingerFrom = time.Now().UnixNano()
		if dl, ok := ctx.Deadline(); ok {
			r.Bound = dl.UnixNano()
		}
		env.hist.add(Record{Linger: true, Worker: id, Lock: lk.kind, Mode: r.Mode, G: g, I: i, Owner: r.Owner, Acq: r.Acq})
		t := time.NewTimer(lingerMax)
		select {
		case <-held.Done():
			r.LingerDone = time.Now().UnixNano()
			r.LingerLost = errors.Is(context.Cause(held), relock.ErrLeaseLost)
		case <-t.C:
		}
		t.Stop()
		r.Basis, r.Gone = env.spy.renewals(env.name, r.Owner)
		r.Basis = max(r.Basis, grantSent)
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
		r.Lost = errors.Is(context.Cause(held), relock.ErrLeaseLost)
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

// attemptKey carries a Lock call's attemptLog in its context, down to the spy: relock
// passes the caller's context values on to its Redis calls.
type attemptKey struct{}

// attemptLog is what the spy saw of one Lock call's acquire scripts.
type attemptLog struct {
	mu        sync.Mutex
	field     string     // the hash field the scripts were sent for
	queued    [][2]int64 // {sent, reply} of each attempt answered "wait"
	grantSent int64      // when the attempt answered "granted" was sent
	// grantToken is the granting reply's fencing token (its third value): the section's
	// token when the hold ended before the section could ask for it.
	grantToken int64
}

// spy is the worker's Redis client as relock sees it: it passes every call through and
// notes, without changing anything, what the history needs to know from the lock's own
// traffic: each acquire script a section's Lock sends and its answer (for the fair
// order), each renewal the watchdog sends and its answer per hold (for holds deleted
// behind their holders' backs), and each acquire script a semaphore section's Acquire
// sends and its answer (for the permits a section may hold: semaphore_test.go).
type spy struct {
	rueidis.Client
	mu      sync.Mutex
	renewed map[string]*renewLog // by lock name and field
}

// renewLog is what renewals said about one hold: ok is when the latest request that found
// it in Redis was sent, before gone, when the first reply that found it gone came.
type renewLog struct{ ok, gone int64 }

// Scripts the spy recognises, by SHA1 (EVALSHA) and by source (EVAL).
const (
	roleAcquire = 1 + iota
	roleRenew
	roleRenewRW
	roleSemAcquire
)

var scriptRoles = func() map[string]int {
	m := map[string]int{}
	for _, s := range []*scripts.Script{scripts.RLockAcquire(), scripts.FairAcquire(), scripts.RWLockReadAcquire(), scripts.RWLockWriteAcquire()} {
		m[s.SHA1], m[s.Source] = roleAcquire, roleAcquire
	}
	m[scripts.RLockRenew().SHA1], m[scripts.RLockRenew().Source] = roleRenew, roleRenew
	m[scripts.RWLockRenew().SHA1], m[scripts.RWLockRenew().Source] = roleRenewRW, roleRenewRW
	m[scripts.SemaphoreAcquire().SHA1], m[scripts.SemaphoreAcquire().Source] = roleSemAcquire, roleSemAcquire
	return m
}()

func newSpy(rc rueidis.Client) *spy { return &spy{Client: rc, renewed: map[string]*renewLog{}} }

// script returns the role of a script call, with its keys and arguments.
func script(args []string) (role int, keys, argv []string) {
	if len(args) < 3 || (!strings.EqualFold(args[0], "EVALSHA") && !strings.EqualFold(args[0], "EVAL")) {
		return 0, nil, nil
	}
	n, err := strconv.Atoi(args[2])
	if err != nil || 3+n > len(args) {
		return 0, nil, nil
	}
	return scriptRoles[args[1]], args[3 : 3+n], args[3+n:]
}

func (s *spy) Do(ctx context.Context, cmd rueidis.Completed) rueidis.RedisResult {
	if sec, _ := ctx.Value(semKey{}).(*semSection); sec != nil {
		if role, _, argv := script(cmd.Commands()); role == roleSemAcquire {
			return sec.acquireScript(ctx, s.Client, cmd, argv)
		}
	}
	log, _ := ctx.Value(attemptKey{}).(*attemptLog)
	if log == nil {
		return s.Client.Do(ctx, cmd)
	}
	role, _, argv := script(cmd.Commands())
	if role != roleAcquire || len(argv) < 2 {
		return s.Client.Do(ctx, cmd)
	}
	field := strings.Clone(argv[1]) // every acquire script takes the hold's field second
	sent := time.Now().UnixNano()
	res := s.Client.Do(ctx, cmd)
	got := time.Now().UnixNano()
	v, err := scripts.AcquireReply(nil, res)
	log.mu.Lock()
	defer log.mu.Unlock()
	log.field = field
	if err == nil && len(v) > 0 {
		switch v[0] {
		case 0:
			log.queued = append(log.queued, [2]int64{sent, got})
		case 1:
			log.grantSent = sent
			if len(v) > 2 {
				log.grantToken = v[2]
			}
		}
	}
	return res
}

func (s *spy) DoMulti(ctx context.Context, multi ...rueidis.Completed) []rueidis.RedisResult {
	type renewal struct {
		i           int
		check       bool // "0" for the lease: checked, not extended
		names, flds []string
	}
	var rs []renewal
	for i := range multi {
		role, keys, argv := script(multi[i].Commands())
		if role != roleRenew && role != roleRenewRW || len(argv) < 1 {
			continue
		}
		step := 1
		if role == roleRenewRW {
			step = 2 // each lock's hash, then its key prefix
		}
		r := renewal{i: i, check: argv[0] == "0"}
		for k := 0; k < len(keys); k += step {
			r.names = append(r.names, strings.Clone(keys[k]))
		}
		for _, f := range argv[1:] {
			r.flds = append(r.flds, strings.Clone(f))
		}
		rs = append(rs, r)
	}
	sent := time.Now().UnixNano()
	res := s.Client.DoMulti(ctx, multi...)
	got := time.Now().UnixNano()
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, r := range rs {
		v, err := res[r.i].AsIntSlice()
		if err != nil || len(v) != len(r.names) || len(v) != len(r.flds) {
			continue
		}
		for j, ok := range v {
			k := r.names[j] + "\x00" + r.flds[j]
			l := s.renewed[k]
			if l == nil {
				l = &renewLog{}
				s.renewed[k] = l
			}
			switch {
			case l.gone != 0:
			case ok == 1 && !r.check:
				l.ok = max(l.ok, sent)
			case ok == 1:
			default:
				l.gone = got
			}
		}
	}
	return res
}

// renewals returns what the renewals said of the hold of name by field: when the latest
// one that found it was sent, and when the first reply that found it gone came (0: none).
func (s *spy) renewals(name, field string) (ok, gone int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if l := s.renewed[name+"\x00"+field]; l != nil {
		return l.ok, l.gone
	}
	return 0, 0
}

// forget drops what the spy knows of a hold whose section is over.
func (s *spy) forget(name, field string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.renewed, name+"\x00"+field)
}
