//go:build linux

package torture

import (
	"bufio"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
	"go.uber.org/goleak"

	"github.com/relock-go/relock/internal/redistest"
)

var long = flag.Bool("torture.long", false, "run the torture test long (≥ 20,000 acquisitions in the mixed-faults run)")

func TestMain(m *testing.M) {
	if os.Getenv(envWorker) != "" {
		os.Exit(workerMain())
	}
	if os.Getenv(envLeaseAddr) != "" {
		os.Exit(leaseWorkerMain())
	}
	goleak.VerifyTestMain(m)
}

// envKeep names a directory in which each run keeps its workers' histories and output,
// for a look after a failure; by default they go with the test's temporary directory.
const envKeep = "RELOCK_TORTURE_KEEP"

// lockName is the base name of the torture's locks; each kind has its own (lockKey).
const lockName = "torture"

// fault is one kind of fault the parent injects.
type fault string

const (
	faultKill      fault = "kill"      // SIGKILL a holder's worker; start a replacement
	faultStop      fault = "stop"      // SIGSTOP a holder's worker past its lease, then SIGCONT
	faultBlackhole fault = "blackhole" // blackhole a holder's proxy past its lease, then resume
	faultPubSub    fault = "pubsub"    // CLIENT KILL TYPE pubsub
	faultRestart   fault = "restart"   // restart the lock server without persistence
	faultSleep     fault = "sleep"     // DEBUG SLEEP 2 on the lock server
	faultDelete    fault = "delete"    // DEL a held lock's key behind its holder's back
)

var allFaults = []fault{faultKill, faultStop, faultBlackhole, faultPubSub, faultRestart, faultSleep, faultDelete}

// pastLease is how long a stop or a blackhole lasts: past the watchdog timeout.
const pastLease = watchdogTimeout + 500*time.Millisecond

type config struct {
	workers    int
	goroutines int           // per kind of lock, in each worker
	iters      int           // per goroutine
	faults     []fault       // drawn in shuffled rounds, each fault once per round, one per period
	period     time.Duration // between the end of a fault and the next
	maxFaults  int           // per run
	deadline   time.Duration // every worker must be done by then
	// minAcquisitions, when set, is how many acquisitions (of every kind) the run must
	// reach, or fail: the long mode's promise.
	minAcquisitions int
}

// kindSummary is what one run (or all of them) found on one kind of lock.
type kindSummary struct {
	acquisitions, reads, overlaps, lostUpdates, staleRejected int
	orderViolations                                           int // fair lock only
	deleted, lostHolds                                        int // holds removed by a fault; of them, seen lost by their holders
}

// summary is what one run (or all of them) found.
type summary struct {
	faults, hangs, workerErrors int
	restartOverlap              time.Duration // the longest, over restarts
	kinds                       map[string]*kindSummary
	sem                         semSummary
}

func (s *summary) kind(k string) *kindSummary {
	if s.kinds == nil {
		s.kinds = map[string]*kindSummary{}
	}
	if s.kinds[k] == nil {
		s.kinds[k] = &kindSummary{}
	}
	return s.kinds[k]
}

// total adds up the kinds.
func (s *summary) total() kindSummary {
	var t kindSummary
	for _, k := range s.kinds {
		t.acquisitions += k.acquisitions
		t.reads += k.reads
		t.overlaps += k.overlaps
		t.lostUpdates += k.lostUpdates
		t.staleRejected += k.staleRejected
		t.orderViolations += k.orderViolations
		t.deleted += k.deleted
		t.lostHolds += k.lostHolds
	}
	return t
}

func (s *summary) add(o summary) {
	s.faults += o.faults
	s.hangs += o.hangs
	s.workerErrors += o.workerErrors
	s.restartOverlap = max(s.restartOverlap, o.restartOverlap)
	s.sem.add(o.sem)
	for name, k := range o.kinds {
		m := s.kind(name)
		m.acquisitions += k.acquisitions
		m.reads += k.reads
		m.overlaps += k.overlaps
		m.lostUpdates += k.lostUpdates
		m.staleRejected += k.staleRejected
		m.orderViolations += k.orderViolations
		m.deleted += k.deleted
		m.lostHolds += k.lostHolds
	}
}

// String is the summary line: totals first (of the locks), then each kind of lock, then
// the semaphore.
func (s summary) String() string {
	t := s.total()
	var b strings.Builder
	fmt.Fprintf(&b, "torture: acquisitions=%d faults=%d overlaps=%d lost-updates=%d hangs=%d stale-writes-rejected=%d worker-errors=%d order-violations=%d deleted-holds=%d lost-holds=%d restart-overlap-max=%dms",
		t.acquisitions, s.faults, t.overlaps, t.lostUpdates, s.hangs, t.staleRejected, s.workerErrors,
		t.orderViolations, t.deleted, t.lostHolds, s.restartOverlap.Milliseconds())
	for _, name := range kinds {
		k := s.kinds[name]
		if k == nil {
			k = &kindSummary{}
		}
		fmt.Fprintf(&b, " | %s: acquisitions=%d", name, k.acquisitions)
		if name == kindRW {
			fmt.Fprintf(&b, " (reads=%d writes=%d)", k.reads, k.acquisitions-k.reads)
		}
		fmt.Fprintf(&b, " overlaps=%d lost-updates=%d stale-writes-rejected=%d", k.overlaps, k.lostUpdates, k.staleRejected)
		if name == kindFair {
			fmt.Fprintf(&b, " order-violations=%d", k.orderViolations)
		}
		fmt.Fprintf(&b, " lost-holds=%d/%d", k.lostHolds, k.deleted)
	}
	fmt.Fprintf(&b, " | %s", s.sem)
	return b.String()
}

