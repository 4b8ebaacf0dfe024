//go:build linux

package torture

import (
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"sort"
	"sync"
	"time"

	"github.com/redis/rueidis"

	"github.com/relock-go/relock"
	"github.com/relock-go/relock/internal/keys"
	"github.com/relock-go/relock/semaphore"
)

// The semaphore workload. Beside its lock work, each worker runs semGoroutines that take
// 1 to semMaxK permits of one semaphore of semPermits permits (relock's semaphore, with
// Redisson's RSemaphore data), hold them a short while and give them back, until the
// worker's lock goroutines are done. Half the sections take plain permits (Acquire,
// Release), half leased ones (AcquireLease, ReleaseLease: RPermitExpirableSemaphore's
// zset of ids, renewed by the worker's watchdog). A leased section's permits are its own
// while its lease's context is live; one that finds it ended is left out of the check. The parent sets the count at the start
// (TrySetPermits), and keeps it right under the faults (semTracker): it gives back, with
// AddPermits, the permits of a worker it killed, it re-sets the count after a restart
// without persistence, and it repairs permits lost otherwise (see semRepair). The checker
// (CheckSemaphore) then proves from the histories that the sections never held more than
// semPermits permits at once.
//
// A killed worker's plain permits are lost for good: the plain semaphore has no lease, so
// nothing gives them back but the parent. Its leased permits the parent leaves alone: it
// checks that each runs out within one lease of the kill (semLeasesKilled), and that a
// count after that has put it back (semLeasesBack). The count the parent keeps right is
// then the count plus the leased permits (both read at one moment, live or run out).
const (
	semPermits    = 3 // N: the semaphore's permits
	semMaxK       = 2 // a section takes 1 to semMaxK permits
	semGoroutines = 2 // per worker: 3 workers × 2 × 1.5 permits asked for 3 permits
	// A section holds its permits semHold plus up to semHoldSpan (and one in a hundred
	// longSection), and a goroutine pauses semPause plus up to semPauseSpan between two
	// sections: the sections fill the semaphore now and then in every run (most-held
	// reaches semPermits), and the workload adds about a fifth to the torture's CPU time,
	// which matters on a loaded machine.
	semHold      = 500 * time.Microsecond
	semHoldSpan  = 2 * time.Millisecond
	semPause     = 5 * time.Millisecond
	semPauseSpan = 10 * time.Millisecond
	// semMaxSections bounds a goroutine's sections, should its worker's locks never end.
	semMaxSections = 100000
	// semInFlight bounds how long after it was sent a request can still run in Redis: a
	// request held by a blackholed proxy runs when the blackhole is lifted (pastLease), one
	// sent during DEBUG SLEEP when the server wakes (2s), one sent by a worker just before
	// SIGSTOP after SIGCONT (pastLease); a request on a connection to a server that was
	// restarted never runs (rueidis does not send a script again on another connection).
	// So a Release whose reply was lost may still add its permits until End + semInFlight,
	// and no later.
	semInFlight = 2*pastLease + 2*time.Second
	// semRepairPeriod is how often the parent looks at the count between faults.
	semRepairPeriod = 500 * time.Millisecond
	// semHoldingWait bounds the wait for a worker about to be killed to hold permits.
	semHoldingWait = 100 * time.Millisecond
)

// semName is the semaphore's name (and key) on the lock server.
var semName = lockKey(lockName, LockSemaphore)

// ---- worker side ----

// semKey carries a semaphore section in its Acquire's context, down to the spy: relock
// passes the caller's context values on to its Redis calls.
type semKey struct{}

// semSection is a semaphore section as its notes name it.
type semSection struct {
	hist   *historyFile
	worker string
	g, i   int
	k      int64
	leased bool
}

func (sec *semSection) note(what string, at int64) { sec.noteIDs(what, at, "") }

func (sec *semSection) noteIDs(what string, at int64, ids string) {
	r := Record{Worker: sec.worker, Lock: LockSemaphore, G: sec.g, I: sec.i, Permits: sec.k, SemNote: what, Leased: sec.leased, LeaseIDs: ids}
	switch what {
	case SemGranted:
		r.Acq = at
	case SemRelease:
		r.End = at
	}
	sec.hist.add(r)
}

