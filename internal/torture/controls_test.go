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
	var (
		mu      sync.Mutex
		history []Record
		tokens  atomic.Int64
		wg      sync.WaitGroup
	)
	for g := range goroutines {
		wg.Go(func() {
			for i := range iters {
				r := Record{Worker: "control", G: g, I: i, Call: time.Now().UnixNano()}
				enter()
				r.Acq = time.Now().UnixNano()
				r.Token = tokens.Add(1)
				time.Sleep(time.Duration(50+rand.IntN(200)) * time.Microsecond)
				r.Write, r.Live = WriteAccepted, true
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

// The checkers must bite: goroutines that enter the section without a lock make a
// history that porcupine refuses and that has overlapping live sections.
func TestControlWithoutLockFails(t *testing.T) {
	history := inProcess(8, 50, func() {}, func() {})
	res := CheckLinearizable(history, time.Minute)
	ov := Overlaps(history)
	t.Logf("without a lock: porcupine %s, %d overlaps", res, len(ov))
	if res != porcupine.Illegal {
		t.Errorf("porcupine found a history without a lock %s, want %s", res, porcupine.Illegal)
	}
	if len(ov) == 0 {
		t.Error("no overlapping sections found in a history without a lock")
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
