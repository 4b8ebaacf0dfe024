package model

import (
	"context"
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"runtime/debug"
	"sort"
	"strconv"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/rueidis"

	"github.com/relock-go/relock"
	"github.com/relock-go/relock/fairlock"
	"github.com/relock-go/relock/internal/leases"
	"github.com/relock-go/relock/internal/redistest"
	"github.com/relock-go/relock/rlock"
	"github.com/relock-go/relock/rwlock"
)

var (
	flagSeed  = flag.Uint64("model.seed", 0, "run only this seed (to replay a failure; also MODEL_SEED)")
	flagSteps = flag.Int("model.steps", 0, "steps per seed (default: the test's own; also MODEL_STEPS)")
)

// seedsAndSteps returns the seeds to run and the steps of each: the defaults, or the one
// seed (and step count) asked for on the command line or in the environment.
func seedsAndSteps(t *testing.T, seeds []uint64, steps int) ([]uint64, int) {
	seed, n := *flagSeed, *flagSteps
	if v := os.Getenv("MODEL_SEED"); v != "" && seed == 0 {
		s, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			t.Fatalf("MODEL_SEED=%q: %v", v, err)
		}
		seed = s
	}
	if v := os.Getenv("MODEL_STEPS"); v != "" && n == 0 {
		s, err := strconv.Atoi(v)
		if err != nil {
			t.Fatalf("MODEL_STEPS=%q: %v", v, err)
		}
		n = s
	}
	if seed != 0 {
		seeds = []uint64{seed}
	}
	if n > 0 {
		steps = n
	}
	return seeds, steps
}

// TestModel drives each kind of lock with seeded random operations on miniredis inside a
// synctest bubble, where the clock is the bubble's: leases, renewals, waits and Redis's
// expiries all follow it exactly. After every step it compares Redis's keys with the
// model (fields and counts, mode, read timeout keys and their expiries, the fair queue,
// fencing tokens) and every hold's context with Redis by the lease-truth rule. It guards
// against every way a hold's context can disagree with Redis: an expiry shortened by a
// re-entry, a renewal that renews another owner's read holds or stops renewing, a hash
// that expires before a read hold, a waiter that is not granted in its turn. Mutants it
// kills: a re-entry that sets the expiry to its own lease (rlock_acquire.lua), a read
// renewal that extends every reader's timeout keys (rwlock_renew.lua), a watchdog that
// keeps a hold whose renewal found it gone.
func TestModel(t *testing.T) {
	defer debug.SetGCPercent(debug.SetGCPercent(400))
	for _, k := range []kind{plainKind, fairKind, rwKind} {
		t.Run(k.String(), func(t *testing.T) {
			t.Parallel()
			seeds, steps := seedsAndSteps(t, miniSeeds, miniSteps)
			total, violations := 0, 0
			for _, seed := range seeds {
				var n int
				bad := true
				// A seed of its own: a failing bubble ends only its subtest.
				t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) {
					synctest.Test(t, func(t *testing.T) {
						n, bad = runMini(t, k, seed, steps)
					})
				})
				total += n
				if bad {
					violations++
				}
			}
			line := fmt.Sprintf("model: kind=%s backend=miniredis steps=%d seeds=%v violations=%d", k, total, seeds, violations)
			t.Log(line)
			fmt.Println(line)
		})
	}
}

// Seeds and steps on the controlled clock: 6 seeds of 2,500 steps, 15,000 steps per kind.
// Seeds 48 and 61 once found a fair-lock stall: a waiter left first when the dead waiters
// ahead of it were skipped was not told its turn had come.
var (
	miniSeeds = []uint64{1, 2, 3, 4, 48, 61}
	miniSteps = 2500
)

// runMini runs one seed on miniredis with the bubble's clock. It reports the steps run and
// whether a violation stopped it.
func runMini(t *testing.T, k kind, seed uint64, steps int) (int, bool) {
	mr := miniredis.NewMiniRedis()
	mr.ClockTTL(true)
	defer mr.Close()
	w := newWorld(t, k, seed, false)
	w.dial = func() (rueidis.Client, error) {
		return rueidis.NewClient(rueidis.ClientOption{
			InitAddress: []string{"mini:0"}, DisableCache: true, ForceSingleClient: true,
			DialCtxFn: func(context.Context, string, *net.Dialer, *tls.Config) (net.Conn, error) { return mr.Dial() },
		})
	}
	w.snap = func() (*snapshot, error) { return miniSnapshot(mr), nil }
	w.settle = synctest.Wait
	return w.run(steps)
}

