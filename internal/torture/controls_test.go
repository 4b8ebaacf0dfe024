package torture

import (
	"context"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
	xsem "golang.org/x/sync/semaphore"
)

// inProcess runs goroutines that enter a critical section iters times each, guarded by
// enter/leave, and records the same history as the torture workers (tokens come from a
// counter taken inside the section).
func inProcess(goroutines, iters int, enter, leave func()) []Record {
	return inProcessRW(goroutines, iters, nil, nil, enter, leave)
}

// The checkers must bite: goroutines that enter the section without a lock make a
// history that porcupine refuses and that has overlapping live sections.
func TestControlWithoutLockFails(t *testing.T) {
	wantRefused(t, inProcess(8, 50, func() {}, func() {}), "without a lock")
}

// wantRefused fails the test unless porcupine refuses history and the overlap check finds
// overlapping live sections in it.
func wantRefused(t *testing.T, history []Record, what string) {
	t.Helper()
	res := CheckLinearizable(history, time.Minute)
	ov := Overlaps(history)
	t.Logf("%s: porcupine %s, %d overlaps", what, res, len(ov))
	if res != porcupine.Illegal {
		t.Errorf("%s: porcupine found the history %s, want %s", what, res, porcupine.Illegal)
	}
	if len(ov) == 0 {
		t.Errorf("%s: no overlapping sections found", what)
	}
}

// ... and pass a history guarded by an in-process sync.Mutex.
func TestControlWithMutexPasses(t *testing.T) {
	var mu sync.Mutex
	history := inProcess(8, 200, mu.Lock, mu.Unlock)
	res := CheckLinearizable(history, time.Minute)
	ov := Overlaps(history)
	t.Logf("with a sync.Mutex: porcupine %s, %d overlaps", res, len(ov))
	if res != porcupine.Ok {
		t.Errorf("porcupine found a history under a sync.Mutex %s, want %s", res, porcupine.Ok)
	}
	if len(ov) != 0 {
		t.Errorf("%d overlapping sections under a sync.Mutex", len(ov))
	}
}

// A stale token accepted out of order, or a lost update, is what CheckFencing reports.
func TestCheckFencingCounts(t *testing.T) {
	h := []Record{
		{Worker: "a", Acq: 1, End: 2, Token: 1, Live: true, Write: WriteAccepted, Count: 1},
		{Worker: "b", Acq: 3, End: 4, Token: 3, Live: true, Write: WriteAccepted, Count: 2},
		{Worker: "c", Acq: 5, End: 6, Token: 2, Live: false, Write: WriteAccepted, Count: 3},
		{Worker: "d", Acq: 7, End: 8, Token: 2, Live: true, Write: WriteRejected},
	}
	f := CheckFencing(h, 2)
	if f.OutOfOrder != 1 || f.LostUpdates != 2 || f.Rejected != 1 || len(f.LiveRejected) != 1 {
		t.Errorf("CheckFencing = %+v; want 1 out of order, 2 lost updates, 1 rejected while live", f)
	}
}

