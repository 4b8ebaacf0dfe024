package redistest

import (
	"testing"
	"time"
)

// ClockAhead makes miniredis's TTLs run out by its rate, neither later nor sooner: a key
// set with PX 1000 at a rate of 1.05 goes about 952ms after it was set by the client's
// clock, so it is gone at 970ms and there at 940ms. (A clock left on time, or one running
// faster than asked, makes every test of a server whose clock gains on the client's test
// another rate than it says.) A look that a loaded machine delays past its window, or
// whose answer it holds up, proves nothing, and the round is tried again.
func TestClockAheadRunsTTLsByItsRate(t *testing.T) {
	const (
		ttl     = time.Second
		present = 940 * time.Millisecond // before ttl/1.05, less room for the round trip
		gone    = 970 * time.Millisecond // after ttl/1.05
		late    = 995 * time.Millisecond // a look sent after this proves nothing: ttl is near
	)
	b := Mini(t)
	ClockAhead(t, b, 1.05)
	rc := b.Client(t)
	sawPresent, sawGone := false, false
	for round := 0; round < 10 && !(sawPresent && sawGone); round++ {
		MustDo(t, rc, "DEL", "k")
		set := time.Now() // the key's TTL starts after this
		MustDo(t, rc, "SET", "k", "v", "PX", "1000")
		setDone := time.Now() // and before this
		time.Sleep(time.Until(set.Add(present - 5*time.Millisecond)))
		n, err := Do(t, rc, "EXISTS", "k").AsInt64()
		if err != nil {
			t.Fatal(err)
		}
		if time.Since(set) < present { // its answer came before ttl/1.05 had passed
			if n != 1 {
				t.Fatalf("a key set with PX 1000 at a clock rate of 1.05 is gone %v after it was set; want there until about 952ms", time.Since(set))
			}
			sawPresent = true
		}
		time.Sleep(time.Until(setDone.Add(gone)))
		sent := time.Now()
		n, err = Do(t, rc, "EXISTS", "k").AsInt64()
		if err != nil {
			t.Fatal(err)
		}
		// Asked before the TTL by the client's clock, and answered at once: a reply held up
		// may have been read on a clock set before the hold-up.
		if sent.Sub(setDone) < late && time.Since(sent) < 5*time.Millisecond {
			if n != 0 {
				t.Fatalf("a key set with PX 1000 at a clock rate of 1.05 is there %v after it was set; want gone after about 952ms", sent.Sub(setDone))
			}
			sawGone = true
		}
	}
	if !sawPresent || !sawGone {
		t.Fatalf("in 10 rounds no look came within its window (there: %v, gone: %v)", sawPresent, sawGone)
	}
}