// TestModelReal runs a shorter version on a real redis-server in real time. Leases are
// seconds long so that a loaded machine keeps to them, the driver takes one step at a
// time (no waiter runs concurrently with it), and only checks that are sound on a real
// clock are made: a live hold context implies Redis holds it until at least the
// context's deadline (Redis is read before the context), and a context ended by lease
// loss implies Redis no longer holds it (the context is read before Redis).
func TestModelReal(t *testing.T) {
	if testing.Short() {
		t.Skip("real time")
	}
	for _, k := range []kind{plainKind, fairKind, rwKind} {
		t.Run(k.String(), func(t *testing.T) {
			t.Parallel()
			redistest.Real(t, func(t *testing.T, b *redistest.Backend) {
				seeds, steps := seedsAndSteps(t, []uint64{11}, realSteps)
				total, violations := 0, 0
				for _, seed := range seeds {
					w := newWorld(t, k, seed, true)
					w.dial = func() (rueidis.Client, error) {
						return rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{b.Addr}, DisableCache: true, ForceSingleClient: true})
					}
					probe := b.Client(t)
					w.snap = func() (*snapshot, error) { return realSnapshot(probe) }
					w.settle = func() {}
					n, bad := w.run(steps)
					total += n
					if bad {
						violations++
					}
					if err := probe.Do(context.Background(), probe.B().Flushall().Build()).Error(); err != nil {
						t.Fatal(err)
					}
				}
				line := fmt.Sprintf("model: kind=%s backend=redis steps=%d seeds=%v violations=%d", k, total, seeds, violations)
				t.Log(line)
				fmt.Println(line)
			})
		})
	}
}

const realSteps = 100

// maxReport is how many lines of a failing seed's operations its report prints.
const maxReport = 400

// world is one run: the lock on Redis, the clients that use it, and the model.
type world struct {
	t       testing.TB
	kind    kind
	seed    uint64
	rng     *rand.Rand
	real    bool
	m       *model
	lease   time.Duration // the clients' watchdog timeout
	leases  []time.Duration
	sleeps  []time.Duration
	clients []*client
	dial    func() (rueidis.Client, error)
	snap    func() (*snapshot, error)
	settle  func()
	results chan result
	log     []string
	step    int
	bad     []string
	last    *snapshot
	started time.Time
	notes   map[context.Context]string // where each hold context came from, for reports
}

// client is one relock.Client on its own rueidis client: crashing it closes both.
type client struct {
	n      int
	rc     rueidis.Client
	c      *relock.Client
	mu     *rlock.Mutex
	fm     *fairlock.Mutex
	rw     *rwlock.RWMutex
	owners []*owner
}

// owner is one lock owner: a context bound to it and its latest hold contexts.
type owner struct {
	id      string
	name    string // short, for the log
	cl      *client
	base    context.Context
	last    map[side]context.Context
	pending *pending
}

// pending is a Lock call that has not returned yet.
type pending struct {
	o       *owner
	side    side
	lease   time.Duration
	fenced  bool
	cancel  context.CancelFunc
	started time.Time
	queued  bool            // the model knows it waits
	given   context.Context // the context Lock was called with
}

// result is what a Lock call running in its own goroutine returned.
type result struct {
	p      *pending
	ctx    context.Context
	err    error
	at     time.Time
	token  int64 // the hold's fencing token, read as soon as Lock returned
	fenced bool
}

func newWorld(t testing.TB, k kind, seed uint64, real bool) *world {
	w := &world{t: t, kind: k, seed: seed, rng: rand.New(rand.NewPCG(seed, uint64(k))), real: real, results: make(chan result, 64)}
	if real {
		w.lease = 3 * time.Second
		w.leases = []time.Duration{0, 0, 2 * time.Second, 4 * time.Second, 6 * time.Second}
		w.sleeps = []time.Duration{10 * time.Millisecond, 200 * time.Millisecond, 700 * time.Millisecond, 1500 * time.Millisecond}
		w.m = newModel(k, "model", w.lease, 2*time.Second, 700*time.Millisecond)
	} else {
		// Leases below, at and above the watchdog's; sleeps that end inside and past them.
		w.lease = 3 * time.Second
		w.leases = []time.Duration{0, 0, 0, 30 * time.Millisecond, 200 * time.Millisecond, 700 * time.Millisecond, 3 * time.Second, 5 * time.Second}
		w.sleeps = []time.Duration{time.Millisecond, 5 * time.Millisecond, 30 * time.Millisecond, 150 * time.Millisecond, 499 * time.Millisecond, time.Second, 2500 * time.Millisecond}
		w.m = newModel(k, "model", w.lease, time.Second, 0)
	}
	return w
}

// now is the span of the current instant: exact on the controlled clock.
func (w *world) now() span { return exact(time.Now()) }

// run runs steps steps, or until the first violation, and cleans up.
func (w *world) run(steps int) (int, bool) {
	w.started = time.Now()
	defer w.cleanup()
	for i := 0; i < 3; i++ {
		if err := w.addClient(i); err != nil {
			w.t.Errorf("seed %d: %v", w.seed, err)
			return 0, true
		}
	}
	for w.step = 1; w.step <= steps; w.step++ {
		w.do()
		w.settle()
		w.collect()
		w.check()
		if len(w.bad) > 0 {
			w.report()
			return w.step, true
		}
	}
	return steps, false
}