// acquireScript is the spy's part: it sends one acquire script of the section's Acquire,
// noted before it is sent and after its reply, so that the parent knows whether a script
// of the section may be in flight (and may have taken permits) or has surely taken them.
func (sec *semSection) acquireScript(ctx context.Context, rc rueidis.Client, cmd rueidis.Completed, argv []string) rueidis.RedisResult {
	ids := ""
	if sec.leased && len(argv) >= 8 {
		ids = argv[7] // the ids a leased acquisition takes its permits under
	}
	sec.noteIDs(SemTry, 0, ids)
	res := rc.Do(ctx, cmd)
	got := time.Now().UnixNano()
	v, err := res.AsIntSlice()
	switch {
	case err != nil || len(v) < 2:
		sec.note(SemError, 0)
	case v[0] == 1:
		sec.note(SemGranted, got)
	default:
		sec.note(SemWait, 0)
	}
	return res
}

// runSemaphore starts the worker's semaphore goroutines, which take sections until stop
// ends; the channel is closed when they are all done.
func runSemaphore(stop context.Context, sem *semaphore.Weighted, id string, hist *historyFile) <-chan struct{} {
	done := make(chan struct{})
	var wg sync.WaitGroup
	for g := range semGoroutines {
		wg.Go(func() {
			for i := 0; i < semMaxSections && stop.Err() == nil; i++ {
				hist.add(semOnce(stop, sem, id, g, i, hist))
				t := time.NewTimer(semPause + time.Duration(rand.Int64N(int64(semPauseSpan))))
				select {
				case <-t.C:
				case <-stop.Done():
				}
				t.Stop()
			}
		})
	}
	go func() {
		wg.Wait()
		close(done)
	}()
	return done
}

// semOnce is one semaphore section: Acquire k permits (bounded by lockWait, and ended by
// stop), hold them, note the release, Release them.
func semOnce(stop context.Context, sem *semaphore.Weighted, id string, g, i int, hist *historyFile) Record {
	k := int64(1 + rand.IntN(semMaxK))
	leased := rand.IntN(2) == 0
	sec := &semSection{hist: hist, worker: id, g: g, i: i, k: k, leased: leased}
	r := Record{Worker: id, Lock: LockSemaphore, G: g, I: i, Permits: k, Leased: leased}
	ctx, cancel := context.WithTimeout(context.WithValue(stop, semKey{}, sec), lockWait)
	defer cancel()
	r.Call = time.Now().UnixNano()
	var held context.Context
	var err error
	if leased {
		held, err = sem.AcquireLease(ctx, k)
	} else {
		err = sem.Acquire(ctx, k)
	}
	r.Acq = time.Now().UnixNano()
	if err != nil {
		r.LockErr = err.Error()
		return r
	}
	if rand.IntN(100) == 0 {
		time.Sleep(longSection)
	} else {
		time.Sleep(semHold + time.Duration(rand.Int64N(int64(semHoldSpan))))
	}
	r.End = time.Now().UnixNano()
	if leased && held.Err() != nil {
		// The lease was lost (its worker was stopped or cut off past it, or the server
		// restarted): when it was lost is not known, so the checker leaves it out.
		r.LeaseLost = true
	}
	sec.note(SemRelease, r.End)
	// Release works with an ended context; its call is bounded by the client's timeout.
	if leased {
		err = sem.ReleaseLease(held)
	} else {
		err = sem.Release(context.WithoutCancel(stop), k)
	}
	r.Rel = time.Now().UnixNano()
	r.UnlockOK = err == nil
	if err != nil {
		r.Unlock = err.Error()
	}
	return r
}

// ---- parent side ----

// semID names a semaphore section.
type semID struct {
	worker string
	g, i   int
}

// semState is what the notes of an open section (no record yet) say.
type semState struct {
	k       int64
	leased  bool   // AcquireLease: the permits live in the zset of leased permits
	ids     string // a leased section's ids (hex), from its latest acquire script
	note    string // the latest note
	granted int64  // when the granting reply came (SemGranted)
	end     int64  // when the section ended (SemRelease)
}

