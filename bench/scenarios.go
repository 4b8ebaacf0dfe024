package main

import (
	"cmp"
	"context"
	"fmt"
	"math"
	"runtime"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/redis/rueidis"
	"golang.org/x/sync/errgroup"

	"github.com/relock-go/relock"
)

const (
	s1Workers  = 64
	s2Waiters  = 16
	maxSamples = 1 << 18 // per goroutine (S1) or per round (S2): every loop is bounded in count
)

// warm takes and releases a lock once so that scripts are loaded and connections open.
func warm(inst instance, key string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	unlock, err := inst.Handle(key).Lock(ctx)
	if err != nil {
		return fmt.Errorf("warm-up lock: %w", err)
	}
	return unlock()
}

// pause sleeps until ctx ends or d passes.
func pause(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}

// --- S1: uncontended

type s1Round struct {
	serverCPU time.Duration // redis-server's CPU time during the window
	clientCPU time.Duration // this process's CPU time during the window: the library's client side
	cycles    int64
	elapsed   time.Duration
	lat       []time.Duration
	mallocs   uint64
	errors    int64
}

func runS1(lib library, addr string, adm *admin, dur time.Duration, round int) (s1Round, error) {
	inst, err := lib.open(endpoint{addr: addr})
	if err != nil {
		return s1Round{}, err
	}
	defer inst.Close()
	prefix := fmt.Sprintf("s1:%d:%s:", round, lib.name)
	if err := warm(inst, prefix+"warm"); err != nil {
		return s1Round{}, err
	}
	handles := make([]locker, s1Workers)
	for i := range handles {
		handles[i] = inst.Handle(prefix + strconv.Itoa(i))
	}
	var (
		wg     sync.WaitGroup
		cycles atomic.Int64
		errs   atomic.Int64
		lats   = make([][]time.Duration, s1Workers)
		ms     runtime.MemStats
	)
	runtime.GC()
	cpu0, err := adm.cpu(context.Background())
	if err != nil {
		return s1Round{}, err
	}
	runtime.ReadMemStats(&ms)
	m0 := ms.Mallocs
	// Nothing else runs in this process during the window: the previous library's client
	// is closed, and the admin client is idle until the window ends.
	own0 := processCPU()
	start := time.Now()
	end := start.Add(dur)
	ctx, cancel := context.WithDeadline(context.Background(), end)
	defer cancel()
	for i := range s1Workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			lat := make([]time.Duration, 0, 4096)
			for n := 0; n < maxSamples && ctx.Err() == nil; n++ {
				t := time.Now()
				unlock, err := handles[i].Lock(ctx)
				if err != nil {
					if ctx.Err() == nil {
						errs.Add(1)
						pause(ctx, time.Millisecond)
					}
					continue
				}
				if err := unlock(); err != nil {
					errs.Add(1)
					continue
				}
				lat = append(lat, time.Since(t))
			}
			cycles.Add(int64(len(lat)))
			lats[i] = lat
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	own1 := processCPU()
	runtime.ReadMemStats(&ms)
	cpu1, err := adm.cpu(context.Background())
	if err != nil {
		return s1Round{}, err
	}
	r := s1Round{cycles: cycles.Load(), elapsed: elapsed, mallocs: ms.Mallocs - m0, errors: errs.Load(),
		serverCPU: cpu1 - cpu0, clientCPU: own1 - own0}
	for _, l := range lats {
		r.lat = append(r.lat, l...)
	}
	return r, nil
}

// processCPU returns the CPU time this process has used so far, user and system, from
// getrusage(RUSAGE_SELF): every thread, the Go runtime's and the garbage collector's too.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// --- S2/S3: contended, one key

// event is one acquisition, in wall-clock nanoseconds so that processes can be merged.
type event struct {
	Waiter int   `json:"w"`
	Ask    int64 `json:"q"` // lock called
	Acq    int64 `json:"a"` // lock returned
	Leave  int64 `json:"l"` // critical section over, unlock called
	Rel    int64 `json:"r"` // unlock returned; 0 when it failed
}