func (w *world) logf(format string, args ...any) {
	w.log = append(w.log, fmt.Sprintf("#%d +%v ", w.step, time.Since(w.started).Round(time.Millisecond))+fmt.Sprintf(format, args...))
}

func (w *world) violate(format string, args ...any) {
	w.bad = append(w.bad, fmt.Sprintf(format, args...))
}

// report prints the violation with the operation sequence that led to it.
func (w *world) report() {
	var b strings.Builder
	fmt.Fprintf(&b, "model: kind=%s seed=%d step=%d: violation\n", w.kind, w.seed, w.step)
	for _, v := range w.bad {
		fmt.Fprintf(&b, "  %s\n", v)
	}
	fmt.Fprintf(&b, "model state: %s\n", w.m.describe())
	if w.last != nil {
		fmt.Fprintf(&b, "redis: %s\n", describeSnapshot(w.last))
	}
	fmt.Fprintf(&b, "operations (replay: go test ./internal/model -run 'TestModel%s/%s' -model.seed=%d -model.steps=%d):\n",
		map[bool]string{true: "Real", false: ""}[w.real], w.kind, w.seed, w.step)
	log := w.log
	if len(log) > maxReport {
		fmt.Fprintf(&b, "  (%d earlier lines left out; the replay runs them)\n", len(log)-maxReport)
		log = log[len(log)-maxReport:]
	}
	for _, l := range log {
		fmt.Fprintf(&b, "  %s\n", l)
	}
	// Again at the end, where a log cut to its last lines still shows it.
	fmt.Fprintf(&b, "model: kind=%s seed=%d step=%d: %s\n", w.kind, w.seed, w.step, strings.Join(w.bad, "; "))
	w.t.Error(short(b.String()))
}

func describeSnapshot(s *snapshot) string {
	var parts []string
	for k, v := range s.keys {
		d := fmt.Sprintf("%s(%s pttl=%v", short(k), v.typ, max(v.pttl, -1))
		switch v.typ {
		case "hash":
			var fs []string
			for f, n := range v.hash {
				fs = append(fs, short(f)+"="+n)
			}
			sort.Strings(fs)
			d += fmt.Sprintf(" %v", fs)
		case "list":
			d += fmt.Sprintf(" %v", shorts(v.list))
		case "zset":
			d += fmt.Sprintf(" %v", v.zset)
		case "string":
			d += " " + v.str
		}
		parts = append(parts, d+")")
	}
	sort.Strings(parts)
	return strings.Join(parts, " ")
}

// addClient makes client slot i: a fresh rueidis client, a relock client on it, and two
// owners, each bound to a context by taking and releasing another lock once.
func (w *world) addClient(i int) error {
	rc, err := w.dial()
	if err != nil {
		return err
	}
	c, err := relock.New(rc, relock.WithWatchdogTimeout(w.lease), relock.WithTimeout(max(w.lease/3, 500*time.Millisecond)))
	if err != nil {
		rc.Close()
		return err
	}
	cl := &client{n: i, rc: rc, c: c}
	switch w.kind {
	case plainKind:
		cl.mu = c.Lock(w.m.name)
	case fairKind:
		cl.fm = c.FairLock(w.m.name, fairlock.WithRefreshPeriod(w.m.refresh))
	case rwKind:
		cl.rw = c.RWLock(w.m.name)
	}
	bind := c.Lock(bindLock, rlock.WithLease(time.Minute))
	for j := 0; j < 2; j++ {
		ctx, cancel := context.WithTimeout(relock.NewOwner(context.Background()), 10*time.Second)
		hctx, err := bind.Lock(ctx)
		if err != nil {
			cancel()
			return fmt.Errorf("binding an owner: %w", err)
		}
		id := c.ID() + ":" + strconv.Itoa(j+1)
		if s, err := w.snap(); err != nil || s.keys[bindLock] == nil || s.keys[bindLock].hash[id] != "1" {
			cancel()
			return fmt.Errorf("owner %s not found in the bind lock (err %v)", id, err)
		}
		if err := bind.Unlock(hctx); err != nil {
			cancel()
			return err
		}
		o := &owner{id: id, name: fmt.Sprintf("c%d.%d", i, j), cl: cl, base: context.WithoutCancel(hctx), last: map[side]context.Context{}}
		cancel()
		cl.owners = append(cl.owners, o)
	}
	if i < len(w.clients) {
		w.clients[i] = cl
	} else {
		w.clients = append(w.clients, cl)
	}
	return nil
}

func (w *world) cleanup() {
	for _, cl := range w.clients {
		for _, o := range cl.owners {
			if o.pending != nil {
				o.pending.cancel()
			}
		}
	}
	w.settle()
	for _, cl := range w.clients {
		cl.c.Close()
		cl.rc.Close()
	}
	w.settle()
	for {
		select {
		case <-w.results:
			continue
		default:
		}
		break
	}
}

