//go:build linux

package torture

import (
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
)

// A Lock call whose request ran on the server just before a restart, and whose reply the
// restart lost, asks the new server, finds its owner holding nothing and is granted there:
// its field was in the hash the restart looked at, but its record's hold (and token) is
// the second grant. markDeleted must not end that hold at the restart, which made the
// torture's history Illegal; and the checks must still catch two holders at once, after
// the restart as before it.
func TestRegrantAfterRestart(t *testing.T) {
	ms := func(n int64) int64 { return n * int64(time.Millisecond) }
	const lock = kindFair
	// The old server's last grant before the restart: token 10, released.
	old := Record{Lock: lock, Worker: "w0", Owner: "c:1", Call: ms(0), Acq: ms(10), Token: 10,
		Check: ms(100), End: ms(100), Rel: ms(110), Live: true, UnlockOK: true}
	// The Lock call granted on the old server (token 11) just before the restart looked
	// at 200ms, its reply lost; granted again, after c, on the new server (token 1013).
	again := Record{Lock: lock, Worker: "w1", Owner: "c:2", Call: ms(105), Acq: ms(520), Token: 1013,
		Check: ms(530), End: ms(530), Rel: ms(540), Live: true, UnlockOK: true}
	// The new server's first grant (its counter was set to 11 + 1000).
	first := Record{Lock: lock, Worker: "w2", Owner: "c:3", Call: ms(450), Acq: ms(460), Token: 1012,
		Check: ms(500), End: ms(500), Rel: ms(510), Live: true, UnlockOK: true}
	restart := func(fields ...string) []deletion {
		return []deletion{{restart: true, win: Window{ms(200), ms(400)},
			fields: map[string]map[string]bool{lock: set(fields)}, tokens: map[string]int64{lock: 11}}}
	}
	check := func(what string, want porcupine.CheckResult, wantOverlaps bool, fields []string, rs ...Record) []Record {
		t.Helper()
		h := append([]Record(nil), rs...)
		markDeleted(h, restart(fields...))
		if res := CheckLinearizable(h, 10*time.Second); res != want {
			t.Errorf("%s: porcupine %s, want %s\n%s", what, res, want, ExplainIllegal(h, 10*time.Second))
		}
		if ov := Overlaps(h); (len(ov) > 0) != wantOverlaps {
			t.Errorf("%s: overlaps %v, want some: %v", what, ov, wantOverlaps)
		}
		return h
	}

	h := check("granted again after the restart", porcupine.Ok, false, []string{"c:2"}, old, again, first)
	if h[1].Deleted() || h[1].LostFrom != ms(200) || h[1].LostTo != ms(400) {
		t.Errorf("the hold granted again: deleted [%d, %d], lost grant [%d, %d]; want not deleted, lost grant at the restart",
			h[1].DelFrom, h[1].DelTo, h[1].LostFrom, h[1].LostTo)
	}

	// Its second grant overlapping the new server's first holder, still live: caught.
	late := first
	late.Check, late.End, late.Rel = ms(525), ms(525), ms(535)
	check("granted again while another held", porcupine.Illegal, true, []string{"c:2"}, old, again, late)

	// Its lost grant beside another hold found at the restart's look: two holders of the
	// lock at once on the old server, caught.
	stale := old
	stale.Check, stale.End, stale.Rel, stale.UnlockOK = ms(150), ms(150), ms(420), false
	check("lost grant beside another holder", porcupine.Illegal, false, []string{"c:1", "c:2"}, stale, again, first)

	// A hold whose token is from before the restart is the one the restart removed, as before.
	removed := again
	removed.Acq, removed.Token, removed.Check, removed.End, removed.Rel = ms(150), 11, ms(190), ms(190), ms(600)
	removed.UnlockOK = false
	h = check("granted before the restart", porcupine.Ok, false, []string{"c:2"}, old, removed, first)
	if !h[1].Deleted() || h[1].LostFrom != 0 {
		t.Errorf("the hold granted before the restart: deleted %v, lost grant at %d; want deleted, no lost grant", h[1].Deleted(), h[1].LostFrom)
	}
}

// A handed hold (no field recorded) whose section saw it lost, and whose Unlock failed, is
// not the one hold without a recorded field that a restart long after finds in the hash:
// its lease had run out in Redis long before, and another holder came in meanwhile. Marked
// deleted at the restart, it would count as held until then, beside every later holder,
// and make the history Illegal. A hold seen lost only just before the restart still may be
// the field the restart found, as before.
func TestHoldSeenLostLongBeforeARestartIsNotTheFieldItFound(t *testing.T) {
	ms := func(n int64) int64 { return n * int64(time.Millisecond) }
	lease := int64(watchdogTimeout)
	const lock = kindRLock
	// Handed the lock, then paused past its lease: its section saw it lost, and its Unlock
	// failed.
	lost := Record{Lock: lock, Worker: "w0", Call: ms(0), Acq: ms(10), Token: 5,
		Check: ms(10) + lease + ms(500), End: ms(10) + lease + ms(500), Rel: ms(20) + lease + ms(500),
		Live: false, Lost: true, Cause: "lease lost", UnlockOK: false}
	// Another holder, once the lease had run out in Redis.
	next := Record{Lock: lock, Worker: "w1", Owner: "c:6", Call: ms(5), Acq: ms(10) + lease + ms(20), Token: 6,
		Check: ms(30) + lease, End: ms(30) + lease, Rel: ms(40) + lease, Live: true, UnlockOK: true}
	// The restart, long after, finds a field that no record names (a handed hold released
	// as the restart looked).
	from := lost.Check + lease + ms(1000)
	restart := []deletion{{restart: true, win: Window{from, from + ms(200)},
		fields: map[string]map[string]bool{lock: set([]string{"c:9"})}, tokens: map[string]int64{lock: 6}}}
	h := []Record{lost, next}
	markDeleted(h, restart)
	if h[0].Deleted() {
		t.Errorf("the hold seen lost a lease before the restart is marked deleted at it [%d, %d]", h[0].DelFrom, h[0].DelTo)
	}
	if res := CheckLinearizable(h, 10*time.Second); res != porcupine.Ok {
		t.Errorf("porcupine %s, want Ok\n%s", res, ExplainIllegal(h, 10*time.Second))
	}
	if ov := Overlaps(h); len(ov) > 0 {
		t.Errorf("overlaps %v, want none", ov)
	}

	// Seen lost only just before the restart: still the one candidate for the field.
	recent := lost
	recent.Check, recent.End, recent.Rel = from-ms(100), from-ms(100), from-ms(90)
	h = []Record{recent}
	markDeleted(h, restart)
	if !h[0].Deleted() {
		t.Errorf("the hold seen lost just before the restart is not marked deleted at it")
	}
}