// semTracker is the parent's view of the semaphore: it reads the workers' histories as
// they grow, and keeps the open sections and the recent acquisitions, which is what it
// needs to know which sections may hold permits at a given moment.
//
// The invariant it keeps. Call E the semaphore's count in Redis plus the permits of the
// sections that hold them and will give them back (or that hold them until they send a
// Release that never runs). An acquisition, a release and a timed-out script that takes
// permits nobody will give back (its Acquire failed) never raise E; a kill and a restart
// only lower it; only the parent raises it, by AddPermits or by the count it sets after a
// restart, and it never takes E above semPermits. Then no moment has sections holding
// more than semPermits permits but through a fault of the semaphore, which is what
// CheckSemaphore looks for.
type semTracker struct {
	h      *harness
	offs   map[string]int64 // how far each worker's history was read
	open   map[semID]*semState
	closed []Record // acquisitions that ended recently: their release may still count
	alive  map[string]bool

	// What the summary reports.
	kills     int   // kills announced to semHolding
	lostKills int64 // plain permits that killed workers surely held
	// Leased permits of killed workers: each kill's leases are looked at one lease after
	// the kill (leaseChecks), when they must have run out and be put back by a count.
	leaseChecks []leaseCheck
	leasedKills int64         // leased permits that killed workers held or may have held
	leasedBack  int64         // of them, found put back one lease after the kill
	leasedLost  int64         // of them, still leased then: lost beyond one lease
	leasedLate  time.Duration // the longest time from a kill to its leases' last expiry
	uncertain   int           // sections of killed workers with an acquire script in flight
	restored    int64         // permits given back after kills (AddPermits)
	repaired    int64         // permits given back otherwise (semRepair)
	resets      []int64
	countErrs   int // looks at the count that found it impossible
}

// leaseCheck is a killed worker's leases, to be looked at once they must have run out.
type leaseCheck struct {
	worker string
	killed time.Time
	ids    []string // permit ids, hex
}

func newSemTracker(h *harness) *semTracker {
	return &semTracker{h: h, offs: map[string]int64{}, open: map[semID]*semState{}, alive: map[string]bool{}}
}

// semLine picks the lines of a history that are the semaphore's.
var semLine = []byte(`"lock":"` + LockSemaphore + `"`)

// update reads what the workers wrote since the last update: complete lines only.
func (tr *semTracker) update() {
	now := time.Now().UnixNano()
	for _, w := range tr.h.workers {
		tr.alive[w.id] = !w.exited()
		rs, off := readSemLines(w.history, tr.offs[w.id])
		tr.offs[w.id] = off
		for _, r := range rs {
			id := semID{w.id, r.G, r.I}
			if r.SemNote == "" {
				delete(tr.open, id)
				if r.Held() {
					tr.closed = append(tr.closed, r)
				}
				continue
			}
			s := tr.open[id]
			if s == nil {
				s = &semState{k: r.Permits}
				tr.open[id] = s
			}
			s.note, s.leased = r.SemNote, r.Leased
			if r.LeaseIDs != "" {
				s.ids = r.LeaseIDs
			}
			switch r.SemNote {
			case SemGranted:
				s.granted = r.Acq
			case SemRelease:
				s.end = r.End
			}
		}
	}
	keep := tr.closed[:0]
	for _, r := range tr.closed {
		if max(r.Rel, r.End+int64(semInFlight)) >= now-int64(2*semInFlight) {
			keep = append(keep, r)
		}
	}
	tr.closed = keep
}

// readSemLines reads the semaphore's records of a history from offset off, up to its last
// complete line, and returns them with the offset past that line.
func readSemLines(path string, off int64) ([]Record, int64) {
	f, err := os.Open(path)
	if err != nil {
		return nil, off
	}
	defer f.Close()
	b, err := io.ReadAll(io.NewSectionReader(f, off, 1<<40))
	if err != nil {
		return nil, off
	}
	end := bytes.LastIndexByte(b, '\n')
	if end < 0 {
		return nil, off
	}
	var rs []Record
	for line := range bytes.SplitSeq(b[:end], []byte{'\n'}) {
		if !bytes.Contains(line, semLine) {
			continue
		}
		var r Record
		if json.Unmarshal(line, &r) == nil {
			rs = append(rs, r)
		}
	}
	return rs, off + int64(end) + 1
}