// The lock's operations for a client.

func (cl *client) acquire(k kind, s side, wait bool) func(context.Context, ...rlock.Option) (context.Context, error) {
	switch {
	case k == plainKind && wait:
		return cl.mu.Lock
	case k == plainKind:
		return cl.mu.TryLock
	case k == fairKind && wait:
		return withOptions(cl.fm.Lock)
	case k == fairKind:
		return withOptions(cl.fm.TryLock)
	case s == read && wait:
		return withOptions(cl.rw.RLock)
	case s == read:
		return withOptions(cl.rw.TryRLock)
	case wait:
		return withOptions(cl.rw.Lock)
	}
	return withOptions(cl.rw.TryLock)
}

// withOptions lets an acquisition of a fair or read-write lock take rlock's options, which
// apply to every kind.
func withOptions[O any](f func(context.Context, ...O) (context.Context, error)) func(context.Context, ...rlock.Option) (context.Context, error) {
	return func(ctx context.Context, opts ...rlock.Option) (context.Context, error) {
		own := make([]O, len(opts))
		for i, o := range opts {
			own[i] = any(o).(O)
		}
		return f(ctx, own...)
	}
}

func (cl *client) unlock(k kind, s side) func(context.Context) error {
	switch {
	case k == plainKind:
		return cl.mu.Unlock
	case k == fairKind:
		return cl.fm.Unlock
	case s == read:
		return cl.rw.RUnlock
	}
	return cl.rw.Unlock
}

func (cl *client) force(k kind, ctx context.Context) (bool, error) {
	switch k {
	case plainKind:
		return cl.mu.ForceUnlock(ctx)
	case fairKind:
		return cl.fm.ForceUnlock(ctx)
	}
	return cl.rw.ForceUnlock(ctx)
}

func (cl *client) token(k kind, ctx context.Context) (int64, bool) {
	switch k {
	case plainKind:
		return cl.mu.Token(ctx)
	case fairKind:
		return cl.fm.Token(ctx)
	}
	return cl.rw.Token(ctx)
}

// Choosing operations.

func (w *world) pick(xs []time.Duration) time.Duration { return xs[w.rng.IntN(len(xs))] }

// owners returns the owners that are not blocked in Lock.
func (w *world) idle() []*owner {
	var out []*owner
	for _, cl := range w.clients {
		for _, o := range cl.owners {
			if o.pending == nil {
				out = append(out, o)
			}
		}
	}
	return out
}

func (w *world) waiting() []*owner {
	var out []*owner
	for _, cl := range w.clients {
		for _, o := range cl.owners {
			if o.pending != nil {
				out = append(out, o)
			}
		}
	}
	return out
}

// holders returns the idle owners the model says hold side.
func (w *world) holders(s side) []*owner {
	var out []*owner
	for _, o := range w.idle() {
		if w.m.lock != nil && w.m.lock.fields[field(o.id, s)] > 0 {
			out = append(out, o)
		}
	}
	return out
}

func (w *world) sides() []side {
	if w.kind == rwKind {
		return []side{read, write}
	}
	return []side{whole}
}

// do picks and runs one operation.
func (w *world) do() {
	r := w.rng.IntN(100)
	idle := w.idle()
	s := w.sides()[w.rng.IntN(len(w.sides()))]
	switch {
	case r < 30 || len(idle) == 0:
		w.sleep(w.pick(w.sleeps))
	case r < 52:
		o := idle[w.rng.IntN(len(idle))]
		if hs := w.holders(s); len(hs) > 0 && w.rng.IntN(3) > 0 {
			o = hs[w.rng.IntN(len(hs))]
		}
		w.acquire(o, s, !w.real || w.m.verdict(o.id, s, time.Now()) != locked)
	case r < 64:
		w.acquire(idle[w.rng.IntN(len(idle))], s, false)
	case r < 92:
		o := idle[w.rng.IntN(len(idle))]
		if hs := w.holders(s); len(hs) > 0 && w.rng.IntN(5) > 0 {
			o = hs[w.rng.IntN(len(hs))]
		}
		w.unlock(o, s)
	case r < 94:
		w.force(idle[w.rng.IntN(len(idle))])
	case r < 96:
		w.crash(w.clients[w.rng.IntN(len(w.clients))])
	default:
		if ws := w.waiting(); len(ws) > 0 {
			w.cancel(ws[w.rng.IntN(len(ws))])
		} else {
			w.sleep(w.pick(w.sleeps))
		}
	}
}

