package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/rueidis"

	"github.com/relock-go/relock"
)

// --- Many waiters: thousands of relock waiters parked on one held lock
//
// A holder in this process takes the lock and keeps it for manyLeases leases, renewed by
// its watchdog; worker processes park waiters on it. What is counted is the calls the
// waiters' processes send while they wait (a parked waiter should cost nothing but its
// share of one subscription), and then whether every waiter gets the lock once it is let go.

const (
	manyLeases = 3
	// manyLease is the watchdog timeout of the holder's and the waiters' clients: short, so
	// that three leases pass in seconds.
	manyLease = 2 * time.Second
	// manySettle is how long the waiters have to park before the count starts.
	manySettle = time.Second
	// manyDrain bounds the wait of every waiter, counted from the release.
	manyDrain = 60 * time.Second
)

type manyResult struct {
	procs, waiters int // processes, and waiters in each
	lease          time.Duration
	parked         map[string]int64 // calls sent by the waiters' processes in the window, by command
	acquired       int64            // waiters that got the lock
	errors         int64
	drain          time.Duration // release to the last waiter's acquisition
	holderLost     bool          // the holder's hold ended before its release
}

// callsPerProcLease is the parked waiters' calls per process per lease.
func (m manyResult) callsPerProcLease() float64 {
	var n int64
	for _, v := range m.parked {
		n += v
	}
	return per(float64(n), int64(m.procs)*manyLeases)
}

// parkResult is what a park worker prints.
type parkResult struct {
	Parked   map[string]int64 `json:"parked"` // sent in [From, Until)
	Acquired int64            `json:"acquired"`
	Errors   int64            `json:"errors"`
	Last     int64            `json:"last"` // wall clock of its last acquisition, ns
}

// parkWorker is a worker process of the many-waiters run: w.Waiters goroutines each ask for
// the lock w.Key once from w.Start, take it, release it at once, and give up at w.End.
func parkWorker(w workerSpec) error {
	sent := newSentCommands()
	rc, err := rueidis.NewClient(endpoint{addr: w.Addr, sent: sent}.rueidisOption())
	if err != nil {
		return err
	}
	defer rc.Close()
	c, err := relock.New(rc, relock.WithWatchdogTimeout(time.Duration(w.Lease)))
	if err != nil {
		return err
	}
	defer c.Close()
	if err := warm(&relockInst{rc: rc, c: c}, fmt.Sprintf("%s:warm:%d", w.Key, w.Base)); err != nil {
		return err
	}
	time.Sleep(time.Until(time.Unix(0, w.Start)))
	ctx, cancel := context.WithDeadline(context.Background(), time.Unix(0, w.End))
	defer cancel()
	var (
		wg             sync.WaitGroup
		acquired, errs atomic.Int64
		lastMu         sync.Mutex
		last           int64
	)
	mu := c.Lock(w.Key)
	for range w.Waiters {
		wg.Add(1)
		go func() {
			defer wg.Done()
			held, err := mu.Lock(ctx)
			if err != nil {
				errs.Add(1)
				return
			}
			now := time.Now().UnixNano()
			if err := mu.Unlock(held); err != nil {
				errs.Add(1)
				return
			}
			acquired.Add(1)
			lastMu.Lock()
			last = max(last, now)
			lastMu.Unlock()
		}()
	}
	time.Sleep(time.Until(time.Unix(0, w.From)))
	s0 := sent.snapshot()
	time.Sleep(time.Until(time.Unix(0, w.Until)))
	parked := minus(sent.snapshot(), s0)
	wg.Wait()
	return json.NewEncoder(os.Stdout).Encode(parkResult{Parked: parked, Acquired: acquired.Load(), Errors: errs.Load(), Last: last})
}

// runManyWaiters parks procs×waiters relock waiters on one lock held for manyLeases leases,
// then releases it.
func runManyWaiters(addr string, procs, waiters int) (manyResult, error) {
	res := manyResult{procs: procs, waiters: waiters, lease: manyLease, parked: map[string]int64{}}
	relockLib := libIndex("relock")
	rc, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{addr}})
	if err != nil {
		return res, err
	}
	defer rc.Close()
	c, err := relock.New(rc, relock.WithWatchdogTimeout(manyLease))
	if err != nil {
		return res, err
	}
	defer c.Close()
	const key = "many"
	hctx, hcancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer hcancel()
	mu := c.Lock(key)
	held, err := mu.Lock(hctx)
	if err != nil {
		return res, fmt.Errorf("holder: %w", err)
	}
	// Worker processes start and warm up within the first second and a half.
	start := time.Now().Add(1500 * time.Millisecond)
	from := start.Add(manySettle)
	until := from.Add(manyLeases * manyLease)
	end := until.Add(manyDrain)
	specs := make([]workerSpec, procs)
	for p := range specs {
		specs[p] = workerSpec{Mode: "park", Lib: relockLib, Addr: addr, Key: key, Base: p, Waiters: waiters,
			Lease: int64(manyLease), Start: start.UnixNano(), From: from.UnixNano(), Until: until.UnixNano(), End: end.UnixNano()}
	}
	ctx, cancel := context.WithDeadline(context.Background(), end.Add(30*time.Second))
	defer cancel()
	var released time.Time
	var uerr error
	outs, err := children(ctx, specs, func() {
		time.Sleep(time.Until(until))
		res.holderLost = held.Err() != nil
		released = time.Now()
		uerr = mu.Unlock(held)
	})
	if err != nil {
		return res, err
	}
	if uerr != nil && !res.holderLost {
		return res, fmt.Errorf("holder's unlock: %w", uerr)
	}
	var last int64
	for p, out := range outs {
		var pr parkResult
		if err := json.Unmarshal(out, &pr); err != nil {
			return res, fmt.Errorf("worker %d output: %w", p, err)
		}
		for name, n := range pr.Parked {
			res.parked[name] += n
		}
		res.acquired += pr.Acquired
		res.errors += pr.Errors
		last = max(last, pr.Last)
	}
	if last > 0 {
		res.drain = time.Unix(0, last).Sub(released)
	}
	return res, nil
}

// manyName is the figure's name in the report: "5,000 waiters (4 processes × 1,250)".
func (m manyResult) manyName() string {
	return fmt.Sprintf("%s waiters (%d processes × %s)", thousands(m.procs*m.waiters), m.procs, thousands(m.waiters))
}

// thousands writes n with a comma between groups of three digits.
func thousands(n int) string {
	s := strconv.Itoa(n)
	for i := len(s) - 3; i > 0 && s[i-1] != '-'; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}
