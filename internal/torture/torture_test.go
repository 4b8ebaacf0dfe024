//go:build linux

package torture

import (
	"bufio"
	"encoding/json"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
	"go.uber.org/goleak"

	"github.com/relock-go/relock/internal/redistest"
)

var long = flag.Bool("torture.long", false, "run the torture test long (≥ 20,000 acquisitions)")

func TestMain(m *testing.M) {
	if os.Getenv(envWorker) != "" {
		os.Exit(workerMain())
	}
	goleak.VerifyTestMain(m)
}

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
)

var allFaults = []fault{faultKill, faultStop, faultBlackhole, faultPubSub, faultRestart, faultSleep}

// pastLease is how long a stop or a blackhole lasts: past the watchdog timeout.
const pastLease = watchdogTimeout + 500*time.Millisecond

type config struct {
	workers, goroutines, iters int
	faults                     []fault       // drawn at random, one per period
	period                     time.Duration // between the end of a fault and the next
	maxFaults                  int           // per run; twice as many in the mixed run
	deadline                   time.Duration // every worker must be done by then
}

// summary is what one run (or all of them) found.
type summary struct {
	acquisitions, faults, overlaps, lostUpdates, hangs, staleRejected int
}

func (s *summary) add(o summary) {
	s.acquisitions += o.acquisitions
	s.faults += o.faults
	s.overlaps += o.overlaps
	s.lostUpdates += o.lostUpdates
	s.hangs += o.hangs
	s.staleRejected += o.staleRejected
}

func (s summary) String() string {
	return fmt.Sprintf("torture: acquisitions=%d faults=%d overlaps=%d lost-updates=%d hangs=%d stale-writes-rejected=%d",
		s.acquisitions, s.faults, s.overlaps, s.lostUpdates, s.hangs, s.staleRejected)
}

// TestTorture runs the workers once without faults, once with each fault alone and once
// with all of them mixed, and checks every history.
func TestTorture(t *testing.T) {
	cfg := config{workers: 3, goroutines: 4, iters: 60, period: time.Second, maxFaults: 3, deadline: 90 * time.Second}
	if *long {
		cfg = config{workers: 4, goroutines: 5, iters: 200, period: time.Second, maxFaults: 15, deadline: 10 * time.Minute}
	}
	runs := []struct {
		name   string
		faults []fault
	}{{"none", nil}}
	for _, f := range allFaults {
		runs = append(runs, struct {
			name   string
			faults []fault
		}{string(f), []fault{f}})
	}
	runs = append(runs, struct {
		name   string
		faults []fault
	}{"mixed", allFaults})
	start := time.Now()
	var total summary
	for _, r := range runs {
		t.Run(r.name, func(t *testing.T) {
			c := cfg
			c.faults = r.faults
			if len(r.faults) > 1 {
				c.maxFaults *= 2
			}
			s := run(t, c)
			t.Log(s)
			total.add(s)
		})
	}
	t.Logf("%d runs in %v", len(runs), time.Since(start).Round(time.Millisecond))
	t.Log(total)
	fmt.Printf("%s\n", total)
}

// worker is one worker process and its proxy.
type worker struct {
	id      string
	proxy   *redistest.Proxy
	cmd     *exec.Cmd
	history string
	done    chan struct{}
	err     error
	killed  bool
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
	pauses   []pause
}