// possiblyHeld returns the permits that sections may hold at t0 or after it and give back
// (or hold until their Release is sent), from what the histories say now; it must be
// called after t0. It counts, of live workers, every section with an acquire script in
// flight, granted, or releasing; of killed workers, a release that may still run; and of
// ended acquisitions, those whose release may have run after t0: released successfully at
// or after t0, or with an error within semInFlight of t0. A section that waits (its last
// script answered "not taken") holds nothing, and one whose Acquire failed holds nothing
// that it will give back: permits its script took anyway are lost (semRepair).
func (tr *semTracker) possiblyHeld(t0 int64) int64 {
	var p int64
	for id, s := range tr.open {
		switch {
		case s.leased:
			// A lease's permits are in the zset of leased permits from its acquisition to
			// its release or expiry, which the count's reader adds (semCount).
		case tr.alive[id.worker] && (s.note == SemTry || s.note == SemGranted || s.note == SemRelease):
			p += s.k
		case !tr.alive[id.worker] && s.note == SemRelease && s.end+int64(semInFlight) >= t0:
			p += s.k
		}
	}
	for _, r := range tr.closed {
		if !r.Leased && (r.UnlockOK && r.Rel >= t0 || !r.UnlockOK && r.End+int64(semInFlight) >= t0) {
			p += r.Permits
		}
	}
	return p
}

// surelyHeld returns the permits that live sections surely held over all of [from, to]:
// granted (the granting reply came) before from, and not released (Release not sent)
// before to.
func (tr *semTracker) surelyHeld(from, to int64) int64 {
	var p int64
	for id, s := range tr.open {
		if !s.leased && tr.alive[id.worker] && s.granted != 0 && s.granted < from && (s.note == SemGranted || s.note == SemRelease && s.end > to) {
			p += s.k
		}
	}
	for _, r := range tr.closed {
		if !r.Leased && r.Acq < from && r.End > to {
			p += r.Permits
		}
	}
	return p
}

// semDo runs op on the semaphore with a relock client of its own, straight to the lock
// server (no proxy), closed when op returns.
func (h *harness) semDo(what string, op func(context.Context, *semaphore.Weighted) error) {
	t := h.t
	rc, err := rueidis.NewClient(workerOption(h.lock.Addr()))
	if err != nil {
		t.Errorf("semaphore: %s: %v", what, err)
		return
	}
	defer rc.Close()
	c, err := relock.New(rc, relock.WithTimeout(2*time.Second))
	if err != nil {
		t.Errorf("semaphore: %s: %v", what, err)
		return
	}
	defer func() { _ = c.Close() }()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := op(ctx, c.Semaphore(semName)); err != nil {
		t.Errorf("semaphore: %s: %v", what, err)
	}
}

// semStart sets the semaphore's count at the start of a run.
func (h *harness) semStart() {
	h.semDo("set the count", func(ctx context.Context, s *semaphore.Weighted) error {
		ok, err := s.TrySetPermits(ctx, semPermits)
		if err == nil && !ok {
			err = fmt.Errorf("TrySetPermits(%d) found a count already", semPermits)
		}
		return err
	})
}

// semHolding waits a little (at most semHoldingWait) for a worker about to be killed to
// hold permits, so that kills lose permits more often than by chance, and stay inside the
// long lock section that picked the worker (holder). Kills take turns at waiting for
// leased and for plain permits (any granted ones do if those do not come), so that a run's
// kills find both kinds.
func (h *harness) semHolding(w *worker) {
	leased := h.sem.kills%2 == 0
	h.sem.kills++
	for end := time.Now().Add(semHoldingWait); time.Now().Before(end); time.Sleep(2 * time.Millisecond) {
		h.sem.update()
		for id, s := range h.sem.open {
			if id.worker == w.id && s.note == SemGranted && s.leased == leased {
				return
			}
		}
	}
}

