package main

import (
	"cmp"
	"context"
	"crypto/sha1"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/rueidis"

	"github.com/relock-go/relock"
	"github.com/relock-go/relock/internal/script"
)

// --- Semaphore: relock's semaphore against a polling one
//
// relock's semaphore.Weighted is compared with the semaphore a service writes by hand on
// the same data: a string key holding the available permits, an acquire that takes them
// with a Lua script when there are enough and otherwise sleeps and tries again, and a
// release that is an INCRBY. Both run on rueidis, so what differs is the semaphore, not the
// Redis client.

// semPollDelay is the polling semaphore's sleep between two failed attempts: fixed, as the
// lock bench's "raw scripts" and tuned polling peers sleep 1 ms. It is the shortest sleep a
// hand-written loop commonly uses (a time.Sleep in milliseconds), which gives the polling
// semaphore the shortest wait it can have for a release, and its command count shows
// what that costs.
const semPollDelay = time.Millisecond

// semMaxAttempts bounds a polling acquisition by count as well as by its context: 17
// minutes of 1 ms sleeps.
const semMaxAttempts = 1 << 20

// semCycleMode is one uncontended run: goroutines goroutines on a semaphore of as many
// permits, so that nobody ever waits for a permit; with ownClients each goroutine has a
// client of its own, else they share one.
type semCycleMode struct {
	goroutines int
	ownClients bool
}

func (m semCycleMode) String() string {
	switch {
	case m.goroutines == 1:
		return "1 goroutine"
	case m.ownClients:
		return fmt.Sprintf("%d goroutines, a client each", m.goroutines)
	}
	return fmt.Sprintf("%d goroutines, one client", m.goroutines)
}

var semUncontended = [3]semCycleMode{{1, false}, {8, false}, {8, true}}

// semMode is one contended semaphore run: waiters goroutines in each of procs processes (one
// client each) share permits permits, each holding one for cs. With stepAside (one
// process only) a goroutine that has released does not ask again until another goroutine
// has acquired since its release.
type semMode struct {
	procs, waiters int
	permits        int64
	cs             time.Duration
	stepAside      bool
}

func (m semMode) String() string {
	s := fmt.Sprintf("%d goroutines in %d processes × %d, %d permits, %s critical section", m.procs*m.waiters, m.procs, m.waiters,
		m.permits, csName(m.cs))
	if m.procs == 1 {
		s = fmt.Sprintf("%d goroutines in one process, %d permits, %s critical section", m.waiters, m.permits, csName(m.cs))
	}
	if m.stepAside {
		s += "; the releaser steps aside"
	}
	return s
}

// semModes are the contended runs: 16 goroutines share 4 permits in 4 processes, in 16
// (a client per goroutine), and in one, where the releaser steps aside.
var semModes = [3]semMode{
	{procs: 4, waiters: 4, permits: 4, cs: time.Millisecond},
	{procs: 16, waiters: 1, permits: 4, cs: time.Millisecond},
	{procs: 1, waiters: 16, permits: 4, cs: time.Millisecond, stepAside: true},
}

// semHandle is a semaphore as the runs use it: one permit at a time.
type semHandle interface {
	Acquire(ctx context.Context, n int64) error
	Release(ctx context.Context, n int64) error
}

// semInstance is one semaphore library's client for one run.
type semInstance interface {
	// Init sets key's permits to n unless it has a count already.
	Init(ctx context.Context, key string, n int64) error
	// Semaphore returns the semaphore key; it is safe for concurrent use.
	Semaphore(key string) semHandle
	Close()
}

type semLibrary struct {
	name, settings string
	// scripts names the SHA1s of the library's Lua scripts, for the count of commands sent.
	scripts map[string]string
	open    func(e endpoint) (semInstance, error)
}

func semLibraries() []semLibrary {
	return []semLibrary{
		{"relock", "semaphore.Weighted (Client.Semaphore), default options: the client first in line is woken by the release's PUBLISH on " +
			"redisson_sc:{name}, the next ones on their own channels when they come first; waiters served in arrival order (in a process, in memory; across clients, a queue in Redis)",
			map[string]string{
				script.SemaphoreAcquire().SHA1: "acquire",
				script.SemaphoreRelease().SHA1: "release",
				script.SemaphoreLeave().SHA1:   "leave",
			}, openRelockSem},
		{"polling", fmt.Sprintf("a string of available permits; acquire: a Lua script (GET, and DECRBY when there are enough), "+
			"on failure sleep %v and try again; release: INCRBY. rueidis, default options", semPollDelay),
			map[string]string{pollAcquireSHA: "acquire"}, openPollSem},
	}
}