// TestTorture runs the workers once without faults, once with each fault alone and once
// with all of them mixed, and checks every history. Each worker takes the three kinds of
// lock at once, each kind on its own lock, and permits of a semaphore beside them.
func TestTorture(t *testing.T) {
	// Short mode (CI, with -race): about two minutes, three on a loaded machine. The mixed
	// run is longer, so that each fault lands at least once before the workers are done:
	// one round of the seven faults, with their periods, takes some 20 seconds (without
	// -race, the workers may be done sooner: see run).
	cfg := config{workers: 3, goroutines: 3, iters: 60, period: time.Second, maxFaults: 3, deadline: 90 * time.Second}
	mixed := cfg
	mixed.iters, mixed.maxFaults = 240, 2*len(allFaults)
	if *long {
		// Long mode: about 6 minutes. The deadlines add up to 16.5 minutes, which bounds a
		// run whose workers hang.
		cfg = config{workers: 4, goroutines: 4, iters: 200, period: time.Second, maxFaults: 10, deadline: 90 * time.Second}
		// The mixed run alone must reach 20,000 acquisitions under every fault. Its faults
		// come one a period, each fault once in each round of len(allFaults), for as long
		// as the workers run (a kill starts a replacement with every iteration to do) or
		// until maxFaults. Some 15% of the Lock calls fail (a call in flight when Redis
		// stalls ends after relock.WithTimeout), so 4×4×600 iterations per kind and the
		// replacements' make some 50,000 acquisitions, in about two and a half minutes.
		mixed = config{workers: 4, goroutines: 4, iters: 600, period: time.Second, maxFaults: 10 * len(allFaults),
			deadline: 4*time.Minute + 30*time.Second, minAcquisitions: 20000}
	}
	runs := []struct {
		name string
		cfg  config
	}{{"none", cfg}}
	for _, f := range allFaults {
		c := cfg
		c.faults = []fault{f}
		if f == faultStop {
			// A stop lands in a section about half the time (the worker may be waiting on
			// Redis instead), and takes some four seconds: the workers run long enough
			// for a few.
			c.iters *= 3
		}
		runs = append(runs, struct {
			name string
			cfg  config
		}{string(f), c})
	}
	mixed.faults = allFaults
	runs = append(runs, struct {
		name string
		cfg  config
	}{"mixed", mixed})
	start := time.Now()
	var total summary
	ran := 0
	for _, r := range runs {
		t.Run(r.name, func(t *testing.T) {
			ran++
			s := run(t, r.cfg)
			t.Log(s)
			if n := s.total().acquisitions; n < r.cfg.minAcquisitions {
				t.Errorf("%d acquisitions, want at least %d", n, r.cfg.minAcquisitions)
			}
			total.add(s)
		})
	}
	t.Logf("%d runs in %v", ran, time.Since(start).Round(time.Millisecond))
	t.Log(total)
	t.Log(total.sem.semNote())
	fmt.Printf("%s\n%s\n", total, total.sem.semNote())
}

// worker is one worker process and its proxy.
type worker struct {
	id      string
	proxy   *redistest.Proxy
	cmd     *exec.Cmd
	history string
	done    chan struct{}
	err     error
	killed  bool   // by a kill fault
	hung    bool   // still running at the deadline, and killed then
	client  string // its relock client's id, from its first record
}

func (w *worker) exited() bool {
	select {
	case <-w.done:
		return true
	default:
		return false
	}
}

type harness struct {
	t        *testing.T
	cfg      config
	lock     *redistest.Server
	res      *redistest.Server
	dir      string
	workers  []*worker
	next     int
	kills    int
	injected int
	byFault  map[fault]int
	// landed counts, by fault, the injections that did what the fault is: a worker killed,
	// stopped or cut off, a subscription connection killed, a held lock's key deleted. A
	// fault drawn when no worker was left to take it, or no section would linger, landed
	// nowhere, and the checks of its run had nothing of it to look at.
	landed map[fault]int
	deck   []fault // the rest of this round of faults
	pauses []pause
	// deletions are the faults that removed holds behind their holders' backs; cuts are
	// the restarts (from the first blackholed proxy to the last reopened), which empty
	// the fair queues.
	deletions []deletion
	cuts      []Window
	sem       *semTracker // the parent's view of the semaphore (semaphore_test.go)
}

// deletion is one fault that removed holds from Redis behind their holders' backs: a DEL
// of a held lock's key, or a restart of the server without persistence.
type deletion struct {
	restart bool
	win     Window                     // the holds were in Redis at From and gone by To
	open    int64                      // restart: when the clients could reach the new server
	fields  map[string]map[string]bool // by kind of lock: the hash fields removed
	// restart: by kind of lock, the fencing counter when the holds were looked at. The new
	// server's counter starts above it, so a hold with a higher token was granted after the
	// restart (see markDeleted).
	tokens map[string]int64
}

// pause is one SIGSTOP of a worker, from just before the signal to just after SIGCONT.
type pause struct {
	worker     string
	stop, cont int64
	// held: the worker's history shows a section the stop froze while held (froze).
	held bool
}