// semKilled gives back, once the worker w is dead, the permits it surely held: those of
// its sections whose acquire script took them (its reply came) and whose Release was not
// sent. A section with an acquire script in flight at the kill may have taken permits too:
// it is not known, so they are left to semRepair. A Release in flight may still run.
func (h *harness) semKilled(w *worker) {
	tr := h.sem
	tr.update()
	var sure int64
	uncertain, releasing := 0, 0
	check := leaseCheck{worker: w.id, killed: time.Now()}
	for id, s := range tr.open {
		if id.worker != w.id {
			continue
		}
		if s.leased {
			// Granted, or maybe granted (a script in flight), or releasing: its ids may
			// be leased, and nobody gives them back but their expiry.
			if s.note != SemWait && s.note != SemError && s.ids != "" {
				for i := 0; i+32 <= len(s.ids); i += 32 {
					check.ids = append(check.ids, s.ids[i:i+32])
				}
			}
			continue
		}
		switch s.note {
		case SemGranted:
			sure += s.k
		case SemTry:
			uncertain++
		case SemRelease:
			releasing++
		}
	}
	tr.lostKills += sure
	tr.uncertain += uncertain
	h.semLeasesKilled(check)
	h.t.Logf("semaphore: %s killed holding %d permits for sure; %d of its sections had an acquire script in flight, %d a release",
		w.id, sure, uncertain, releasing)
	if sure > 0 {
		h.semDo("give back a killed worker's permits", func(ctx context.Context, s *semaphore.Weighted) error {
			return s.AddPermits(ctx, sure)
		})
		tr.restored += sure
	}
}

// semLeasedKey is the semaphore's zset of leased permits.
var semLeasedKey = keys.SemaphoreOf(semName).Leases

// semLeasesKilled notes the leased permits that a killed worker holds in Redis (of its
// sections' ids, those in the zset now) and when each runs out: no later than one lease
// after the kill, since nobody renews them any more. A later semLeasesBack looks again.
func (h *harness) semLeasesKilled(check leaseCheck) {
	tr := h.sem
	var present []string
	for _, id := range check.ids {
		raw, _ := hex.DecodeString(id)
		until, err := h.lock.Do(h.t, "ZSCORE", semLeasedKey, string(raw)).AsInt64()
		if err != nil {
			continue // not leased: its script did not run, or it was released
		}
		present = append(present, id)
		late := time.Duration(until-check.killed.UnixMilli()) * time.Millisecond
		tr.leasedLate = max(tr.leasedLate, late)
		// Both times are this machine's clock, in milliseconds: 2ms for their rounding.
		if late > watchdogTimeout+2*time.Millisecond {
			h.t.Errorf("semaphore: a killed worker's leased permit %s runs out %v after the kill, beyond its lease of %v", id, late, watchdogTimeout)
		}
	}
	if len(present) > 0 {
		check.ids = present
		tr.leaseChecks = append(tr.leaseChecks, check)
		tr.leasedKills += int64(len(present))
		h.t.Logf("semaphore: %s killed holding %d leased permits", check.worker, len(present))
	}
}

// semLeasesBack looks at the leases of killed workers whose lease has run out: once a
// count of the semaphore's (AvailablePermits) has put back the permits that ran out, none
// of their ids may be left in the zset. One left would be a permit lost beyond one lease.
// end: every worker is done, and every lease left (a kill's, or one an acquire script
// took whose reply was lost) has run out one lease from now: wait for that, and count the
// permits, which puts them all back.
func (h *harness) semLeasesBack(end bool) {
	tr := h.sem
	if end {
		time.Sleep(watchdogTimeout + 100*time.Millisecond)
		h.semDo("put back the leases that ran out", func(ctx context.Context, s *semaphore.Weighted) error {
			_, err := s.AvailablePermits(ctx)
			return err
		})
	}
	if len(tr.leaseChecks) == 0 {
		return
	}
	due := 0
	for due < len(tr.leaseChecks) && time.Since(tr.leaseChecks[due].killed) > watchdogTimeout+100*time.Millisecond {
		due++
	}
	if due == 0 {
		return
	}
	h.semDo("count the permits", func(ctx context.Context, s *semaphore.Weighted) error {
		_, err := s.AvailablePermits(ctx)
		return err
	})
	for _, check := range tr.leaseChecks[:due] {
		for _, id := range check.ids {
			raw, _ := hex.DecodeString(id)
			if n, err := h.lock.Do(h.t, "ZSCORE", semLeasedKey, string(raw)).AsInt64(); err == nil {
				tr.leasedLost++
				h.t.Errorf("semaphore: %s's leased permit %s is still leased (until %d) %v after the worker was killed",
					check.worker, id, n, time.Since(check.killed).Round(time.Millisecond))
				continue
			}
			tr.leasedBack++
		}
	}
	tr.leaseChecks = tr.leaseChecks[due:]
}

