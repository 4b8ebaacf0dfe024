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

	"github.com/relock-go/relock"
	"github.com/relock-go/relock/rlock"
)

// Environment of a worker process: the test binary run again by the parent.
const (
	envWorker  = "RELOCK_TORTURE_WORKER" // the worker's id; set only in workers
	envLock    = "RELOCK_TORTURE_LOCK"   // the lock server, through the worker's proxy
	envRes     = "RELOCK_TORTURE_RES"    // the resource server holding the fenced counter
	envHistory = "RELOCK_TORTURE_HISTORY"
	envName    = "RELOCK_TORTURE_NAME"
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
)

// Keys of the resource server.
const (
	counterKey = "torture:counter"
	tokenKey   = "torture:token"
)

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

// workerMain runs M goroutines that each enter the critical section iters times.
func workerMain() int {
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
	defer lrc.Close()
	rrc, err := rueidis.NewClient(workerOption(os.Getenv(envRes)))
	if err != nil {
		fmt.Fprintln(os.Stderr, "torture worker: resource client:", err)
		return 2
	}
	defer rrc.Close()
	c, err := relock.New(lrc, relock.WithWatchdogTimeout(watchdogTimeout), relock.WithTimeout(callTimeout))
	if err != nil {
		fmt.Fprintln(os.Stderr, "torture worker:", err)
		return 2
	}
	defer c.Close()
	mu := c.Lock(os.Getenv(envName), rlock.WithFencing())
	hist.add(Record{Hello: true, Worker: id, Client: c.ID(), PID: os.Getpid()})

	var wg sync.WaitGroup
	for g := range gs {
		wg.Go(func() {
			for i := range iters {
				hist.add(section(mu, rrc, id, g, i))
			}
		})
	}
	wg.Wait()
	hist.add(Record{Done: true, Worker: id})
	return 0
}

// section makes one attempt: lock, a fenced write, unlock.
func section(mu *rlock.Mutex, rrc rueidis.Client, id string, g, i int) Record {
	r := Record{Worker: id, G: g, I: i}
	ctx, cancel := context.WithTimeout(context.Background(), lockWait)
	defer cancel()
	r.Call = time.Now().UnixNano()
	held, err := mu.Lock(ctx)
	r.Acq = time.Now().UnixNano()
	if err != nil {
		r.LockErr = err.Error()
		time.Sleep(5 * time.Millisecond)
		return r
	}
	r.Token, _ = mu.Token(held)
	// Mostly short sections, and now and then a long one, so that a fault aimed at the
	// holder often lands inside a section and its write reaches the resource late.
	if rand.IntN(100) == 0 {
		time.Sleep(longSection)
	} else {
		time.Sleep(time.Duration(rand.IntN(300)) * time.Microsecond)
	}
	r.Write = write(rrc, r.Token, &r)
	r.Live = held.Err() == nil
	r.End = time.Now().UnixNano()
	if !r.Live {
		r.Cause = fmt.Sprint(context.Cause(held))
	}
	err = mu.Unlock(held)
	r.Rel = time.Now().UnixNano()
	r.UnlockOK = err == nil
	if err != nil {
		r.Unlock = err.Error()
	}
	return r
}

// write is the critical section's effect: the fenced counter, written whatever the
// hold's context says, so that stale holders reach the resource and are turned away.
func write(rrc rueidis.Client, token int64, r *Record) string {
	ctx, cancel := context.WithTimeout(context.Background(), writeTimeout)
	defer cancel()
	vs, err := fencedWrite.Exec(ctx, rrc, []string{counterKey, tokenKey}, []string{strconv.FormatInt(token, 10)}).AsIntSlice()
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