func (h *harness) start() *worker {
	t := h.t
	id := "w" + strconv.Itoa(h.next)
	h.next++
	w := &worker{id: id, proxy: redistest.StartProxy(t, h.lock.Addr()), history: filepath.Join(h.dir, id+".jsonl"), done: make(chan struct{})}
	out, err := os.Create(filepath.Join(h.dir, id+".out"))
	if err != nil {
		t.Fatal(err)
	}
	w.cmd = exec.Command(os.Args[0], "-test.run=^$")
	w.cmd.Env = append(os.Environ(),
		envWorker+"="+id,
		envLock+"="+w.proxy.Addr(),
		envRes+"="+h.res.Addr(),
		envHistory+"="+w.history,
		envName+"="+lockName,
		envGs+"="+strconv.Itoa(h.cfg.goroutines),
		envIters+"="+strconv.Itoa(h.cfg.iters),
	)
	w.cmd.Stdout, w.cmd.Stderr = out, out
	w.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := w.cmd.Start(); err != nil {
		out.Close()
		t.Fatal(err)
	}
	go func() {
		w.err = w.cmd.Wait()
		out.Close()
		close(w.done)
	}()
	t.Cleanup(func() {
		if !w.exited() {
			_ = w.cmd.Process.Signal(syscall.SIGCONT)
			_ = w.cmd.Process.Kill()
		}
		<-w.done
	})
	h.workers = append(h.workers, w)
	return w
}

func (h *harness) running() []*worker {
	var ws []*worker
	for _, w := range h.workers {
		if !w.exited() {
			ws = append(ws, w)
		}
	}
	return ws
}

// clientOf returns the relock client id of w, once its first record is written.
// froze reports whether the stop p of w froze one of its sections while held, as the
// run's end tells from the history (see run): it reads w's history until the section
// frozen, if any, has ended and been written, at most a second after the SIGCONT.
func (h *harness) froze(w *worker, p pause) bool {
	for end := time.Now().Add(time.Second); time.Now().Before(end); time.Sleep(20 * time.Millisecond) {
		for _, r := range readHistory(h.t, w.history, -1) {
			if r.Held() && r.Acq <= p.stop && r.Check >= p.cont {
				return true
			}
		}
	}
	return false
}

func (h *harness) clientOf(w *worker) string {
	if w.client == "" {
		for _, r := range readHistory(h.t, w.history, 1) {
			if r.Hello {
				w.client = r.Client
			}
		}
	}
	return w.client
}

// connected reports whether every running worker has its clients: a fault waits for the
// workers that are starting (the first ones, or a killed worker's replacement), since a
// worker whose connection fails as it starts exits, and the run would count a hang that
// says nothing about the locks. The run's deadline bounds the wait.
func (h *harness) connected() bool {
	for _, w := range h.running() {
		if h.clientOf(w) == "" {
			return false
		}
	}
	return true
}

// holder returns a running worker that holds one of the locks, preferably in a long
// section, so that the fault lands inside it: it looks at the locks' owners every 10ms for
// up to holderWait, and returns the worker of an owner seen twice in a row (one hold that
// lasted 10ms: sections are shorter but for the long ones). Failing that, it returns the
// worker of the last owner seen, or a random running worker.
func (h *harness) holder() *worker {
	const holderWait = time.Second
	ws := h.running()
	if len(ws) == 0 {
		return nil
	}
	workerOf := func(field string) *worker {
		client, _, _ := strings.Cut(field, ":")
		for _, w := range ws {
			if h.clientOf(w) == client {
				return w
			}
		}
		return nil
	}
	var last *worker
	seen := map[string]bool{}
	for end := time.Now().Add(holderWait); time.Now().Before(end); time.Sleep(10 * time.Millisecond) {
		now := map[string]bool{}
		for _, i := range rand.Perm(len(kinds)) {
			fields, err := h.lock.Do(h.t, "HKEYS", lockKey(lockName, kinds[i])).AsStrSlice()
			if err != nil {
				continue
			}
			for _, f := range fields {
				if f == "mode" { // the read-write lock's
					continue
				}
				w := workerOf(f)
				if w == nil {
					continue
				}
				if seen[f] {
					return w
				}
				now[f], last = true, w
			}
		}
		seen = now
	}
	if last != nil {
		return last
	}
	return ws[rand.IntN(len(ws))]
}

// nextFault draws the next fault: the faults of the run in shuffled rounds, so that a run
// of n rounds injects each of them n times. Past maxFaults (see wantsFault) it draws the
// faults that have not landed yet.
func (h *harness) nextFault() fault {
	if h.injected >= h.cfg.maxFaults {
		if left := h.unlanded(); len(left) > 0 {
			return left[rand.IntN(len(left))]
		}
	}
	if len(h.deck) == 0 {
		h.deck = append(h.deck, h.cfg.faults...)
		rand.Shuffle(len(h.deck), func(i, j int) { h.deck[i], h.deck[j] = h.deck[j], h.deck[i] })
	}
	f := h.deck[0]
	h.deck = h.deck[1:]
	return f
}

// wantsFault reports whether the run injects another fault: up to maxFaults, and beyond
// that while one of the run's faults has not landed yet, so that the run has something
// of each to check (the workers' end and the deadline still bound the run).
func (h *harness) wantsFault() bool {
	return h.injected < h.cfg.maxFaults || len(h.unlanded()) > 0
}

// unlanded returns the faults of the run that have not landed yet. A stop is taken for
// landed here once its worker's history shows a section it froze while held (froze): the
// worker may be between sections when stopped (waiting on Redis in Lock or Unlock, or
// having let go since the holder's look), more often on a loaded machine.
func (h *harness) unlanded() []fault {
	var out []fault
	for _, f := range h.cfg.faults {
		if f == faultStop && !slices.ContainsFunc(h.pauses, func(p pause) bool { return p.held }) || f != faultStop && h.landed[f] == 0 {
			out = append(out, f)
		}
	}
	return out
}