// semReset sets the count again after a restart without persistence lost the key, while
// the workers' proxies are still blackholed (nobody reaches the new server). The
// sections that held permits before the restart still hold them, and will give them back
// to the new server: the count is set to semPermits minus every permit that may still be
// held, as the parent knows it (possiblyHeld), not to semPermits. Restart windows are not
// left out of the check: with this count, sections granted before and after the restart
// together never hold more than semPermits. (Setting semPermits and leaving the window
// out would not do: the old holders' releases add their permits to the new count, so the
// excess would last past any window.) What the count is short of by counting sections
// that held nothing (waiting, or whose acquire script was in flight) is repaired later.
func (h *harness) semReset() {
	tr := h.sem
	t0 := time.Now().UnixNano()
	tr.update()
	p := tr.possiblyHeld(t0)
	n := max(0, semPermits-p)
	h.semDo("set the count after a restart", func(ctx context.Context, s *semaphore.Weighted) error {
		ok, err := s.TrySetPermits(ctx, n)
		if err == nil && !ok {
			err = fmt.Errorf("TrySetPermits(%d) after a restart without persistence found a count", n)
		}
		return err
	})
	tr.resets = append(tr.resets, n)
	h.t.Logf("semaphore: count set to %d after the restart (%d permits may still be held)", n, p)
}

// semRepair looks at the count and gives back the permits that are lost: the count
// (GET, at some moment in [from, to]) plus what sections may hold from then on
// (possiblyHeld) falls short of semPermits by what no section will give back. Those
// are permits taken by an acquire script whose reply was lost (its Acquire failed: the
// client does not count them, and never releases them), permits of a killed worker
// whose acquire script was in flight, and the margin of a re-set after a restart. The
// parent adds them back so that the run goes on with semPermits permits; each is counted
// in the summary (repaired).
//
// It also checks the count: it is never below zero (the acquire script takes only what
// is there), and with the permits that live sections surely held all along it never
// exceeds semPermits (a release counted twice, or a grant the client did not count,
// would). why says when, for the log; end says that every worker is done (see
// semLeasesBack).
func (h *harness) semRepair(why string, end bool) {
	t := h.t
	tr := h.sem
	h.semLeasesBack(end)
	from := time.Now().UnixNano()
	// The count, and the leased permits (live or run out): both at one moment.
	v, err := h.lock.Do(t, "EVAL", "return {tonumber(redis.call('get', KEYS[1]) or '0'), redis.call('zcard', KEYS[2])}",
		"2", semName, semLeasedKey).AsIntSlice()
	to := time.Now().UnixNano()
	if err != nil || len(v) != 2 {
		t.Errorf("semaphore: the count of %s: %v %v", semName, v, err)
		return
	}
	avail, leased := v[0], v[1]
	tr.update()
	if avail < 0 {
		tr.countErrs++
		if tr.countErrs <= 3 {
			t.Errorf("semaphore: the count is %d, below zero: permits were granted that were not there (%s)", avail, why)
		}
		return
	}
	if sure := tr.surelyHeld(from, to); avail+leased+sure > semPermits {
		tr.countErrs++
		if tr.countErrs <= 3 {
			t.Errorf("semaphore: the count is %d and %d permits are leased while live sections surely held %d plain permits: more than its %d (%s)", avail, leased, sure, semPermits, why)
		}
		return
	}
	p := tr.possiblyHeld(from)
	if x := semPermits - avail - leased - p; x > 0 {
		h.semDo("repair the count", func(ctx context.Context, s *semaphore.Weighted) error {
			return s.AddPermits(ctx, x)
		})
		tr.repaired += x
		t.Logf("semaphore: %d permits repaired (%s): count %d, %d leased, %d plain permits may be held", x, why, avail, leased, p)
	}
}

// semSummary is what one run (or all of them) found on the semaphore.
type semSummary struct {
	attempts, acquisitions int
	most                   int64 // most permits held at once
	over                   int   // acquisitions that took the sum past semPermits
	lostKills, restored    int64
	uncertain              int
	repaired               int64
	countErrs              int
	leased                 int // acquisitions of leased permits
	// Leased permits of killed workers: how many, how many were found back one lease
	// after the kill, how many were not, and the longest time from a kill to a lease's end.
	leasedKills, leasedBack, leasedLost int64
	leasedLate                          time.Duration
}