// pause is one SIGSTOP of a worker, from just before the signal to just after SIGCONT.
type pause struct {
	worker     string
	stop, cont int64
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

// holder returns the running worker that holds the lock now, or a random running one.
func (h *harness) holder() *worker {
	ws := h.running()
	if len(ws) == 0 {
		return nil
	}
	if owners, err := h.lock.Do(h.t, "HKEYS", lockName).AsStrSlice(); err == nil && len(owners) > 0 {
		client, _, _ := strings.Cut(owners[0], ":")
		for _, w := range ws {
			for _, r := range readHistory(h.t, w.history, 1) {
				if r.Hello && r.Client == client {
					return w
				}
			}
		}
	}
	return ws[rand.IntN(len(ws))]
}

// inject runs one fault to its end.
func (h *harness) inject(f fault) {
	t := h.t
	h.injected++
	switch f {
	case faultKill:
		w := h.holder()
		if w == nil {
			return
		}
		w.killed = true
		h.kills++
		_ = w.cmd.Process.Kill()
		<-w.done
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
		h.pauses = append(h.pauses, p)
	case faultBlackhole:
		w := h.holder()
		if w == nil {
			return
		}
		w.proxy.Blackhole()
		time.Sleep(pastLease)
		w.proxy.Unblackhole()
	case faultPubSub:
		h.lock.Do(t, "CLIENT", "KILL", "TYPE", "pubsub")
	case faultRestart:
		// A restart without persistence loses every lock and the fencing counter. The
		// docs (operations.md) say holders learn it at their next renewal, so a server
		// back at once lets a new holder in while an old one still believes it holds:
		// a documented window, not a bug. The run therefore does what an operator must:
		// keep the restarted server away from clients past the lease (every proxy
		// blackholed, so every old hold's context ends on its local deadline first) and
		// set the fencing counter back above every token handed out.
		began := time.Now()
		for _, w := range h.workers {
			w.proxy.Blackhole()
		}
		tok, _ := h.lock.Do(t, "GET", "redisson_lock_token:{"+lockName+"}").AsInt64()
		h.lock.Restart(t)
		h.lock.Do(t, "SET", "redisson_lock_token:{"+lockName+"}", strconv.FormatInt(tok+1000, 10))
		time.Sleep(time.Until(began.Add(pastLease)))
		for _, w := range h.workers {
			w.proxy.Unblackhole()
		}
	case faultSleep:
		h.lock.Do(t, "DEBUG", "SLEEP", "2")
	}
}

// run starts the servers and workers, injects faults until every worker is done or the
// deadline passes, and checks the merged history.
func run(t *testing.T, cfg config) summary {
	h := &harness{t: t, cfg: cfg, lock: redistest.StartServer(t), res: redistest.StartServer(t), dir: t.TempDir()}
	for range cfg.workers {
		h.start()
	}
	deadline := time.Now().Add(cfg.deadline)
	nextFault := time.Now().Add(cfg.period)
	for len(h.running()) > 0 && time.Now().Before(deadline) {
		if len(cfg.faults) > 0 && h.injected < cfg.maxFaults && time.Now().After(nextFault) {
			h.inject(cfg.faults[rand.IntN(len(cfg.faults))])
			nextFault = time.Now().Add(cfg.period)
		}
		time.Sleep(20 * time.Millisecond)
	}

	var s summary
	s.faults = h.injected
	for _, w := range h.running() { // past the deadline: hung
		s.hangs++
		t.Errorf("worker %s still running at the %v deadline", w.id, cfg.deadline)
		_ = w.cmd.Process.Signal(syscall.SIGCONT)
		_ = w.cmd.Process.Kill()
		<-w.done
	}

	var history []Record
	for _, w := range h.workers {
		rs := readHistory(t, w.history, -1)
		history = append(history, rs...)
		done := len(rs) > 0 && rs[len(rs)-1].Done
		if w.killed {
			continue
		}
		if !done || w.err != nil {
			if done || s.hangs == 0 {
				s.hangs++
			}
			out, _ := os.ReadFile(filepath.Join(h.dir, w.id+".out"))
			t.Errorf("worker %s did not finish its iterations (exit: %v); output:\n%s", w.id, w.err, out)
		}
	}
	paused := excusePauses(history, h.pauses)
	holds := Holds(history)
	s.acquisitions = len(holds)
	attempts, lost := 0, 0
	for _, r := range history {
		if !r.Hello && !r.Done {
			attempts++
		}
	}
	for _, r := range holds {
		if !r.Live {
			lost++
		}
	}
	t.Logf("%d attempts, %d acquisitions (%d ended with the lease lost), %d faults, %d workers killed",
		attempts, len(holds), lost, h.injected, h.kills)
	for _, r := range paused {
		// A hold's context checks its local deadline in Err, so a section that resumes
		// after its lease ran out sees it ended, whatever goroutine runs first.
		t.Errorf("section paused by SIGSTOP found its context live after its lease ran out: %v", r)
	}

	ov := Overlaps(history)
	s.overlaps = len(ov)
	for i, p := range ov {
		if i == 5 {
			break
		}
		t.Errorf("live sections overlap:\n  %v\n  %v", p[0], p[1])
	}

	counter, err := h.res.Do(t, "GET", counterKey).AsInt64()
	if err != nil && len(holds) > 0 {
		t.Errorf("GET %s: %v", counterKey, err)
	}
	f := CheckFencing(history, counter)
	s.lostUpdates = f.LostUpdates
	s.staleRejected = f.Rejected
	t.Logf("fenced counter %d: %d writes accepted, %d rejected, %d unrecorded", counter, f.Accepted, f.Rejected, f.Unrecorded)
	if f.LostUpdates != 0 {
		t.Errorf("%d lost updates: counter %d, %d accepted writes recorded", f.LostUpdates, counter, f.Accepted)
	}
	if f.Unrecorded > int64(h.kills) {
		t.Errorf("counter %d counts %d writes no record accounts for, with only %d workers killed", counter, f.Unrecorded, h.kills)
	}
	if f.OutOfOrder != 0 {
		t.Errorf("%d writes accepted with a token lower than an earlier accepted one", f.OutOfOrder)
	}
	for _, r := range f.LiveRejected {
		t.Errorf("write rejected although the holder's context was live: %v (resource had token %d)", r, r.Last)
	}
	for _, r := range f.Unsuperseded {
		t.Errorf("write rejected with no higher token handed out: %v", r)
	}

	t0 := time.Now()
	timeout := 2 * time.Minute
	res := CheckLinearizable(history, timeout)
	t.Logf("porcupine: %s in %v (%d operations)", res, time.Since(t0).Round(time.Millisecond), 2*len(holds))
	if res != porcupine.Ok {
		t.Errorf("porcupine: history of %d acquisitions is %s, want %s", len(holds), res, porcupine.Ok)
	}

	checkKeys(t, h)
	return s
}

// excusePauses finds the attempts (from the call of Lock to the end of the section) that
// a SIGSTOP of their own worker froze past the lease and whose hold's context was still
// live when they ended, and counts them as
// lost (Live = false), returning them. Only holds that another worker's hold superseded
// during the pause count: a goroutine that waited in Lock through the pause and got the
// lock after it holds a fresh hold, and a hold nobody took over is still exclusive.
//
// This is the limit of any lease: the hold's context ends on the watchdog's goroutine,
// and after SIGCONT the section's goroutine can run (and look at the context) before
// the watchdog's does, although the local deadline passed long before; no check inside
// the process can close that window. What must still hold is fencing: such a section's
// write reaches the resource with a superseded token and is turned away, which
// CheckFencing verifies (accepted tokens never go down). Every excused section is logged.
func excusePauses(history []Record, pauses []pause) []Record {
	var out []Record
	for _, p := range pauses {
		// Tokens grow with the time of grant: a hold of the paused worker whose token is
		// below one another worker was handed during the pause was superseded then, its
		// lease having run out while the worker was stopped.
		var before int64
		for _, r := range history {
			if r.Held() && r.Worker != p.worker && r.Acq > p.stop && r.Acq <= p.cont {
				before = max(before, r.Token)
			}
		}
		for i, r := range history {
			if !r.Held() || !r.Live || r.Worker != p.worker || r.Call >= p.cont || r.End <= p.stop {
				continue
			}
			if r.Token > before {
				continue // not superseded during the pause: checked like any other hold
			}
			history[i].Live = false
			history[i].Cause = fmt.Sprintf("paused by SIGSTOP for %v; context live %v after SIGCONT",
				time.Duration(p.cont-p.stop).Round(time.Millisecond), time.Duration(r.End-p.cont))
			out = append(out, history[i])
		}
	}
	return out
}

// checkKeys waits for the leases of killed holders and the unlock latches to run out,
// then finds no key but the fencing counter on the lock server and the counter's two on
// the resource server.
func checkKeys(t *testing.T, h *harness) {
	allowed := map[string]bool{"redisson_lock_token:{" + lockName + "}": true}
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
		if k != counterKey && k != tokenKey {
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

// readHistory reads up to n records (all when n < 0) of a worker's history file.
func readHistory(t *testing.T, path string, n int) []Record {
	f, err := os.Open(path)
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
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