// inject runs one fault to its end.
func (h *harness) inject(f fault) {
	t := h.t
	h.injected++
	if h.byFault == nil {
		h.byFault = map[fault]int{}
	}
	h.byFault[f]++
	switch f {
	case faultKill:
		w := h.holder()
		if w == nil {
			return
		}
		h.semHolding(w)
		w.killed = true
		h.kills++
		h.landed[f]++
		_ = w.cmd.Process.Kill()
		<-w.done
		h.semKilled(w)
		h.start()
	case faultStop:
		w := h.holder()
		if w == nil {
			return
		}
		p := pause{worker: w.id, stop: time.Now().UnixNano()}
		if err := w.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
			return
		}
		time.Sleep(pastLease)
		_ = w.cmd.Process.Signal(syscall.SIGCONT)
		p.cont = time.Now().UnixNano()
		p.held = h.froze(w, p)
		h.pauses = append(h.pauses, p) // landed if it froze a held section (see run)
	case faultBlackhole:
		w := h.holder()
		if w == nil {
			return
		}
		w.proxy.Blackhole()
		time.Sleep(pastLease)
		w.proxy.Unblackhole()
		h.landed[f]++
	case faultPubSub:
		if n, err := h.lock.Do(t, "CLIENT", "KILL", "TYPE", "pubsub").AsInt64(); err == nil && n > 0 {
			h.landed[f]++
		}
	case faultRestart:
		h.restart()
		h.landed[f]++
	case faultSleep:
		if err := h.lock.Do(t, "DEBUG", "SLEEP", "2").Error(); err == nil {
			h.landed[f]++
		}
	case faultDelete:
		h.deleteHeld()
	}
}

// deleteHeld deletes a held lock's key behind its holder's back: it asks a worker to
// linger in its next section, deletes that section's lock key (only if the hold is still
// there), and waits for the section to end. The holder must learn of the loss from its
// next renewal: its context ends with ErrLeaseLost. A worker whose section does not linger
// in time (between sections, waiting in Lock, near its last iteration) or whose hold is
// gone already leaves the fault to the next worker, in a random order, each asked once.
func (h *harness) deleteHeld() {
	ws := h.lingerers()
	rand.Shuffle(len(ws), func(i, j int) { ws[i], ws[j] = ws[j], ws[i] })
	for _, w := range ws {
		if h.deleteHeldOf(w) {
			return
		}
	}
}

// deleteHeldOf runs the deletion of deleteHeld on one worker's lingering section, and
// reports whether it deleted the hold.
func (h *harness) deleteHeldOf(w *worker) bool {
	off := fileSize(w.history)
	_ = w.cmd.Process.Signal(lingerSignal)
	notes := h.awaitNotes(map[*worker]int64{w: off}, 3*time.Second)
	note, ok := notes[w]
	if !ok {
		_ = w.cmd.Process.Signal(stopLingerSignal)
		h.t.Logf("delete: no section of %s lingered within 3s", w.id)
		return false
	}
	from := time.Now().UnixNano()
	fields, _ := h.lock.Do(h.t, "EVAL", deleteHeldScript, "1", lockKey(lockName, note.Lock), note.Owner).AsStrSlice()
	to := time.Now().UnixNano()
	if len(fields) > 0 {
		h.deletions = append(h.deletions, deletion{win: Window{from, to}, fields: map[string]map[string]bool{note.Lock: set(fields)}})
		h.landed[faultDelete]++
	} else {
		h.t.Logf("delete: the hold of %s's lingering section on %s (field %q) was gone already", w.id, note.Lock, note.Owner)
	}
	h.awaitSections(notes, map[*worker]int64{w: off})
	return len(fields) > 0
}

// deleteHeldScript deletes the lock KEYS[1] if ARGV[1] holds it, and returns the fields
// the hash had (empty if it was not held so).
const deleteHeldScript = `
if redis.call('hexists', KEYS[1], ARGV[1]) == 0 then return {} end
local fields = redis.call('hkeys', KEYS[1])
redis.call('del', KEYS[1])
return fields`

// restart restarts the lock server without persistence, which loses every lock, queue,
// fencing counter and the semaphore's count (set again by semReset). Each worker is asked
// first to linger in its next section, so that old holders are still holding, watching
// their contexts, when the server comes back.
// While the server restarts, every proxy is blackholed: the holds present just before are
// noted (they are the ones lost), and each lock's fencing counter is set back above
// every token handed out before any client reaches the new server. The proxies then open
// at once: new holders come in while old ones have not yet learned that their holds are
// gone, which the run measures (RestartOverlap). The docs (operations.md) describe that
// window; the client shortens it by checking every hold when its subscriber reconnects.
func (h *harness) restart() {
	t := h.t
	offs := map[*worker]int64{}
	for _, w := range h.lingerers() {
		offs[w] = fileSize(w.history)
		_ = w.cmd.Process.Signal(lingerSignal)
	}
	notes := h.awaitNotes(offs, time.Second)
	for w := range offs {
		if _, ok := notes[w]; !ok {
			_ = w.cmd.Process.Signal(stopLingerSignal)
			delete(offs, w)
		}
	}

	began := time.Now().UnixNano()
	for _, w := range h.workers {
		w.proxy.Blackhole()
	}
	// Requests already past the proxies reach the server before it is looked at. Then the
	// workers' connections are closed, so that none runs after the look: a proxy may have
	// read a request before the blackhole and still be writing it (a loaded machine can
	// delay it past any wait), and a hold taken after the look would be lost in the
	// restart unrecorded, its holder's reply held by the proxy until it reopens. Once
	// killed, nothing reaches this server but the look: the proxies dial it again, but
	// hold what their clients send until the new server is up.
	time.Sleep(50 * time.Millisecond)
	h.lock.Do(t, "CLIENT", "KILL", "TYPE", "normal", "SKIPME", "yes")
	d := deletion{restart: true, fields: map[string]map[string]bool{}, tokens: map[string]int64{}}
	d.win.From = time.Now().UnixNano()
	for _, k := range kinds {
		fields, _ := h.lock.Do(t, "HKEYS", lockKey(lockName, k)).AsStrSlice()
		d.fields[k] = set(fields)
		d.tokens[k], _ = h.lock.Do(t, "GET", tokenCounter(k)).AsInt64()
	}
	h.lock.Restart(t)
	for _, k := range kinds {
		h.lock.Do(t, "SET", tokenCounter(k), strconv.FormatInt(d.tokens[k]+1000, 10))
	}
	h.semReset()
	d.win.To = time.Now().UnixNano()
	for _, w := range h.workers {
		w.proxy.Unblackhole()
	}
	d.open = time.Now().UnixNano()
	h.deletions = append(h.deletions, d)
	h.cuts = append(h.cuts, Window{began, d.open})
	h.awaitSections(notes, offs)
}