// --- relock's semaphore

type relockSemInst struct {
	rc rueidis.Client
	c  *relock.Client
}

func openRelockSem(e endpoint) (semInstance, error) {
	rc, c, err := dialRelock(e)
	if err != nil {
		return nil, err
	}
	return &relockSemInst{rc: rc, c: c}, nil
}

func (r *relockSemInst) Init(ctx context.Context, key string, n int64) error {
	_, err := r.c.Semaphore(key).TrySetPermits(ctx, n)
	return err
}

func (r *relockSemInst) Semaphore(key string) semHandle { return r.c.Semaphore(key) }

func (r *relockSemInst) Close() { _ = r.c.Close(); r.rc.Close() }

// --- the polling semaphore

// pollAcquireSrc takes ARGV[1] permits from the count KEYS[1] if it has that many, and
// returns the count left, or -1 when it took nothing.
const pollAcquireSrc = `local v = tonumber(redis.call('get', KEYS[1]) or '0')
if v >= tonumber(ARGV[1]) then return redis.call('decrby', KEYS[1], ARGV[1]) end
return -1`

var (
	pollAcquire    = rueidis.NewLuaScript(pollAcquireSrc)
	pollAcquireSHA = func() string { s := sha1.Sum([]byte(pollAcquireSrc)); return hex.EncodeToString(s[:]) }()
)

type pollSemInst struct{ rc rueidis.Client }

func openPollSem(e endpoint) (semInstance, error) {
	rc, err := rueidis.NewClient(e.rueidisOption())
	if err != nil {
		return nil, err
	}
	return &pollSemInst{rc: rc}, nil
}

func (p *pollSemInst) Init(ctx context.Context, key string, n int64) error {
	err := p.rc.Do(ctx, p.rc.B().Set().Key(key).Value(strconv.FormatInt(n, 10)).Nx().Build()).Error()
	if rueidis.IsRedisNil(err) { // the key has a count already
		return nil
	}
	return err
}

func (p *pollSemInst) Semaphore(key string) semHandle { return pollSem{p.rc, key} }

func (p *pollSemInst) Close() { p.rc.Close() }

type pollSem struct {
	rc  rueidis.Client
	key string
}

func (s pollSem) Acquire(ctx context.Context, n int64) error {
	args := []string{strconv.FormatInt(n, 10)}
	for range semMaxAttempts {
		if err := ctx.Err(); err != nil {
			return err
		}
		// An attempt is finished whatever happens to ctx, so that permits it took are
		// never lost to the caller.
		actx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		left, err := pollAcquire.Exec(actx, s.rc, []string{s.key}, args).AsInt64()
		cancel()
		if err != nil {
			return err
		}
		if left >= 0 {
			return nil
		}
		pause(ctx, semPollDelay)
	}
	return errors.New("polling semaphore: no permit after the most attempts")
}

func (s pollSem) Release(ctx context.Context, n int64) error {
	return s.rc.Do(ctx, s.rc.B().Incrby().Key(s.key).Increment(n).Build()).Error()
}

// semWarm sets key to one permit, takes it and gives it back, so that the scripts are
// loaded and the connections open.
func semWarm(inst semInstance, key string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := inst.Init(ctx, key, 1); err != nil {
		return fmt.Errorf("warm-up init: %w", err)
	}
	s := inst.Semaphore(key)
	if err := s.Acquire(ctx, 1); err != nil {
		return fmt.Errorf("warm-up acquire: %w", err)
	}
	return s.Release(ctx, 1)
}

// semRelease gives one permit back, bounded in time: a release is not cut short by the
// end of the window.
func semRelease(s semHandle) error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return s.Release(ctx, 1)
}

// --- uncontended

type semCycleRound struct {
	cycles         int64
	elapsed        time.Duration
	lat            []time.Duration // one acquire+release cycle
	sent, commands map[string]int64
	errors         int64
}