// ctxFor picks the context an owner acquires or releases side with: its bound context,
// or the latest context of one of its holds (which re-enters through it, or for a read
// hold taken with the write hold's context, begins a downgrade).
func (w *world) ctxFor(o *owner, s side) (context.Context, string) {
	if w.rng.IntN(2) == 0 {
		return o.base, "base"
	}
	for _, c := range []side{s, write} {
		if ctx := o.last[c]; ctx != nil && ctx.Err() == nil && (c == s || s == read) {
			return ctx, c.String() + "hold"
		}
	}
	return o.base, "base"
}

// before brings the model to the current instant; on a real clock it first waits out
// any key whose expiry the model cannot place on either side of the operation.
func (w *world) before() span {
	if w.real {
		if until := w.m.unsure(time.Now().Add(w.lease / 4)); !until.IsZero() {
			time.Sleep(time.Until(until) + 20*time.Millisecond)
			w.observe()
		}
	}
	now := w.now()
	w.m.advance(now.lo)
	return now
}

// acquire takes side for o: Lock (in its own goroutine, as it may wait) or TryLock.
func (w *world) acquire(o *owner, s side, wait bool) {
	lease := w.pick(w.leases)
	fenced := w.rng.IntN(3) == 0 && s != read
	var opts []rlock.Option
	desc := "watchdog"
	if lease > 0 {
		opts = append(opts, rlock.WithLease(lease))
		desc = "lease=" + lease.String()
	}
	if fenced {
		opts = append(opts, rlock.WithFencing())
		desc += " fenced"
	}
	// Wait out what the model cannot place first, and choose the context after: a hold's
	// context chosen before the wait could end in it.
	t := w.before()
	ctx, via := w.ctxFor(o, s)
	fn := w.kind.String()
	if s != whole {
		fn = s.String()
	}
	if !wait {
		w.logf("trylock %s %s %s ctx=%s", o.name, fn, desc, via)
		hctx, err := o.cl.acquire(w.kind, s, false)(ctx, opts...)
		if w.real {
			t.hi = time.Now()
		}
		w.logf("  -> %v", errText(err))
		got, ok := outcomeOf(err)
		if !ok && endedUnder(ctx, err) {
			return // the hold's context it went through ended as it ran: check judges that
		}
		if !ok {
			w.violate("TryLock by %s failed: %v", o.name, err)
			return
		}
		if err := w.m.check(o.id, s, t.lo, got); err != nil {
			w.violate("%v", err)
			return
		}
		if got == granted {
			tok, ok := o.cl.token(w.kind, hctx)
			w.granted(o, s, lease, fenced, t, hctx, tok, ok)
		}
		return
	}
	w.logf("lock %s %s %s ctx=%s", o.name, fn, desc, via)
	p := &pending{o: o, side: s, lease: lease, fenced: fenced, started: t.lo, given: ctx}
	o.pending = p
	// A Lock through a hold's context re-enters (or downgrades) at once; a Lock that may
	// wait goes through the owner's bound context, wrapped so that the wait can be given
	// up. (Wrapping a hold's context would hide it from the downgrade, which recognises
	// the write hold's own context.)
	wctx, cancel := ctx, context.CancelFunc(func() {})
	if via == "base" {
		wctx, cancel = context.WithCancel(ctx)
	}
	p.cancel = cancel
	if w.real {
		// One step at a time: the model said the lock is to be had, so Lock must return.
		opts = append(opts, rlock.WithWaitTimeout(5*time.Second))
	}
	go func() {
		hctx, err := o.cl.acquire(w.kind, s, true)(wctx, opts...)
		r := result{p: p, ctx: hctx, err: err, at: time.Now()}
		if err == nil && s != read {
			r.token, r.fenced = o.cl.token(w.kind, hctx)
		}
		w.results <- r
	}()
	if w.real {
		r := <-w.results
		w.apply(r)
	}
}

// granted records an acquisition that the model allowed.
func (w *world) granted(o *owner, s side, lease time.Duration, fenced bool, t span, ctx context.Context, tok int64, ok bool) {
	h := w.m.grant(o.id, s, lease, fenced, t)
	h.ctxs = append(h.ctxs, ctx)
	if w.notes == nil {
		w.notes = map[context.Context]string{}
	}
	if w.notes[ctx] == "" {
		w.notes[ctx] = fmt.Sprintf("from step %d", w.step)
	}
	o.last[s] = ctx
	if s == read {
		return
	}
	if ok != h.fenced || tok != h.token {
		w.violate("%s's token is %d (fenced %v); the model says %d (fenced %v)", o.name, tok, ok, h.token, h.fenced)
	}
}

// endedUnder reports whether an acquisition failed because the hold's context it went
// through ended while it ran: on a real clock a renewal can find a force-unlocked hold gone
// between the choice of that context and the call. Nothing was acquired; check judges
// whether the context ended rightly.
func endedUnder(given context.Context, err error) bool {
	return given.Err() != nil && (errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded))
}