func set(ss []string) map[string]bool {
	m := map[string]bool{}
	for _, s := range ss {
		m[s] = true
	}
	return m
}

// lingerers returns the running workers that can be asked to linger: their signal
// handlers are in place once their first record is written.
func (h *harness) lingerers() []*worker {
	var ws []*worker
	for _, w := range h.running() {
		if h.clientOf(w) != "" {
			ws = append(ws, w)
		}
	}
	return ws
}

// awaitNotes waits, at most wait, for each worker of offs to note in its history (past
// the offset) that a section lingers, and returns the notes found.
func (h *harness) awaitNotes(offs map[*worker]int64, wait time.Duration) map[*worker]Record {
	notes := map[*worker]Record{}
	for end := time.Now().Add(wait); len(notes) < len(offs) && time.Now().Before(end); time.Sleep(10 * time.Millisecond) {
		for w, off := range offs {
			if _, ok := notes[w]; ok {
				continue
			}
			for _, r := range readHistoryFrom(h.t, w.history, off) {
				if r.Linger {
					notes[w] = r
					break
				}
			}
		}
	}
	return notes
}

// awaitSections waits until the lingering section of each note has written its record,
// or its worker has exited, bounded by the linger's own bound and some.
func (h *harness) awaitSections(notes map[*worker]Record, offs map[*worker]int64) {
	end := time.Now().Add(lingerMax + 2*time.Second)
	for w, n := range notes {
		for !w.exited() && time.Now().Before(end) {
			found := false
			for _, r := range readHistoryFrom(h.t, w.history, offs[w]) {
				if r.Attempt() && r.Lock == n.Lock && r.G == n.G && r.I == n.I {
					found = true
				}
			}
			if found {
				break
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
}

// fileSize is the size of the file at path, 0 if it is not there.
func fileSize(path string) int64 {
	fi, err := os.Stat(path)
	if err != nil {
		return 0
	}
	return fi.Size()
}

// tokenCounter is the fencing counter of the lock of kind, on the lock server.
func tokenCounter(kind string) string { return "redisson_lock_token:{" + lockKey(lockName, kind) + "}" }

// run starts the servers and workers, injects faults until every worker is done or the
// deadline passes, and checks the merged history, lock by lock.
func run(t *testing.T, cfg config) summary {
	dir := t.TempDir()
	if keep := os.Getenv(envKeep); keep != "" {
		dir = filepath.Join(keep, strings.ReplaceAll(t.Name(), "/", "_")+"-"+strconv.FormatInt(time.Now().UnixNano(), 36))
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		t.Logf("histories and worker output kept in %s", dir)
	}
	h := &harness{t: t, cfg: cfg, lock: redistest.StartServer(t), res: redistest.StartServer(t), dir: dir, landed: map[fault]int{}}
	h.sem = newSemTracker(h)
	h.semStart()
	for range cfg.workers {
		h.start()
	}
	began := time.Now()
	deadline := began.Add(cfg.deadline)
	nextFault := time.Now().Add(cfg.period)
	nextRepair := time.Now().Add(semRepairPeriod)
	for len(h.running()) > 0 && time.Now().Before(deadline) {
		if len(cfg.faults) > 0 && h.wantsFault() && time.Now().After(nextFault) && h.connected() {
			f := h.nextFault()
			h.inject(f)
			h.semRepair("after "+string(f), false)
			nextFault = time.Now().Add(cfg.period)
			nextRepair = time.Now().Add(semRepairPeriod)
		}
		if time.Now().After(nextRepair) {
			h.semRepair("periodic", false)
			nextRepair = time.Now().Add(semRepairPeriod)
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Logf("workers done in %v", time.Since(began).Round(time.Millisecond))

	s := summary{faults: h.injected}
	for _, w := range h.running() { // past the deadline: hung
		w.hung = true
		_ = w.cmd.Process.Signal(syscall.SIGCONT)
		_ = w.cmd.Process.Kill()
		<-w.done
	}
	// Every section has ended: the count must be right, and what it lacks is repaired
	// (and counted) as during the run.
	h.semRepair("end", true)

	// Every worker that was not killed by a fault counts once: as a hang when it did not
	// finish its iterations (still running at the deadline, or exited early), as a worker
	// error when it finished them but exited with an error (a goroutine leak, a data race).
	var history []Record
	for _, w := range h.workers {
		rs := readHistory(t, w.history, -1)
		history = append(history, rs...)
		if w.killed {
			continue
		}
		done := len(rs) > 0 && rs[len(rs)-1].Done
		out := func() string { b, _ := os.ReadFile(filepath.Join(h.dir, w.id+".out")); return string(b) }
		switch {
		case w.hung:
			s.hangs++
			t.Errorf("worker %s still running at the %v deadline (unfinished goroutines per kind: %v); output:\n%s",
				w.id, cfg.deadline, unfinished(rs, cfg), out())
		case !done:
			s.hangs++
			t.Errorf("worker %s did not finish its iterations (exit: %v; unfinished goroutines per kind: %v); output:\n%s",
				w.id, w.err, unfinished(rs, cfg), out())
		case w.err != nil:
			s.workerErrors++
			t.Errorf("worker %s finished its iterations but exited with %v; output:\n%s", w.id, w.err, out())
		}
	}
	// Over every worker's records at once: a hold handed on has no field of its own, and
	// is told by the fields that no worker's record names (see markDeleted).
	markDeleted(history, h.deletions)
	for _, p := range h.pauses {
		n := 0
		for _, r := range history {
			if r.Held() && r.Worker == p.worker && r.Acq <= p.stop && r.Check >= p.cont {
				n++
			}
		}
		t.Logf("SIGSTOP of %s for %v froze %d sections while held", p.worker, time.Duration(p.cont-p.stop).Round(time.Millisecond), n)
		if n > 0 {
			h.landed[faultStop]++
		}
	}
	for _, r := range pausedLive(history, h.pauses) {
		t.Errorf("section frozen by SIGSTOP past its lease found its context live after SIGCONT: %v", r)
	}
	t.Logf("%d faults %v (landed %v), %d workers killed", h.injected, h.byFault, h.landed, h.kills)
	// A run of one fault passes on what that fault did, so it must have done something. The
	// mixed run draws the faults not landed yet as long as its workers run, but a fast
	// machine may finish them first: a fault it missed is said, and checked by its own run.
	for _, f := range cfg.faults {
		switch {
		case h.landed[f] > 0:
		case len(cfg.faults) == 1:
			t.Errorf("fault %s was drawn %d times and never landed: the run checked nothing of it", f, h.byFault[f])
		default:
			t.Logf("fault %s was drawn %d times and never landed in this run; its own run checks it", f, h.byFault[f])
		}
	}

	for _, kind := range kinds {
		k := s.kind(kind)
		hk := OfLock(history, kind)
		holds := Holds(hk)
		k.acquisitions = len(holds)
		attempts, lost := 0, 0
		for _, r := range hk {
			if r.Attempt() {
				attempts++
			}
		}
		for _, r := range holds {
			if !r.Live {
				lost++
			}
			if r.Read() {
				k.reads++
			}
		}
		t.Logf("%s: %d attempts, %d acquisitions (%d reads; %d ended with the lease lost)%s", kind, attempts, len(holds), k.reads, lost, lockErrors(hk))

		ov := Overlaps(hk)
		k.overlaps = len(ov)
		for i, p := range ov {
			if i == 5 {
				break
			}
			t.Errorf("%s: live sections overlap:\n  %v\n  %v", kind, p[0], p[1])
		}

		counter, err := h.res.Do(t, "GET", counterKey(kind)).AsInt64()
		if err != nil && len(holds) > k.reads {
			t.Errorf("GET %s: %v", counterKey(kind), err)
		}
		f := CheckFencing(hk, counter)
		k.lostUpdates = f.LostUpdates
		k.staleRejected = f.Rejected
		t.Logf("%s: fenced counter %d: %d writes accepted, %d rejected, %d failed, %d unrecorded", kind, counter, f.Accepted, f.Rejected, f.Errors, f.Unrecorded)
		if f.LostUpdates != 0 {
			t.Errorf("%s: %d lost updates: counter %d, %d accepted writes recorded", kind, f.LostUpdates, counter, f.Accepted)
		}
		// A write no record accounts for is one a killed worker made before recording it,
		// or one whose reply did not come in time (a worker frozen by SIGSTOP while its
		// write was in flight finds the write's deadline passed after SIGCONT).
		if f.Unrecorded > int64(h.kills+f.Errors) {
			t.Errorf("%s: counter %d counts %d writes no record accounts for, with only %d workers killed and %d writes failed",
				kind, counter, f.Unrecorded, h.kills, f.Errors)
		}
		if f.OutOfOrder != 0 {
			t.Errorf("%s: %d writes accepted with a token lower than an earlier accepted one", kind, f.OutOfOrder)
		}
		for _, r := range f.LiveRejected {
			t.Errorf("%s: write rejected although the holder's context was live: %v (resource had token %d)", kind, r, r.Last)
		}
		for _, r := range f.Unsuperseded {
			t.Errorf("%s: write rejected with no higher token handed out: %v", kind, r)
		}

		if kind == kindFair {
			ov := CheckFairOrder(hk, entryLife, h.cuts)
			k.orderViolations = len(ov)
			queued := 0
			for _, r := range hk {
				if r.Attempt() && len(r.Queued) > 0 {
					queued++
				}
			}
			t.Logf("%s: %d grants out of turn; %d Lock calls queued (%d restarts emptied the queue)", kind, len(ov), queued, len(h.cuts))
			for i, v := range ov {
				if i == 5 {
					break
				}
				t.Errorf("%s: granted out of turn:\n  %v\n  while this waiter queued before its Lock call and was live until after it returned:\n  %v (queued %s)",
					kind, v.Jumper, v.Skipped, describeQueued(v.Skipped))
			}
		}

		bad, lostHolds := CheckDeletedHolds(hk, watchdogTimeout)
		k.lostHolds = lostHolds
		lingered := 0
		for _, r := range holds {
			if r.Deleted() {
				k.deleted++
				if r.Lingered {
					lingered++
				}
			}
		}
		regranted := 0
		for _, r := range holds {
			if r.LostFrom != 0 {
				regranted++
			}
		}
		if regranted > 0 {
			t.Logf("%s: %d Lock calls granted again after a restart lost their first grant before its reply came", kind, regranted)
		}
		if k.deleted > 0 {
			t.Logf("%s: %d holds deleted behind their holders' backs (%d lingering), %d seen lost by their holders%s",
				kind, k.deleted, lingered, lostHolds, lossDelays(holds))
		}
		for _, b := range bad {
			t.Errorf("%s: deleted hold: %s: %v (lingered from %s, deleted at %s, basis %s, gone %s)", kind, b.Why, b.R,
				stamp(b.R.LingerFrom), stamp(b.R.DelFrom), stamp(b.R.Basis), stamp(b.R.Gone))
		}
		for _, d := range h.deletions {
			if !d.restart {
				continue
			}
			o := RestartOverlap(hk, Window{d.win.From, d.open})
			t.Logf("%s: restart at %s: old and new holders overlapped for %v", kind, stamp(d.win.From), o.Round(time.Millisecond))
			s.restartOverlap = max(s.restartOverlap, o)
			if o > watchdogTimeout {
				t.Errorf("%s: after a restart an old hold's context stayed live %v after a new holder acquired, more than a lease (%v)", kind, o, watchdogTimeout)
			}
		}

		t0 := time.Now()
		res := CheckLinearizable(hk, 2*time.Minute)
		excl := len(holds) - k.reads
		t.Logf("%s: porcupine: %s in %v (%d operations)", kind, res, time.Since(t0).Round(time.Millisecond), 2*excl)
		if res != porcupine.Ok {
			t.Errorf("%s: porcupine: history of %d exclusive acquisitions is %s, want %s", kind, excl, res, porcupine.Ok)
			t.Logf("%s: %s", kind, ExplainIllegal(hk, 2*time.Minute))
		}
	}

	s.sem = h.checkSemaphore(history)

	checkKeys(t, h)
	return s
}

// lockErrors describes the failed Lock calls of history: how many, and the commonest
// errors.
func lockErrors(history []Record) string {
	counts := map[string]int{}
	n := 0
	for _, r := range history {
		if r.LockErr != "" {
			counts[r.LockErr]++
			n++
		}
	}
	if n == 0 {
		return ""
	}
	errs := make([]string, 0, len(counts))
	for e := range counts {
		errs = append(errs, e)
	}
	sort.Slice(errs, func(i, j int) bool { return counts[errs[i]] > counts[errs[j]] })
	var b strings.Builder
	fmt.Fprintf(&b, "; %d Lock calls failed:", n)
	for i, e := range errs {
		if i == 3 {
			fmt.Fprintf(&b, " …")
			break
		}
		fmt.Fprintf(&b, " %d× %q", counts[e], e)
	}
	return b.String()
}

// unfinished counts, per kind, the goroutines of one worker's history whose last iteration
// is missing.
func unfinished(rs []Record, cfg config) map[string]int {
	last := map[string]bool{}
	for _, r := range rs {
		if r.Attempt() && r.I == cfg.iters-1 {
			last[r.Lock+"/"+strconv.Itoa(r.G)] = true
		}
	}
	out := map[string]int{}
	for _, k := range kinds {
		for g := range cfg.goroutines {
			if !last[k+"/"+strconv.Itoa(g)] {
				out[k]++
			}
		}
	}
	return out
}

// pausedLive returns the sections that a SIGSTOP of their own worker froze past their
// lease and that found their hold's context live when they looked at it (Check) after
// SIGCONT. Every one of them fails the test: a hold's context checks its local deadline
// in Err, and that deadline, taken when the acquiring or the last renewing request was
// sent, passed during the pause, so no such section may see a live context, whichever of
// its goroutine and the watchdog's runs first after SIGCONT. The sections are not made
// less live here: one that overlapped a later holder counts as an overlap too.
//
// A section's hold was surely granted before the pause when Lock returned before SIGSTOP
// (Acq ≤ stop), or when its token is below one that another worker was granted during the
// pause on the same lock (tokens grow with the time of grant, and a stopped process sends
// nothing). The second finds holds whose Lock returned only after SIGCONT; read holds
// carry no token and are found by the first alone.
func pausedLive(history []Record, pauses []pause) []Record {
	var out []Record
	for _, p := range pauses {
		before := map[string]int64{} // per lock: the highest token granted to another worker during the pause
		for _, r := range history {
			if r.Held() && r.Worker != p.worker && r.Acq > p.stop && r.Acq <= p.cont {
				before[r.Lock] = max(before[r.Lock], r.Token)
			}
		}
		for _, r := range history {
			if !r.Held() || !r.Live || r.Worker != p.worker || r.Check < p.cont {
				continue
			}
			if r.Acq <= p.stop || (r.Token > 0 && r.Token <= before[r.Lock]) {
				out = append(out, r)
			}
		}
	}
	return out
}

// checkKeys waits for the leases of killed holders, the read holds'
// timeout keys and the queue entries of killed waiters (of the locks and of the
// semaphore) to run out, then finds no key but the locks' fencing counters and the
// semaphore's count on the lock server and the counters' two keys per kind on the
// resource server.
func checkKeys(t *testing.T, h *harness) {
	allowed := map[string]bool{}
	resKeys := map[string]bool{}
	allowed[semName] = true
	for _, k := range kinds {
		allowed[tokenCounter(k)] = true
		resKeys[counterKey(k)], resKeys[tokenKey(k)] = true, true
	}
	var left []string
	deadline := time.Now().Add(watchdogTimeout + 3*time.Second)
	for {
		left = left[:0]
		for _, k := range scan(t, h.lock) {
			if !allowed[k] {
				left = append(left, k)
			}
		}
		if len(left) == 0 || time.Now().After(deadline) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if len(left) > 0 {
		t.Errorf("keys left on the lock server: %q", left)
	}
	for _, k := range scan(t, h.res) {
		if !resKeys[k] {
			t.Errorf("unexpected key on the resource server: %q", k)
		}
	}
}

// scan returns every key of s.
func scan(t *testing.T, s *redistest.Server) []string {
	var keys []string
	cursor := "0"
	for range 10000 {
		e, err := s.Do(t, "SCAN", cursor, "COUNT", "1000").ToArray()
		if err != nil || len(e) != 2 {
			t.Fatalf("SCAN: %v", err)
		}
		cursor, _ = e[0].ToString()
		ks, _ := e[1].AsStrSlice()
		keys = append(keys, ks...)
		if cursor == "0" {
			return keys
		}
	}
	t.Fatal("SCAN did not finish")
	return nil
}

// markDeleted marks the holds that a deletion removed: their fields were in the hash
// when it was deleted (owners are fresh for every Lock call, so a field names one hold).
//
// A field names one Lock call, which a restart can see granted twice: its request ran on
// the old server and the reply was lost (the restart cut the connections), and the
// client, which asks before sending again (engine's attempt.ran), found the owner holding
// nothing on the new server and was granted there. The record's hold is then the second
// grant, which the restart did not touch, and its token, above the counter the restart
// looked at, tells so: the first grant is marked lost (LostFrom) and the record's hold
// is not deleted. Marking it deleted would end the second grant before it was made.
//
// A hold handed to a waiter by an unlock of its own process (rlock_hand.lua) has no field
// in its record: the waiter sent no acquire script of its own for the spy to see. A
// field of an exclusive lock's hash that no record names is then that hold's: the one
// exclusive hold of the lock, with no field recorded, whose Lock was called before the
// deletion looked at the hash and whose Unlock failed. (Its Lock may return after the
// look: the releaser's reply, and so the waiter's wake-up, can be held up by the fault.)
func markDeleted(history []Record, ds []deletion) {
	named := map[string]map[string]bool{} // by kind: the fields the records name
	for i := range history {
		r := &history[i]
		if !r.Held() || r.Owner == "" {
			continue
		}
		if named[r.Lock] == nil {
			named[r.Lock] = map[string]bool{}
		}
		named[r.Lock][r.Owner] = true
		for _, d := range ds {
			if !d.fields[r.Lock][r.Owner] {
				continue
			}
			if d.restart && r.Token > d.tokens[r.Lock] {
				r.LostFrom, r.LostTo = d.win.From, d.win.To
				continue
			}
			r.DelFrom, r.DelTo = d.win.From, d.win.To
			break
		}
	}
	for _, d := range ds {
		for kind, fields := range d.fields {
			unnamed := 0
			for f := range fields {
				if !named[kind][f] && !strings.HasSuffix(f, ":write") && f != "mode" {
					unnamed++
				}
			}
			if unnamed != 1 || kind == kindRW {
				continue // a read-write lock's read holds may be many: no telling which
			}
			var held []*Record
			for i := range history {
				r := &history[i]
				if r.Held() && r.Lock == kind && !r.Read() && r.Owner == "" && !r.Deleted() &&
					r.Call < d.win.From && !r.UnlockOK && (!d.restart || r.Token <= d.tokens[kind]) &&
					!goneBefore(*r, d.win.From) {
					held = append(held, r)
				}
			}
			if len(held) == 1 {
				held[0].DelFrom, held[0].DelTo = d.win.From, d.win.To
			}
		}
	}
}

// goneBefore reports whether r's hold was surely out of Redis by at: its section saw its
// context end with the lease lost more than a lease before. Such a hold (its Unlock failed:
// not held) is no field that a deletion at at found, whoever else's it was.
func goneBefore(r Record, at int64) bool {
	return r.Lost && r.Check != 0 && r.Check+int64(watchdogTimeout) < at
}

// lossDelays describes how long the deleted holds that lingered took to see their context
// end after the deletion.
func lossDelays(holds []Record) string {
	var ds []time.Duration
	for _, r := range holds {
		if r.Deleted() && r.Lingered && r.LingerDone != 0 {
			ds = append(ds, time.Duration(r.LingerDone-r.DelTo))
		}
	}
	if len(ds) == 0 {
		return ""
	}
	sort.Slice(ds, func(i, j int) bool { return ds[i] < ds[j] })
	return fmt.Sprintf("; lingering holds saw the loss %v to %v after the deletion", ds[0].Round(time.Millisecond), ds[len(ds)-1].Round(time.Millisecond))
}

func stamp(ns int64) string {
	if ns == 0 {
		return "-"
	}
	return time.Unix(0, ns).Format("15:04:05.000000")
}

func describeQueued(r Record) string {
	var b strings.Builder
	for i, q := range r.Queued {
		if i > 0 {
			b.WriteString(" ")
		}
		fmt.Fprintf(&b, "%s→%s", stamp(q[0]), stamp(q[1]))
	}
	return b.String()
}

// readHistory reads up to n records (all when n < 0) of a worker's history file.
func readHistory(t *testing.T, path string, n int) []Record {
	return readRecords(t, path, 0, n)
}

// readHistoryFrom reads the records of a worker's history file past offset off.
func readHistoryFrom(t *testing.T, path string, off int64) []Record {
	return readRecords(t, path, off, -1)
}

func readRecords(t *testing.T, path string, off int64, n int) []Record {
	f, err := os.Open(path)
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if off > 0 {
		if _, err := f.Seek(off, io.SeekStart); err != nil {
			t.Fatal(err)
		}
	}
	var rs []Record
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() && (n < 0 || len(rs) < n) {
		var r Record
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			continue // a line cut by SIGKILL cannot happen (one write per line), but be lenient
		}
		rs = append(rs, r)
	}
	return rs
}
