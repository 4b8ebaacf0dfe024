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