func outcomeOf(err error) (outcome, bool) {
	switch {
	case err == nil:
		return granted, true
	case errors.Is(err, relock.ErrLocked):
		return locked, true
	case errors.Is(err, relock.ErrUpgrade):
		return upgrade, true
	}
	return 0, false
}

func errText(err error) string {
	if err == nil {
		return "ok"
	}
	for _, e := range []error{relock.ErrLocked, relock.ErrUpgrade, relock.ErrNotHeld, relock.ErrClosed, relock.ErrLeaseLost, context.Canceled, context.DeadlineExceeded} {
		if errors.Is(err, e) {
			return e.Error()
		}
	}
	return err.Error()
}

// collect applies the results of Lock calls that returned, in the order they returned.
// A call that has not returned is a waiter.
func (w *world) collect() {
	var rs []result
	for {
		select {
		case r := <-w.results:
			rs = append(rs, r)
			continue
		default:
		}
		break
	}
	sort.SliceStable(rs, func(i, j int) bool { return rs[i].at.Before(rs[j].at) })
	for _, r := range rs {
		w.apply(r)
	}
	for _, o := range w.waiting() {
		if p := o.pending; !p.queued {
			p.queued = true
			w.m.wait(o.id, p.side)
		}
	}
	if !w.real {
		w.m.advance(time.Now())
	}
}

// apply applies one Lock call's result.
func (w *world) apply(r result) {
	p, o := r.p, r.p.o
	if o.pending != p {
		return // its client crashed: the model has forgotten it
	}
	o.pending = nil
	t := exact(r.at)
	if w.real {
		t = span{p.started, r.at}
	}
	w.m.advance(t.lo)
	w.logf("  %s's lock -> %v at +%v", o.name, errText(r.err), r.at.Sub(w.started))
	got, ok := outcomeOf(r.err)
	switch {
	case ok && got != locked:
		if !p.queued {
			// Returned at once: judged at the instant it was called.
			t.lo = p.started
		}
		if err := w.m.check(o.id, p.side, t.lo, got); err != nil {
			w.violate("%v", err)
			return
		}
		if got == granted {
			w.granted(o, p.side, p.lease, p.fenced, t, r.ctx, r.token, r.fenced)
		} else {
			w.m.leave(o.id, t)
		}
	case errors.Is(r.err, context.Canceled) || errors.Is(r.err, context.DeadlineExceeded):
		if w.real && !endedUnder(p.given, r.err) {
			w.violate("Lock by %s did not return although the model says the lock was free: %v", o.name, r.err)
		}
		w.m.leave(o.id, t)
	default:
		w.violate("Lock by %s failed: %v", o.name, r.err)
		w.m.leave(o.id, t)
	}
}

func (w *world) unlock(o *owner, s side) {
	t := w.before()
	ctx, via := w.ctxFor(o, s)
	w.logf("unlock %s %s ctx=%s", o.name, s, via)
	err := o.cl.unlock(w.kind, s)(ctx)
	if w.real {
		t.hi = time.Now()
	}
	w.logf("  -> %v", errText(err))
	want := w.m.release(o.id, s, t)
	switch {
	case err == nil && want == notHeld:
		w.violate("unlock by %s succeeded; the model says it held nothing", o.name)
	case err != nil && !errors.Is(err, relock.ErrNotHeld):
		w.violate("unlock by %s failed: %v", o.name, err)
	case err != nil && want != notHeld:
		w.violate("unlock by %s: %v; the model says it held", o.name, err)
	}
	f := field(o.id, s)
	if h := w.m.holds[f]; h != nil && want != stillHeld {
		// Released, or not held: the client forgets the hold and its context ends (with
		// context.Canceled, or ErrLeaseLost).
		delete(w.m.holds, f)
		for _, c := range h.ctxs {
			if c.Err() == nil {
				w.violate("%s's %s hold context is live after its unlock (%s)", o.name, s, errText(err))
				break
			}
		}
	}
}

func (w *world) force(o *owner) {
	w.logf("force unlock by %s", o.name)
	t := w.before()
	ok, err := o.cl.force(w.kind, o.base)
	w.logf("  -> %v %v", ok, errText(err))
	if w.real {
		t.hi = time.Now()
	}
	want := w.m.force(t)
	if err != nil || ok != want {
		w.violate("ForceUnlock returned %v, %v; the model says %v", ok, err, want)
	}
}

func (w *world) crash(cl *client) {
	w.logf("crash client c%d", cl.n)
	t := w.before()
	for _, o := range cl.owners {
		w.m.crash(o.id, t)
		o.pending = nil
	}
	cl.rc.Close()
	cl.c.Close()
	w.settle()
	if err := w.addClient(cl.n); err != nil {
		w.violate("replacing client c%d: %v", cl.n, err)
	}
}

func (w *world) cancel(o *owner) {
	w.logf("cancel %s's lock", o.name)
	w.before()
	o.pending.cancel()
}

