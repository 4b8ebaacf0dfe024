package torture

import (
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
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