func (s *semSummary) add(o semSummary) {
	s.attempts += o.attempts
	s.acquisitions += o.acquisitions
	s.most = max(s.most, o.most)
	s.over += o.over
	s.lostKills += o.lostKills
	s.restored += o.restored
	s.uncertain += o.uncertain
	s.repaired += o.repaired
	s.countErrs += o.countErrs
	s.leased += o.leased
	s.leasedKills += o.leasedKills
	s.leasedBack += o.leasedBack
	s.leasedLost += o.leasedLost
	s.leasedLate = max(s.leasedLate, o.leasedLate)
}

func (s semSummary) String() string {
	return fmt.Sprintf("semaphore(N=%d): acquisitions=%d (leased %d) most-held=%d over-N=%d count-errors=%d permits-lost-to-kills=%d restored=%d repaired=%d "+
		"leased-permits-of-kills=%d back-within-a-lease=%d lost-beyond-a-lease=%d latest-lease-end=%v after a kill (lease %v)",
		semPermits, s.acquisitions, s.leased, s.most, s.over, s.countErrs, s.lostKills, s.restored, s.repaired,
		s.leasedKills, s.leasedBack, s.leasedLost, s.leasedLate.Round(time.Millisecond), watchdogTimeout)
}

// semNote is the summary's sentence on what the plain semaphore does with a killed
// worker's permits.
func (s semSummary) semNote() string {
	return fmt.Sprintf("torture: semaphore: permits lost to killed workers: %d; restored by the parent: %d "+
		"(plain RSemaphore: a killed worker's permits are lost for good and only AddPermits brings them back; "+
		"%d sections of killed workers had an acquire in flight, left to the repairs). "+
		"Permits repaired otherwise (lost replies, restart margins): %d. "+
		"Leased permits (AcquireLease) of killed workers are not given back by the parent: they run out within one lease "+
		"and the next count puts them back (leased-permits-of-kills, back-within-a-lease)",
		s.lostKills, s.restored, s.uncertain, s.repaired)
}

// checkSemaphore checks the semaphore's sections of history, and fills the summary.
func (h *harness) checkSemaphore(history []Record) semSummary {
	t := h.t
	tr := h.sem
	hs := OfLock(history, LockSemaphore)
	s := semSummary{lostKills: tr.lostKills, restored: tr.restored, uncertain: tr.uncertain, repaired: tr.repaired, countErrs: tr.countErrs,
		leasedKills: tr.leasedKills, leasedBack: tr.leasedBack, leasedLost: tr.leasedLost, leasedLate: tr.leasedLate}
	relErrs := 0
	var ks [semMaxK + 1]int
	for _, r := range hs {
		if !r.Attempt() {
			continue
		}
		s.attempts++
		if r.Held() {
			s.acquisitions++
			if r.Leased {
				s.leased++
			}
			ks[r.Permits]++
			if !r.UnlockOK {
				relErrs++
			}
		}
	}
	most, over := CheckSemaphore(hs, semPermits)
	s.most, s.over = most, len(over)
	t.Logf("semaphore: %d attempts, %d acquisitions (by permits asked: %v), most permits held at once %d of %d; %d releases failed%s",
		s.attempts, s.acquisitions, ks[1:], most, semPermits, relErrs, lockErrors(hs))
	t.Logf("semaphore: %d permits lost to killed workers, %d restored after the kills; %d repaired; count set to %v after restarts",
		tr.lostKills, tr.restored, tr.repaired, tr.resets)
	for i, x := range over {
		if i == 5 {
			break
		}
		held := make([]string, len(x.Holding))
		for j, r := range x.Holding {
			held[j] = SemString(r)
		}
		sort.Strings(held)
		t.Errorf("semaphore: sections held %d permits at once, more than its %d: the acquisition of %s went past; holding then:\n  %v",
			x.Sum, semPermits, SemString(x.Made), held)
	}
	if most > semPermits && len(over) == 0 {
		t.Errorf("semaphore: most permits held at once %d > %d but no excess reported", most, semPermits)
	}
	return s
}