func (w *world) sleep(d time.Duration) {
	w.logf("sleep %v", d)
	time.Sleep(d)
}

// unsure, on a real clock, returns until when the model cannot tell whether a key exists
// at t (its expiry span covers t); zero if it can.
func (m *model) unsure(t time.Time) time.Time {
	var until time.Time
	note := func(e span) {
		if !e.lo.After(t) && e.hi.After(time.Now()) {
			until = latest(until, e.hi)
		}
	}
	if m.lock != nil {
		note(m.lock.exp)
	}
	for _, ks := range m.reads {
		for _, e := range ks {
			note(e)
		}
	}
	for _, e := range m.queue {
		if e.dead {
			note(e.deadline)
		}
	}
	return until
}

// observe reads Redis and compares it with the model.
func (w *world) observe() *snapshot {
	s, err := w.snap()
	if err != nil {
		w.violate("reading redis: %v", err)
		return nil
	}
	w.last = s
	w.m.advance(s.at.lo)
	w.bad = append(w.bad, w.m.observe(s)...)
	return s
}

// check compares Redis with the model, and every hold context with Redis by the
// lease-truth rule:
//
//   - a live hold context implies that Redis has the owner's field, with an expiry no
//     earlier than the latest deadline a fixed lease of the hold promised; Redis is read
//     first and the context after, so a context seen live was live while Redis was read;
//   - a context ended with ErrLeaseLost implies that Redis no longer has the hold, or lets
//     it go within the allowance by which a context ends before its lease, for clocks that
//     disagree (leases.Allowance); the context is read first and Redis after;
//   - a hold whose lock ForceUnlock deleted may stay live until its client learns: the next
//     renewal, or its fixed lease's end.
//
// Then every waiter the model says may take the lock must have taken it.
func (w *world) check() {
	type seen struct {
		h    *hold
		lost bool
	}
	var holds []seen
	for _, h := range w.m.holds {
		lost := false
		for _, c := range h.ctxs {
			if errors.Is(context.Cause(c), relock.ErrLeaseLost) {
				lost = true
			}
		}
		holds = append(holds, seen{h, lost})
	}
	s := w.observe()
	if s == nil {
		return
	}
	now := s.at
	for _, sh := range holds {
		h := sh.h
		name := w.ownerName(h.owner)
		held, exp := w.m.held(s, h.owner, h.side)
		if sh.lost && held && w.beyondAllowance(exp, now) {
			w.violate("%s's %s hold context ended with ErrLeaseLost, but Redis still holds it until %v", name, h.side, exp)
		}
		live := false
		for _, c := range h.ctxs {
			switch err := c.Err(); {
			case err == nil:
				live = true
			case errors.Is(context.Cause(c), relock.ErrLeaseLost):
				if held && !sh.lost && !w.real && w.beyondAllowance(exp, now) {
					w.violate("%s's %s hold context ended with ErrLeaseLost, but Redis still holds it until %v", name, h.side, exp)
				}
			default:
				w.violate("%s's %s hold context (%s) ended with %v while the model says it is held", name, h.side, w.notes[c], context.Cause(c))
			}
		}
		switch {
		case !live:
			// The client knows the hold is gone: it forgets it.
			delete(w.m.holds, field(h.owner, h.side))
		case !held && h.forced != nil:
			grace := h.forced.hi.Add(w.m.period + w.m.slop)
			if !h.renew && h.keptBy == nil {
				grace = latest(latest(h.deadline, h.keptUntil), h.forced.hi).Add(w.m.slop)
			}
			if now.lo.After(grace) {
				w.violate("%s's %s hold context is still live at %v after ForceUnlock at %v", name, h.side, now, *h.forced)
			}
		case !held:
			w.violate("%s's %s hold context is live, but Redis does not hold it", name, h.side)
		case !h.deadline.IsZero() && exp.hi.Before(h.deadline):
			w.violate("%s's %s hold context is live with a lease to %v, but Redis lets it go at %v", name, h.side, exact(h.deadline), exp)
		}
	}
	w.checkWaiters(now)
}

// beyondAllowance reports whether Redis keeps a hold that expires at exp for longer after
// now than a hold's context may end before its lease does: by the allowance for clocks
// that disagree (leases.Allowance), of the longest lease a hold may have.
func (w *world) beyondAllowance(exp, now span) bool {
	longest := w.m.lease
	for _, l := range w.leases {
		longest = max(longest, l)
	}
	return exp.lo.Sub(now.hi) > leases.Allowance(longest)
}