// runSemCycles has m.goroutines goroutines acquire and release one permit of a semaphore
// with as many permits, in a loop, for dur.
func runSemCycles(lib semLibrary, addr string, adm *admin, m semCycleMode, dur time.Duration, tag string) (semCycleRound, error) {
	sent := newSentScripts(lib.scripts)
	key := "semu:" + tag
	goroutines := m.goroutines
	handles := make([]semHandle, goroutines)
	var inst semInstance
	for i := range handles {
		if inst == nil || m.ownClients {
			var err error
			if inst, err = lib.open(endpoint{addr: addr, sent: sent}); err != nil {
				return semCycleRound{}, err
			}
			defer inst.Close()
			if err := semWarm(inst, fmt.Sprintf("%s:warm:%d", key, i)); err != nil {
				return semCycleRound{}, err
			}
		}
		handles[i] = inst.Semaphore(key)
	}
	ictx, icancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer icancel()
	if err := inst.Init(ictx, key, int64(goroutines)); err != nil {
		return semCycleRound{}, err
	}
	bg := context.Background()
	c0, err := adm.commands(bg)
	if err != nil {
		return semCycleRound{}, err
	}
	s0 := sent.snapshot()
	var (
		wg   sync.WaitGroup
		errs atomic.Int64
		lats = make([][]time.Duration, goroutines)
	)
	start := time.Now()
	ctx, cancel := context.WithDeadline(bg, start.Add(dur))
	defer cancel()
	for i, h := range handles {
		wg.Add(1)
		go func() {
			defer wg.Done()
			lat := make([]time.Duration, 0, 4096)
			for n := 0; n < maxSamples && ctx.Err() == nil; n++ {
				t := time.Now()
				if err := h.Acquire(ctx, 1); err != nil {
					if ctx.Err() == nil {
						errs.Add(1)
						pause(ctx, time.Millisecond)
					}
					continue
				}
				if err := semRelease(h); err != nil {
					errs.Add(1)
					continue
				}
				lat = append(lat, time.Since(t))
			}
			lats[i] = lat
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	s1 := sent.snapshot()
	c1, err := adm.commands(bg)
	if err != nil {
		return semCycleRound{}, err
	}
	r := semCycleRound{elapsed: elapsed, errors: errs.Load(), sent: minus(s1, s0), commands: commandDelta(c0, c1)}
	for _, l := range lats {
		r.cycles += int64(len(l))
		r.lat = append(r.lat, l...)
	}
	return r, nil
}

// --- contended

// semBaton counts the acquisitions, for goroutines that step aside after releasing.
type semBaton struct {
	ctx  context.Context
	mu   sync.Mutex
	cond *sync.Cond
	seq  int64
}

// newSemBaton returns a baton whose waits end when ctx does.
func newSemBaton(ctx context.Context) *semBaton {
	b := &semBaton{ctx: ctx}
	b.cond = sync.NewCond(&b.mu)
	go func() {
		<-ctx.Done()
		b.mu.Lock()
		b.cond.Broadcast()
		b.mu.Unlock()
	}()
	return b
}

func (b *semBaton) took() {
	b.mu.Lock()
	b.seq++
	b.cond.Broadcast()
	b.mu.Unlock()
}

func (b *semBaton) now() int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.seq
}

// waitPast returns once there has been an acquisition after the count seq, or ctx has
// ended. The goroutine that waits acquires nothing meanwhile, so it is another's.
func (b *semBaton) waitPast(seq int64) {
	b.mu.Lock()
	for b.seq <= seq && b.ctx.Err() == nil {
		b.cond.Wait()
	}
	b.mu.Unlock()
}

// contendSem runs one goroutine per handle, each acquiring one permit, holding it for cs and
// releasing it, in a loop from start for dur; waiter ids start at base.
func contendSem(sems []semHandle, base int, start time.Time, dur, cs time.Duration, stepAside bool) (evs []event, errs int64) {
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		nerr atomic.Int64
	)
	ctx, cancel := context.WithDeadline(context.Background(), start.Add(dur))
	defer cancel()
	b := newSemBaton(ctx)
	for i, s := range sems {
		wg.Add(1)
		go func() {
			defer wg.Done()
			mine := make([]event, 0, 256)
			for n := 0; n < maxSamples && ctx.Err() == nil; n++ {
				ask := time.Now().UnixNano()
				err := s.Acquire(ctx, 1)
				e := event{Waiter: base + i, Ask: ask, Acq: time.Now().UnixNano()}
				if err != nil {
					if ctx.Err() == nil {
						nerr.Add(1)
						pause(ctx, time.Millisecond)
					}
					continue
				}
				b.took()
				if cs > 0 {
					time.Sleep(cs)
				}
				e.Leave = time.Now().UnixNano()
				seen := b.now()
				if err := semRelease(s); err != nil {
					nerr.Add(1)
				} else {
					e.Rel = time.Now().UnixNano()
				}
				mine = append(mine, e)
				if stepAside {
					b.waitPast(seen)
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

// analyseSem derives a contended semaphore run's numbers from its events. A permit freed by a
// release is taken by a later acquisition: the k-th acquisition (by the time it returned)
// is paired with the (k−permits)-th release (by the time it returned), the first permits
// acquisitions taking the permits there were at the start. The pair is a handoff when the
// two are different goroutines, "same" otherwise, and the handoff is timed as the lock's:
// from the release returning (at least 0) and from its call. Overlaps (violations) are
// acquisitions that returned while permits other goroutines were inside their critical
// sections already.
func analyseSem(evs []event, waiters int, permits int64, elapsed time.Duration, errs int64) s2Round {
	slices.SortFunc(evs, func(a, b event) int { return cmp.Compare(a.Acq, b.Acq) })
	r := s2Round{acq: int64(len(evs)), elapsed: elapsed, perWaiter: make([]int64, waiters), errors: errs,
		overtakes: overtakes(evs), violations: beyondPermits(evs, permits)}
	rels := make([]event, 0, len(evs))
	for _, e := range evs {
		if e.Waiter >= 0 && e.Waiter < waiters {
			r.perWaiter[e.Waiter]++
		}
		if e.Rel != 0 {
			rels = append(rels, e)
		}
	}
	slices.SortFunc(rels, func(a, b event) int { return cmp.Compare(a.Rel, b.Rel) })
	for k, e := range evs {
		j := k - int(permits)
		if j < 0 || j >= len(rels) {
			continue
		}
		freed := rels[j]
		if freed.Waiter == e.Waiter {
			r.same++
			continue
		}
		r.handoffs = append(r.handoffs, time.Duration(max(e.Acq-freed.Rel, 0)))
		r.fromCall = append(r.fromCall, time.Duration(e.Acq-freed.Leave))
	}
	return r
}

// beyondPermits counts the acquisitions that returned while permits others were between
// their acquisition returning and their release being called: each of those held a permit
// in Redis then, so one more is a permit the semaphore gave that it did not have.
func beyondPermits(evs []event, permits int64) int64 {
	type edge struct {
		t int64
		d int64
	}
	edges := make([]edge, 0, 2*len(evs))
	for _, e := range evs {
		edges = append(edges, edge{e.Acq, 1}, edge{e.Leave, -1})
	}
	// At the same instant a release is counted before an acquisition.
	slices.SortFunc(edges, func(a, b edge) int { return cmp.Or(cmp.Compare(a.t, b.t), cmp.Compare(a.d, b.d)) })
	var in, n int64
	for _, e := range edges {
		if in += e.d; e.d > 0 && in > permits {
			n++
		}
	}
	return n
}

// runSemLocal runs a contended mode in this process: m.waiters goroutines of lib's one client.
func runSemLocal(lib semLibrary, addr string, adm *admin, m semMode, dur time.Duration, tag string) (s2Round, error) {
	sent := newSentScripts(lib.scripts)
	inst, err := lib.open(endpoint{addr: addr, sent: sent})
	if err != nil {
		return s2Round{}, err
	}
	defer inst.Close()
	key := "sem:" + tag
	if err := semWarm(inst, key+":warm"); err != nil {
		return s2Round{}, err
	}
	ictx, icancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer icancel()
	if err := inst.Init(ictx, key, m.permits); err != nil {
		return s2Round{}, err
	}
	handles := make([]semHandle, m.waiters)
	for i := range handles {
		handles[i] = inst.Semaphore(key)
	}
	bg := context.Background()
	c0, err := adm.commands(bg)
	if err != nil {
		return s2Round{}, err
	}
	s0 := sent.snapshot()
	start := time.Now()
	evs, errs := contendSem(handles, 0, start, dur, m.cs, m.stepAside)
	elapsed := time.Since(start)
	s1 := sent.snapshot()
	c1, err := adm.commands(bg)
	if err != nil {
		return s2Round{}, err
	}
	r := analyseSem(evs, m.waiters, m.permits, elapsed, errs)
	r.commands = commandDelta(c0, c1)
	r.sent = minus(s1, s0)
	return r, nil
}

// runSemMulti runs a contended mode across m.procs worker processes, one client each.
func runSemMulti(li int, addr string, adm *admin, m semMode, dur time.Duration, tag string) (s2Round, error) {
	key := "sem:" + tag
	// As S2 across processes gives its workers, and more for each further process: they all
	// start and warm up before the window.
	start := time.Now().Add(700*time.Millisecond + time.Duration(max(m.procs-4, 0))*30*time.Millisecond)
	end := start.Add(dur)
	specs := make([]workerSpec, m.procs)
	for p := range specs {
		specs[p] = workerSpec{Mode: "sem", Lib: li, Addr: addr, Key: key, CS: int64(m.cs), Permits: m.permits,
			Start: start.UnixNano(), End: end.UnixNano(), Base: p * m.waiters, Waiters: m.waiters}
	}
	out, err := runContenders(adm, specs, start, end)
	if err != nil {
		return s2Round{}, err
	}
	r := analyseSem(out.events, m.procs*m.waiters, m.permits, dur, out.errors)
	r.commands, r.sent = out.commands, out.sent
	return r, nil
}

// semWorker is a worker process of a contended semaphore run: w.Waiters goroutines of one
// client contend for one permit each of w.Key, which has w.Permits.
func semWorker(w workerSpec) error {
	libs := semLibraries()
	if w.Lib < 0 || w.Lib >= len(libs) {
		return fmt.Errorf("worker: no semaphore library %d", w.Lib)
	}
	lib := libs[w.Lib]
	sent := newSentScripts(lib.scripts)
	inst, err := lib.open(endpoint{addr: w.Addr, sent: sent})
	if err != nil {
		return err
	}
	defer inst.Close()
	if err := semWarm(inst, fmt.Sprintf("%s:warm:%d", w.Key, w.Base)); err != nil {
		return err
	}
	ictx, icancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer icancel()
	if err := inst.Init(ictx, w.Key, w.Permits); err != nil {
		return err
	}
	handles := make([]semHandle, w.Waiters)
	for i := range handles {
		handles[i] = inst.Semaphore(w.Key)
	}
	start := time.Unix(0, w.Start)
	time.Sleep(time.Until(start))
	s0 := sent.snapshot()
	evs, errs := contendSem(handles, w.Base, start, time.Duration(w.End-w.Start), time.Duration(w.CS), false)
	return json.NewEncoder(os.Stdout).Encode(workerResult{Events: evs, Errors: errs, Sent: minus(sent.snapshot(), s0)})
}

// --- the whole section

type semResult struct {
	libs        []semLibrary
	uncontended [len(semUncontended)][][]semCycleRound // by semUncontended, library, round
	contended   [len(semModes)][][]s2Round             // by semModes, library, round
}

// runSemaphores runs every semaphore scenario, the libraries interleaved in each round.
func runSemaphores(addr string, adm *admin, cfg config) (semResult, error) {
	res := semResult{libs: semLibraries()}
	ctx := context.Background()
	for gi, g := range semUncontended {
		res.uncontended[gi] = make([][]semCycleRound, len(res.libs))
		for round := range cfg.rounds {
			for li, lib := range res.libs {
				r, err := runSemCycles(lib, addr, adm, g, cfg.s1Dur, fmt.Sprintf("%d:%d:%s", gi, round, lib.name))
				if err != nil {
					return res, fmt.Errorf("uncontended %s, %v: %w", lib.name, g, err)
				}
				res.uncontended[gi][li] = append(res.uncontended[gi][li], r)
				fmt.Fprintf(os.Stderr, "semaphore %-28v round %d %-8s %8.0f cycles/s\n", g, round+1, lib.name,
					float64(r.cycles)/r.elapsed.Seconds())
			}
			if err := adm.flush(ctx); err != nil {
				return res, err
			}
		}
	}
	for mi, m := range semModes {
		res.contended[mi] = make([][]s2Round, len(res.libs))
		for round := range cfg.rounds {
			for li, lib := range res.libs {
				tag := fmt.Sprintf("%d:%d:%s", mi, round, lib.name)
				var r s2Round
				var err error
				if m.procs > 1 {
					r, err = runSemMulti(li, addr, adm, m, cfg.s2Dur, tag)
				} else {
					r, err = runSemLocal(lib, addr, adm, m, cfg.s2Dur, tag)
				}
				if err != nil {
					return res, fmt.Errorf("%s (%v): %w", lib.name, m, err)
				}
				res.contended[mi][li] = append(res.contended[mi][li], r)
				fmt.Fprintf(os.Stderr, "semaphore %d×%d%s round %d %-8s %8.0f acq/s %5d handoffs\n", m.procs, m.waiters,
					map[bool]string{true: " step aside", false: ""}[m.stepAside], round+1, lib.name,
					float64(r.acq)/r.elapsed.Seconds(), len(r.handoffs))
			}
			if err := adm.flush(ctx); err != nil {
				return res, err
			}
		}
	}
	return res, nil
}