// window is how long contend runs: dur, and, when handoffs is above 0, beyond dur until the
// lock has passed from one goroutine to another that many times, or until stretch has
// passed, whichever comes first. A slow library's run is so stretched until it has enough
// handoffs for its percentiles to mean something.
type window struct {
	dur, stretch time.Duration
	handoffs     int64
}

// fixed is the window of length d.
func fixed(d time.Duration) window { return window{dur: d} }

// contend runs waiters goroutines, one handle each, on one key for the window w from start;
// waiter ids start at base. With stepAside a goroutine that has unlocked does not ask again
// until another has taken the lock, so that every release is a handoff to a waiter: what
// is measured is how soon a waiting goroutine learns of a release and gets the lock.
func contend(handles []locker, base int, start time.Time, w window, cs time.Duration, stepAside bool) (evs []event, errs int64) {
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		nerr atomic.Int64
	)
	end := start.Add(w.dur)
	ctx, cancel := context.WithDeadline(context.Background(), start.Add(max(w.dur, w.stretch)))
	defer cancel()
	b := newBaton(ctx)
	if w.stretch > w.dur && w.handoffs > 0 {
		// Past end, the window closes as soon as there have been enough handoffs.
		go func() {
			pause(ctx, time.Until(end))
			for ctx.Err() == nil && b.handoffs() < w.handoffs {
				pause(ctx, 5*time.Millisecond)
			}
			cancel()
		}()
	}
	for i, h := range handles {
		wg.Add(1)
		go func() {
			defer wg.Done()
			mine := make([]event, 0, 64) // small: the scale runs have thousands of waiters
			for n := 0; n < maxSamples && ctx.Err() == nil; n++ {
				ask := time.Now().UnixNano()
				unlock, err := h.Lock(ctx)
				e := event{Waiter: base + i, Ask: ask, Acq: time.Now().UnixNano()}
				if err != nil {
					if ctx.Err() == nil {
						nerr.Add(1)
						pause(ctx, time.Millisecond)
					}
					continue
				}
				b.took(i)
				if cs > 0 {
					time.Sleep(cs)
				}
				e.Leave = time.Now().UnixNano()
				if err := unlock(); err != nil {
					nerr.Add(1)
				} else {
					e.Rel = time.Now().UnixNano()
				}
				mine = append(mine, e)
				if stepAside {
					b.waitOther(i)
				}
			}
			mu.Lock()
			evs = append(evs, mine...)
			mu.Unlock()
		}()
	}
	wg.Wait()
	return evs, nerr.Load()
}

// baton tells who took the lock last, for goroutines that step aside after unlocking.
type baton struct {
	ctx    context.Context
	mu     sync.Mutex
	cond   *sync.Cond
	holder int
	passed int64 // times the lock went to another goroutine than its last holder
}

// newBaton returns a baton whose waits end when ctx does.
func newBaton(ctx context.Context) *baton {
	b := &baton{ctx: ctx, holder: -1}
	b.cond = sync.NewCond(&b.mu)
	// Wake the waits at the end of the window; the goroutine ends with ctx.
	go func() {
		<-ctx.Done()
		b.mu.Lock()
		b.cond.Broadcast()
		b.mu.Unlock()
	}()
	return b
}

func (b *baton) took(i int) {
	b.mu.Lock()
	if b.holder >= 0 && b.holder != i {
		b.passed++
	}
	b.holder = i
	b.cond.Broadcast()
	b.mu.Unlock()
}

// handoffs returns how many times the lock has passed from one goroutine to another.
func (b *baton) handoffs() int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.passed
}

// waitOther returns once a goroutine other than i has taken the lock, or ctx has ended.
func (b *baton) waitOther(i int) {
	b.mu.Lock()
	for b.holder == i && b.ctx.Err() == nil {
		b.cond.Wait()
	}
	b.mu.Unlock()
}

// s2Mode is one way of running S2.
type s2Mode struct {
	name      string
	cs        time.Duration
	stepAside bool
}

// s2Modes are the S2 runs in one process: the first two are also run across processes.
var s2Modes = [3]s2Mode{
	{"empty critical section", 0, false},
	{"1 ms critical section", time.Millisecond, false},
	{"handoff: the releaser steps aside", time.Millisecond, true},
}