// checkWaiters fails a waiter that the model says may take the lock but that has not
// taken it within slack: on the controlled clock a waiter is woken by the unlock's
// message, or when the lease runs out (a fair waiter behind a dead one, a millisecond
// after that one's entry runs out). A waiter that shares its channel's timer looks a
// sixty-fourth of the lease it was told of after it ran out, at most 250ms (the renewal
// grace, see package pubsub): the slack allows that for the longest lease a hold can have,
// a fixed one or twice the watchdog's.
func (w *world) checkWaiters(now span) {
	longest := 2 * w.m.lease
	for _, l := range w.leases {
		longest = max(longest, l)
	}
	slack := 5*time.Millisecond + min(longest/64, 250*time.Millisecond).Truncate(time.Millisecond)
	for _, wt := range w.m.waiters {
		if w.m.verdict(wt.owner, wt.side, now.lo) != granted {
			wt.since = time.Time{}
			continue
		}
		if wt.since.IsZero() {
			wt.since = now.lo
			continue
		}
		if now.lo.Sub(wt.since) > slack {
			w.violate("%s waits for the %s lock since %v although the model says it may take it (liveness)",
				w.ownerName(wt.owner), w.kind, exact(wt.since))
		}
	}
}

func (w *world) ownerName(id string) string {
	for _, cl := range w.clients {
		for _, o := range cl.owners {
			if o.id == id {
				return o.name
			}
		}
	}
	return short(id)
}

// miniSnapshot reads miniredis directly: no round trip, no script.
func miniSnapshot(m *miniredis.Miniredis) *snapshot {
	s := &snapshot{at: exact(time.Now()), keys: map[string]*value{}}
	for _, k := range m.Keys() {
		v := &value{typ: m.Type(k), pttl: -1}
		if ttl := m.TTL(k); ttl > 0 {
			v.pttl = ttl
		}
		switch v.typ {
		case "hash":
			fs, _ := m.HKeys(k)
			v.hash = map[string]string{}
			for _, f := range fs {
				v.hash[f] = m.HGet(k, f)
			}
		case "list":
			v.list, _ = m.List(k)
		case "zset":
			// (SortedSet would hand out miniredis's own map, which its server goroutine
			// writes to.)
			members, _ := m.ZMembers(k)
			v.zset = map[string]time.Time{}
			for _, member := range members {
				score, _ := m.ZScore(k, member)
				v.zset[member] = time.UnixMilli(int64(score))
			}
		case "string":
			v.str, _ = m.Get(k)
		}
		s.keys[k] = v
	}
	return s
}

// dumpScript reads every key with its type, PTTL and contents, and the server's time, in
// one atomic step.
var dumpScript = rueidis.NewLuaScript(`
local t = redis.call('time')
local out = {}
for _, k in ipairs(redis.call('keys', '*')) do
  local typ = redis.call('type', k)['ok']
  local val = {}
  if typ == 'hash' then val = redis.call('hgetall', k)
  elseif typ == 'list' then val = redis.call('lrange', k, 0, -1)
  elseif typ == 'zset' then val = redis.call('zrange', k, 0, -1, 'withscores')
  elseif typ == 'string' then val = {redis.call('get', k)} end
  out[#out + 1] = {k, typ, redis.call('pttl', k), val}
end
return {t[1], t[2], out}
`)

// realSnapshot reads a real server with dumpScript.
func realSnapshot(rc rueidis.Client) (*snapshot, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	lo := time.Now()
	arr, err := dumpScript.Exec(ctx, rc, nil, nil).ToArray()
	hi := time.Now()
	if err != nil {
		return nil, err
	}
	if len(arr) != 3 {
		return nil, fmt.Errorf("dump: %d elements", len(arr))
	}
	sec, _ := arr[0].AsInt64()
	usec, _ := arr[1].AsInt64()
	redisNow := time.Unix(sec, usec*1000)
	s := &snapshot{at: span{lo, hi}, keys: map[string]*value{}}
	entries, err := arr[2].ToArray()
	if err != nil {
		return nil, err
	}
	for _, e := range entries {
		f, err := e.ToArray()
		if err != nil || len(f) != 4 {
			return nil, fmt.Errorf("dump entry: %v", err)
		}
		k, _ := f[0].ToString()
		typ, _ := f[1].ToString()
		pttl, _ := f[2].AsInt64()
		v := &value{typ: typ, pttl: -1}
		if pttl >= 0 {
			v.pttl = time.Duration(pttl) * time.Millisecond
		}
		vals, _ := f[3].AsStrSlice()
		switch typ {
		case "hash":
			v.hash = map[string]string{}
			for i := 0; i+1 < len(vals); i += 2 {
				v.hash[vals[i]] = vals[i+1]
			}
		case "list":
			v.list = vals
		case "zset":
			v.zset = map[string]time.Time{}
			for i := 0; i+1 < len(vals); i += 2 {
				score, _ := strconv.ParseFloat(vals[i+1], 64)
				// The score is Redis time; place it on the test's clock.
				v.zset[vals[i]] = lo.Add(time.UnixMilli(int64(score)).Sub(redisNow))
			}
		case "string":
			if len(vals) > 0 {
				v.str = vals[0]
			}
		}
		s.keys[k] = v
	}
	return s, nil
}