// inProcessRW is inProcess for a read-write lock: each section reads or writes at random,
// read sections guarded by rlock/runlock and write sections by lock/unlock. Only write
// sections take a token. With rlock nil every section writes.
func inProcessRW(goroutines, iters int, rlock, runlock, lock, unlock func()) []Record {
	var (
		mu      sync.Mutex
		history []Record
		tokens  atomic.Int64
		wg      sync.WaitGroup
	)
	for g := range goroutines {
		wg.Go(func() {
			for i := range iters {
				read := rlock != nil && rand.IntN(2) == 0
				r := Record{Worker: "control", Lock: "rw", G: g, I: i, Call: time.Now().UnixNano()}
				enter, leave := lock, unlock
				if read {
					r.Mode, enter, leave = ModeRead, rlock, runlock
				}
				enter()
				r.Acq = time.Now().UnixNano()
				if !read {
					r.Token = tokens.Add(1)
					r.Write = WriteAccepted
				}
				time.Sleep(time.Duration(50+rand.IntN(200)) * time.Microsecond)
				r.Live = true
				r.End = time.Now().UnixNano()
				leave()
				r.Rel = time.Now().UnixNano()
				r.UnlockOK = true
				mu.Lock()
				history = append(history, r)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	return history
}

// asExclusive returns history with every read section made exclusive.
func asExclusive(history []Record) []Record {
	out := append([]Record(nil), history...)
	for i := range out {
		out[i].Mode = ""
	}
	return out
}

// Under a sync.RWMutex read sections overlap each other (which the checker must allow) and
// nothing else does; the write sections are linearizable.
func TestControlWithRWMutexPasses(t *testing.T) {
	var mu sync.RWMutex
	history := inProcessRW(8, 100, mu.RLock, mu.RUnlock, mu.Lock, mu.Unlock)
	res := CheckLinearizable(history, time.Minute)
	ov := Overlaps(history)
	reads := len(Overlaps(asExclusive(history)))
	t.Logf("with a sync.RWMutex: porcupine %s, %d overlaps, %d read sections overlapping", res, len(ov), reads)
	if res != porcupine.Ok {
		t.Errorf("porcupine found the writes under a sync.RWMutex %s, want %s", res, porcupine.Ok)
	}
	if len(ov) != 0 {
		t.Errorf("%d overlapping sections under a sync.RWMutex, e.g. %v", len(ov), ov[0])
	}
	if reads == 0 {
		t.Error("no read sections overlapped: the control does not show that readers may share")
	}
}

// Readers that take no lock while writers exclude each other: the writes are linearizable,
// but readers overlap writers, which Overlaps must report.
func TestControlUnguardedReadersFail(t *testing.T) {
	var mu sync.Mutex
	history := inProcessRW(8, 100, func() {}, func() {}, mu.Lock, mu.Unlock)
	res := CheckLinearizable(history, time.Minute)
	ov := Overlaps(history)
	t.Logf("unguarded readers: porcupine %s on the writes, %d overlaps", res, len(ov))
	if res != porcupine.Ok {
		t.Errorf("porcupine found writes under a sync.Mutex %s, want %s", res, porcupine.Ok)
	}
	if len(ov) == 0 {
		t.Error("no overlap found between unguarded readers and writers")
	}
	for _, p := range ov {
		if p[0].Read() && p[1].Read() {
			t.Fatalf("two read sections reported as an overlap: %v, %v", p[0], p[1])
		}
	}
}

// Without any lock the write sections are not linearizable and overlap.
func TestControlRWWithoutLockFails(t *testing.T) {
	wantRefused(t, inProcessRW(8, 50, func() {}, func() {}, func() {}, func() {}), "read-write without a lock")
}

// Sections of different locks never conflict, and every section is counted at most once.
func TestOverlapsByLock(t *testing.T) {
	h := []Record{
		{Lock: "a", Acq: 1, End: 10, Live: true},
		{Lock: "b", Acq: 2, End: 3, Live: true},                   // another lock: no conflict
		{Lock: "a", Acq: 4, End: 5, Live: false},                  // lease lost: not live
		{Lock: "a", Acq: 6, End: 12, Live: true, Mode: ModeRead},  // overlaps the first
		{Lock: "a", Acq: 11, End: 13, Live: true, Mode: ModeRead}, // shares with the read only
		{Lock: "a", Acq: 12, End: 14, Live: true},                 // overlaps both reads: counted once
	}
	ov := Overlaps(h)
	if len(ov) != 2 || ov[0][1].Acq != 6 || ov[1][1].Acq != 12 || ov[1][0].Acq != 11 {
		t.Errorf("Overlaps = %v; want the sections acquired at 6 (with 1) and 12 (with 11)", ov)
	}
}

// A section is held until its liveness check, not until End: a worker paused right after
// the check (its hold runs out meanwhile and another owner takes the lock) does not make
// the two overlap. A section whose check itself comes after the other's grant does, and
// porcupine says so too.
func TestOverlapsUntilTheCheck(t *testing.T) {
	paused := Record{Lock: "a", Call: 1, Acq: 2, Token: 1, Check: 3, End: 20, Rel: 21, Live: true, UnlockOK: true}
	next := Record{Lock: "a", Call: 9, Acq: 10, Token: 2, Check: 11, End: 12, Rel: 13, Live: true, UnlockOK: true}
	if ov := Overlaps([]Record{paused, next}); len(ov) != 0 {
		t.Errorf("Overlaps = %v; want none: the first section was last seen live at 3", ov)
	}
	if res := CheckLinearizable([]Record{paused, next}, 10*time.Second); res != porcupine.Ok {
		t.Errorf("porcupine: %v; want Ok", res)
	}
	late := paused
	late.Check = 15 // seen live after the next grant: a real overlap
	if ov := Overlaps([]Record{late, next}); len(ov) != 1 {
		t.Errorf("Overlaps = %v; want the pair", ov)
	}
	if res := CheckLinearizable([]Record{late, next}, 10*time.Second); res != porcupine.Illegal {
		t.Errorf("porcupine: %v; want Illegal", res)
	}
}

// fairSim is an in-process stand-in for a fair lock's server side: a holder and a queue
// of owners. With fair set, a free lock goes to the head of the queue (or to a caller
// when nobody waits); without, to whoever asks first, as a fair lock that forgot its
// queue would.
type fairSim struct {
	fair   bool
	mu     sync.Mutex
	holder int // 0: free
	queue  []int
	token  int64
	wake   chan struct{} // closed and replaced on every release
}

// try is one acquire script: it grants the lock to owner, or queues it (once).
func (s *fairSim) try(owner int) (int64, bool, <-chan struct{}) {
	s.mu.Lock()
	defer s.mu.Unlock()
	head := 0
	if len(s.queue) > 0 {
		head = s.queue[0]
	}
	if s.holder == 0 && (!s.fair || head == 0 || head == owner) {
		for i, o := range s.queue {
			if o == owner {
				s.queue = append(s.queue[:i], s.queue[i+1:]...)
				break
			}
		}
		s.holder = owner
		s.token++
		return s.token, true, nil
	}
	if !slices.Contains(s.queue, owner) {
		s.queue = append(s.queue, owner)
	}
	return 0, false, s.wake
}

func (s *fairSim) release() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.holder = 0
	close(s.wake)
	s.wake = make(chan struct{})
}

// fairHistory runs goroutines that take the simulated lock iters times each, as the
// torture's fair sections do: every attempt answered "wait" is noted with its send and
// reply times, and a waiter tries again when the lock is released or every 10ms (its
// refresh), so its entry never runs out.
func fairHistory(fair bool, goroutines, iters int) []Record {
	s := &fairSim{fair: fair, wake: make(chan struct{})}
	var (
		mu      sync.Mutex
		history []Record
		owners  atomic.Int64
		wg      sync.WaitGroup
	)
	for g := range goroutines {
		wg.Go(func() {
			for i := range iters {
				owner := int(owners.Add(1))
				r := Record{Worker: "control", Lock: "fair", G: g, I: i, Call: time.Now().UnixNano()}
				for {
					sent := time.Now().UnixNano()
					tok, ok, wake := s.try(owner)
					got := time.Now().UnixNano()
					if ok {
						r.Token = tok
						break
					}
					r.Queued = append(r.Queued, [2]int64{sent, got})
					select {
					case <-wake:
					case <-time.After(10 * time.Millisecond):
					}
				}
				r.Acq = time.Now().UnixNano()
				time.Sleep(time.Duration(50+rand.IntN(200)) * time.Microsecond)
				r.Live, r.End = true, time.Now().UnixNano()
				s.release()
				r.Rel, r.UnlockOK = time.Now().UnixNano(), true
				mu.Lock()
				history = append(history, r)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	return history
}

// The fair-order checker must bite: a fair lock that grants a free lock to whoever asks,
// ahead of live waiters queued before the asker came, makes a history it refuses. (The
// torture's mutant: the fair acquire script ignoring the head of its queue.)
func TestControlFairOrderUnfairFails(t *testing.T) {
	h := fairHistory(false, 8, 50)
	ov := CheckFairOrder(h, time.Second, nil)
	t.Logf("grant to anyone: %d grants out of turn of %d", len(ov), len(h))
	if len(ov) == 0 {
		t.Error("no grant out of turn found in the history of a lock that ignores its queue")
	}
}

// ... and passes a lock that grants in queue order.
func TestControlFairOrderFairPasses(t *testing.T) {
	h := fairHistory(true, 8, 50)
	queued := 0
	for _, r := range h {
		if len(r.Queued) > 0 {
			queued++
		}
	}
	ov := CheckFairOrder(h, time.Second, nil)
	t.Logf("fair: %d grants out of turn, %d of %d sections queued", len(ov), queued, len(h))
	if len(ov) != 0 {
		t.Errorf("%d grants out of turn under a lock that grants in queue order, e.g. %v after %v", len(ov), ov[0].Jumper, ov[0].Skipped)
	}
	if queued == 0 {
		t.Error("no section queued: the control shows nothing")
	}
}

// The reorderings the fair lock may make are not violations: a waiter whose entry may
// have run out (paused or cut off past its lifetime, or late), one that gave up, one
// whose queue a restart emptied; nor is a grant to a waiter that came first, or one that
// queued only after the other's Lock call.
func TestCheckFairOrderLegitimate(t *testing.T) {
	ms := func(n int64) int64 { return n * int64(time.Millisecond) }
	entry := time.Second
	// B calls at 100ms and is granted (token 1) at 200ms.
	b := Record{Lock: "fair", Worker: "b", Call: ms(100), Acq: ms(200), Token: 1, Live: true, End: ms(201), Rel: ms(202), UnlockOK: true}
	waiter := func(token int64, queued ...[2]int64) Record {
		r := Record{Lock: "fair", Worker: "a", Call: queued[0][0] - ms(1), Queued: queued}
		if token == 0 {
			r.LockErr = "context deadline exceeded"
			r.Acq = ms(3000)
			return r
		}
		r.Acq, r.Token, r.Live, r.End, r.Rel, r.UnlockOK = ms(2000), token, true, ms(2001), ms(2002), true
		return r
	}
	q := func(sent, got int64) [2]int64 { return [2]int64{ms(sent), ms(got)} }
	cases := []struct {
		name string
		a    Record
		cuts []Window
		want int
	}{
		{"queued first, live, granted after b", waiter(2, q(10, 20), q(500, 510)), nil, 1},
		{"queued first, live, gave up after b", waiter(0, q(10, 20), q(500, 510)), nil, 1},
		{"granted before b", waiter(1, q(10, 20)), nil, 0},
		{"queued after b's call", waiter(2, q(90, 110), q(500, 510)), nil, 0},
		{"entry may have run out before b's grant (paused)", waiter(2, q(-900, -890)), nil, 0},
		{"refresh came too late to keep the entry (gap)", waiter(2, q(-900, -890), q(150, 160)), nil, 0},
		{"gave up before b's grant", waiter(0, q(10, 20), q(150, 160)), nil, 0},
		{"a restart emptied the queue", waiter(2, q(10, 20), q(500, 510)), []Window{{ms(120), ms(130)}}, 0},
		{"a restart overlaps the only attempt", waiter(2, q(10, 20)), []Window{{ms(15), ms(30)}}, 0},
	}
	// B's grant adopted after its reply was lost, its hold over before it read its token.
	unknown := b
	unknown.Token = 0
	for _, c := range []struct {
		name string
		a    Record
		want int
	}{
		{"b's token unknown, a's last wait before b returned", waiter(2, q(10, 20), q(150, 160)), 0},
		{"b's token unknown, a still waiting after b returned", waiter(2, q(10, 20), q(500, 510)), 1},
		{"b's token unknown, a never granted", waiter(0, q(10, 20), q(500, 510)), 1},
	} {
		if got := len(CheckFairOrder([]Record{c.a, unknown}, entry, nil)); got != c.want {
			t.Errorf("%s: %d violations, want %d", c.name, got, c.want)
		}
	}
	for _, c := range cases {
		got := len(CheckFairOrder([]Record{c.a, b}, entry, c.cuts))
		if got != c.want {
			t.Errorf("%s: %d violations, want %d", c.name, got, c.want)
		}
	}
}

// deletedHold is a hold deleted at 1s behind the back of its section, which lingered from
// 0.5s; it was acquired at 0.5s and renewals found it in Redis until one sent at 0.9s.
func deletedHold() Record {
	ms := func(n int64) int64 { return n * int64(time.Millisecond) }
	return Record{Lock: "rlock", Worker: "w", Owner: "c:1", Call: ms(490), Acq: ms(500), Token: 1,
		Lingered: true, LingerFrom: ms(501), Basis: ms(900), DelFrom: ms(1000), DelTo: ms(1001),
		End: ms(5000), Rel: ms(5001)}
}

// The deleted-hold check must bite: a deleted hold whose context never ended, or ended
// only at its local deadline although a renewal had found it gone, is refused. (The
// torture's mutant: a watchdog that ignores renewal results of 0.)
func TestControlDeletedHoldNeverEndedFails(t *testing.T) {
	ms := func(n int64) int64 { return n * int64(time.Millisecond) }
	lease := 1500 * time.Millisecond
	never := deletedHold()
	atDeadline := deletedHold()
	atDeadline.Gone, atDeadline.LingerDone, atDeadline.LingerLost = ms(1400), ms(2400), true
	otherCause := deletedHold()
	otherCause.Gone, otherCause.LingerDone = ms(1400), ms(1401)
	// The Lock call's bound ran out only after the local deadline (900+1500 ms), by which
	// the client must have ended the hold's context as lost: it excuses nothing.
	lateBound := deletedHold()
	lateBound.Bound, lateBound.LingerDone = ms(2600), ms(2600)
	for name, r := range map[string]Record{"never ended": never, "ended at its deadline": atDeadline, "ended with another cause": otherCause,
		"ended by its call's bound after its deadline": lateBound} {
		bad, _ := CheckDeletedHolds([]Record{r}, lease)
		if len(bad) != 1 {
			t.Errorf("%s: %d holds refused, want 1", name, len(bad))
		} else {
			t.Logf("%s: refused: %s", name, bad[0].Why)
		}
	}
}

// ... and accepts holds whose context ended when a renewal found them gone, or at their
// deadline when no renewal answered; every deleted hold seen lost counts.
func TestCheckDeletedHoldsPasses(t *testing.T) {
	ms := func(n int64) int64 { return n * int64(time.Millisecond) }
	lease := 1500 * time.Millisecond
	onRenewal := deletedHold()
	onRenewal.Gone, onRenewal.LingerDone, onRenewal.LingerLost = ms(1400), ms(1401), true
	noReply := deletedHold()
	noReply.LingerDone, noReply.LingerLost = ms(2400), true
	short := Record{Lock: "rlock", Worker: "w", Owner: "c:2", Call: ms(900), Acq: ms(950), Token: 2,
		End: ms(1100), Rel: ms(1101), Lost: true, DelFrom: ms(1000), DelTo: ms(1001)}
	// The Lock call's bound ran out before the client could have learned of the
	// deletion (the hold's local deadline is 900+1500 ms): its context ended with
	// DeadlineExceeded, which says nothing of the watchdog.
	bounded := deletedHold()
	bounded.Bound, bounded.LingerDone = ms(1200), ms(1200)
	bad, lost := CheckDeletedHolds([]Record{onRenewal, noReply, short, bounded}, lease)
	if len(bad) != 0 || lost != 3 {
		t.Errorf("CheckDeletedHolds = %v, %d lost; want none refused, 3 lost", bad, lost)
	}
}

// A deleted hold counts as held until its deletion: a holder that comes in after it is
// no overlap, and the history is linearizable, while one that came in before it is
// caught by both checks.
func TestDeletedHoldWindow(t *testing.T) {
	ms := func(n int64) int64 { return n * int64(time.Millisecond) }
	old := deletedHold()
	old.Live = true // it never learned, and wrote on
	after := Record{Lock: "rlock", Worker: "x", Call: ms(600), Acq: ms(1010), Token: 2, Live: true, End: ms(1100), Rel: ms(1101), UnlockOK: true}
	if ov := Overlaps([]Record{old, after}); len(ov) != 0 {
		t.Errorf("a holder after the deletion overlaps the deleted hold: %v", ov)
	}
	if res := CheckLinearizable([]Record{old, after}, time.Minute); res != porcupine.Ok {
		t.Errorf("porcupine: %s, want %s", res, porcupine.Ok)
	}
	before := after
	before.Acq, before.End = ms(800), ms(900)
	if ov := Overlaps([]Record{old, before}); len(ov) != 1 {
		t.Errorf("a holder before the deletion: %d overlaps, want 1", len(ov))
	}
	if res := CheckLinearizable([]Record{old, before}, time.Minute); res != porcupine.Illegal {
		t.Errorf("porcupine: %s, want %s", res, porcupine.Illegal)
	}
	// Its stale write, turned away after the deletion, is no live rejection.
	old.Write, old.Check = WriteRejected, ms(4000)
	if f := CheckFencing([]Record{old, after}, 0); len(f.LiveRejected) != 0 {
		t.Errorf("the deleted hold's stale write counts as rejected while live: %v", f.LiveRejected)
	}
}

// semHistory runs goroutines that take 1 or 2 permits of an in-process semaphore of
// permits, iters times each, and records their sections as the torture's semaphore
// sections are recorded.
func semHistory(permits int64, goroutines, iters int) []Record {
	sem := xsem.NewWeighted(permits)
	var (
		mu      sync.Mutex
		history []Record
		wg      sync.WaitGroup
	)
	for g := range goroutines {
		wg.Go(func() {
			for i := range iters {
				k := int64(1 + rand.IntN(2))
				r := Record{Worker: "control", Lock: LockSemaphore, G: g, I: i, Permits: k, Call: time.Now().UnixNano()}
				_ = sem.Acquire(context.Background(), k)
				r.Acq = time.Now().UnixNano()
				time.Sleep(time.Duration(50+rand.IntN(200)) * time.Microsecond)
				r.End = time.Now().UnixNano()
				sem.Release(k)
				r.Rel, r.UnlockOK = time.Now().UnixNano(), true
				mu.Lock()
				history = append(history, r)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	return history
}

// The semaphore checker must bite: sections under a semaphore of 4 permits, checked as a
// semaphore of 3, hold more than 3 at once. (The torture's mutant: the acquire script
// granting n permits when n-1 are left.)
func TestControlSemaphoreTooManyFails(t *testing.T) {
	most, over := CheckSemaphore(semHistory(4, 8, 100), 3)
	t.Logf("4 permits checked as 3: most held %d, %d acquisitions went past 3", most, len(over))
	if len(over) == 0 || most <= 3 {
		t.Errorf("no excess found: most held %d", most)
	}
	for _, x := range over {
		var sum int64
		for _, r := range x.Holding {
			sum += r.Permits
		}
		if sum != x.Sum || sum <= 3 {
			t.Fatalf("excess of %d reported with sections holding %d: %v", x.Sum, sum, x.Holding)
		}
	}
}

// ... and passes sections under a semaphore of 3, which fill it.
func TestControlSemaphorePasses(t *testing.T) {
	most, over := CheckSemaphore(semHistory(3, 8, 100), 3)
	t.Logf("3 permits: most held %d, %d excesses", most, len(over))
	if len(over) != 0 {
		t.Errorf("%d excesses under a semaphore of 3, e.g. %v", len(over), over[0])
	}
	if most != 3 {
		t.Errorf("most held %d: the control never filled the semaphore", most)
	}
}

// What the semaphore checker counts: a section from its Acquire's return to its end; not
// a failed Acquire, nor a note, nor a lock's section; a section that ends when another
// begins does not overlap it.
func TestCheckSemaphoreCounts(t *testing.T) {
	sec := func(k, acq, end int64) Record {
		return Record{Lock: LockSemaphore, Worker: "w", Permits: k, Call: acq - 1, Acq: acq, End: end, Rel: end + 1, UnlockOK: true}
	}
	failed := sec(2, 5, 0)
	failed.LockErr = "context deadline exceeded"
	note := Record{Lock: LockSemaphore, Worker: "w", Permits: 2, Acq: 5, SemNote: SemGranted}
	lock := Record{Lock: "rlock", Worker: "w", Permits: 2, Acq: 5, End: 9, Live: true}
	h := []Record{sec(2, 1, 10), sec(1, 2, 4), failed, note, lock, sec(1, 10, 12)}
	if most, over := CheckSemaphore(h, 3); most != 3 || len(over) != 0 {
		t.Errorf("most held %d, %d excesses; want 3, none", most, len(over))
	}
	h = append(h, sec(1, 3, 20))
	if most, over := CheckSemaphore(h, 3); most != 4 || len(over) != 1 || over[0].Made.Acq != 3 {
		t.Errorf("most held %d, excesses %v; want 4, the acquisition at 3", most, over)
	}
}

// A hold whose token is unknown and whose context had ended (its Lock adopted a grant
// whose reply was lost, already past its deadline) promises nothing and is left out of the
// model; a live hold is always checked, token or not, so a live one without a token still
// fails.
func TestUnknownTokenOfEndedHold(t *testing.T) {
	first := Record{Lock: "a", Call: 1, Acq: 2, Token: 1, Check: 3, End: 3, Rel: 4, Live: true, UnlockOK: true}
	adopted := Record{Lock: "a", Call: 5, Acq: 10, Token: 0, Check: 11, End: 11, Rel: 12, UnlockOK: true, Lost: true}
	next := Record{Lock: "a", Call: 13, Acq: 14, Token: 3, Check: 15, End: 15, Rel: 16, Live: true, UnlockOK: true}
	if res := CheckLinearizable([]Record{first, adopted, next}, 10*time.Second); res != porcupine.Ok {
		t.Errorf("porcupine with an ended hold of unknown token: %v; want Ok", res)
	}
	adopted.Live = true
	if res := CheckLinearizable([]Record{first, adopted, next}, 10*time.Second); res != porcupine.Illegal {
		t.Errorf("porcupine with a live hold of no token: %v; want Illegal", res)
	}
}