type s2Round struct {
	acq        int64
	elapsed    time.Duration
	handoffs   []time.Duration  // unlock returned → next holder's lock returned, at least 0
	fromCall   []time.Duration  // unlock called → next holder's lock returned
	commands   map[string]int64 // calls during the window, by command, as the server counts them
	sent       map[string]int64 // commands the clients sent during the window, by command
	perWaiter  []int64
	same       int64 // acquisitions by the waiter that held the lock just before
	overtakes  int64 // acquisitions ahead of a waiter that had asked at least fifoMargin earlier
	errors     int64
	violations int64 // acquisitions that returned before the previous holder left
}

// analyse orders the events of all waiters by acquisition and derives the round's numbers.
func analyse(evs []event, waiters int, elapsed time.Duration, errs int64) s2Round {
	slices.SortFunc(evs, func(a, b event) int { return cmp.Compare(a.Acq, b.Acq) })
	r := s2Round{acq: int64(len(evs)), elapsed: elapsed, perWaiter: make([]int64, waiters), errors: errs,
		overtakes: overtakes(evs)}
	for k, e := range evs {
		if e.Waiter >= 0 && e.Waiter < waiters {
			r.perWaiter[e.Waiter]++
		}
		if k == 0 {
			continue
		}
		prev := evs[k-1]
		if e.Acq < prev.Leave {
			r.violations++
		}
		if e.Waiter == prev.Waiter {
			r.same++
			continue
		}
		if prev.Rel != 0 {
			r.handoffs = append(r.handoffs, time.Duration(max(e.Acq-prev.Rel, 0)))
			r.fromCall = append(r.fromCall, time.Duration(e.Acq-prev.Leave))
		}
	}
	return r
}

// fifoMargin is how much earlier a waiter must have asked for the lock than another for
// the other's getting it first to count as overtaking. The times are the client's: a
// fair lock orders waiters by when their first attempt reaches Redis, which is a round
// trip after the call on a quiet machine, but on a loaded one a goroutine may wait
// milliseconds to run (the handoff p99 above shows how long). The margin is far beyond
// that, so that what is counted is an overtaking the lock allowed, not a scheduling delay.
const fifoMargin = 20 * time.Millisecond

// overtakes counts the acquisitions made while a waiter that had asked at least fifoMargin
// earlier was still waiting: the FIFO violations of a lock that promises first come, first
// served. evs must be sorted by acquisition.
func overtakes(evs []event) int64 {
	byAsk := slices.Clone(evs)
	slices.SortFunc(byAsk, func(a, b event) int { return cmp.Compare(a.Ask, b.Ask) })
	// For each acquisition B: did any event A with A.Ask < B.Ask-margin acquire after B?
	// Walk B in order of Ask, keeping the latest acquisition among the asks far enough
	// before it.
	var n int64
	latest := int64(math.MinInt64)
	j := 0
	for _, b := range byAsk {
		for ; j < len(byAsk) && byAsk[j].Ask < b.Ask-int64(fifoMargin); j++ {
			latest = max(latest, byAsk[j].Acq)
		}
		if latest > b.Acq {
			n++
		}
	}
	return n
}

// commandDelta returns after-before, without INFO: no lock library sends it, and the
// bench's own reads of the server (these counts, its CPU and memory) do.
func commandDelta(before, after map[string]int64) map[string]int64 {
	d := minus(after, before)
	delete(d, "info")
	return d
}

// minus returns after-before, by name.
func minus(after, before map[string]int64) map[string]int64 {
	for name, v := range before {
		after[name] -= v
	}
	return after
}

// runS2 runs waiters goroutines of lib's one client on the key s2:<tag> for the window w.
func runS2(lib library, addr string, adm *admin, waiters int, w window, cs time.Duration, stepAside bool, tag string) (s2Round, error) {
	sent := newSentCommands()
	inst, err := lib.open(endpoint{addr: addr, sent: sent})
	if err != nil {
		return s2Round{}, err
	}
	defer inst.Close()
	key := "s2:" + tag
	if err := warm(inst, key); err != nil {
		return s2Round{}, err
	}
	handles := make([]locker, waiters)
	for i := range handles {
		handles[i] = inst.Handle(key)
	}
	bg := context.Background()
	c0, err := adm.commands(bg)
	if err != nil {
		return s2Round{}, err
	}
	s0 := sent.snapshot()
	start := time.Now()
	evs, errs := contend(handles, 0, start, w, cs, stepAside)
	elapsed := time.Since(start)
	s1 := sent.snapshot()
	c1, err := adm.commands(bg)
	if err != nil {
		return s2Round{}, err
	}
	r := analyse(evs, waiters, elapsed, errs)
	r.commands = commandDelta(c0, c1)
	r.sent = minus(s1, s0)
	return r, nil
}

// --- S5: watchdog, and its cost as holds grow

type s5Result struct {
	holds                         int
	ticks                         uint64
	calls, batches, renewed, lost float64 // per tick
	serverUs, clientUs            float64 // CPU per tick, µs
	memPerHold                    float64 // server bytes per hold
	lockTime                      time.Duration
	holdsLostDuringRun            int
}

// runS5 has one relock client take holds locks and counts its watchdog's work over ticks
// renewal ticks. While it counts, the process does nothing else: its CPU time is the
// watchdog's.
func runS5(addr string, adm *admin, holds int, ticks uint64) (s5Result, error) {
	rc, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{addr}})
	if err != nil {
		return s5Result{}, err
	}
	defer rc.Close()
	c, err := relock.New(rc, relock.WithWatchdogTimeout(3*time.Second))
	if err != nil {
		return s5Result{}, err
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	mem0, err := adm.memory(ctx)
	if err != nil {
		return s5Result{}, err
	}

	const workers = 32
	helds := make([]context.Context, holds)
	// A plain group, not errgroup.WithContext: the holds live on ctx after Wait, and that
	// group's context ends when Wait returns.
	var g errgroup.Group
	start := time.Now()
	for w := range workers {
		g.Go(func() error {
			for i := w; i < holds; i += workers {
				h, err := c.Lock("s5:" + strconv.Itoa(i)).Lock(ctx)
				if err != nil {
					return err
				}
				helds[i] = h
			}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return s5Result{}, err
	}
	lockTime := time.Since(start)
	mem1, err := adm.memory(ctx)
	if err != nil {
		return s5Result{}, err
	}
	wait := func(n uint64) error {
		for c.WatchdogStats().Ticks < n {
			if ctx.Err() != nil {
				return fmt.Errorf("watchdog did not reach %d ticks: %w", n, ctx.Err())
			}
			time.Sleep(5 * time.Millisecond)
		}
		return nil
	}
	// The first tick may pay for loading the script; count from the end of it.
	if err := wait(c.WatchdogStats().Ticks + 1); err != nil {
		return s5Result{}, err
	}
	cpu0, err := adm.cpu(ctx)
	if err != nil {
		return s5Result{}, err
	}
	own0 := processCPU()
	s0 := c.WatchdogStats()
	if err := wait(s0.Ticks + ticks); err != nil {
		return s5Result{}, err
	}
	s1 := c.WatchdogStats()
	own1 := processCPU()
	cpu1, err := adm.cpu(ctx)
	if err != nil {
		return s5Result{}, err
	}
	n := int64(s1.Ticks - s0.Ticks)
	r := s5Result{holds: s1.Holds, ticks: s1.Ticks - s0.Ticks, lockTime: lockTime,
		calls: per(float64(s1.Calls-s0.Calls), n), batches: per(float64(s1.Batches-s0.Batches), n),
		renewed: per(float64(s1.Renewed-s0.Renewed), n), lost: per(float64(s1.Lost-s0.Lost), n),
		serverUs:   per(float64(cpu1-cpu0)/float64(time.Microsecond), n),
		clientUs:   per(float64(own1-own0)/float64(time.Microsecond), n),
		memPerHold: per(float64(mem1-mem0), int64(holds))}
	for _, h := range helds {
		if h.Err() != nil {
			r.holdsLostDuringRun++
		}
	}
	return r, nil
}

// percentile returns the p-th percentile of sorted ds.
func percentile(ds []time.Duration, p float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	return ds[int(float64(len(ds)-1)*p/100)]
}

func sortDurations(ds []time.Duration) { slices.Sort(ds) }
