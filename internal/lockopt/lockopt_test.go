package lockopt

import (
	"errors"
	"testing"
	"time"

	"github.com/relock-go/relock/internal/lockerr"
)

// A lease is whole milliseconds, as Redis keeps it: a fraction is dropped, never rounded up
// (docs/design.md, "Leases are whole milliseconds"), and a lease under a millisecond is
// none (rlock.WithLease: "at least a millisecond").
func TestLeaseIsWholeMilliseconds(t *testing.T) {
	for _, c := range []struct {
		d    time.Duration
		want time.Duration
		ok   bool
	}{
		{50*time.Millisecond + 900*time.Microsecond, 50 * time.Millisecond, true},
		{time.Millisecond + 500*time.Microsecond, time.Millisecond, true},
		{time.Millisecond, time.Millisecond, true},
		{999 * time.Microsecond, 0, false},
		{0, 0, false},
		{-time.Second, 0, false},
	} {
		got, ok := Lease(c.d)
		if ok != c.ok || ok && got != c.want {
			t.Errorf("Lease(%v) = %v, %v; want %v, %v", c.d, got, ok, c.want, c.ok)
		}
	}
}

// The limits of the refresh period and of a spin lock's back-off are inclusive: a refresh
// period of exactly 10ms, and a back-off whose most equals its first of exactly 1ms, are
// valid (fairlock.WithRefreshPeriod: "at least 10ms"; spinlock.WithBackOff: "first, at
// least 1ms, ... up to most, at least first").
func TestOptionLimits(t *testing.T) {
	apply := func(f func(*Settings)) *Settings {
		s := new(Settings)
		f(s)
		return s
	}
	if s := apply(Refresh(10 * time.Millisecond)); s.Err != nil || s.RefreshPeriod() != 10*time.Millisecond {
		t.Errorf("Refresh(10ms): period %v, error %v", s.RefreshPeriod(), s.Err)
	}
	if s := apply(Refresh(10*time.Millisecond - 1)); !errors.Is(s.Err, lockerr.ErrInvalidOption) {
		t.Errorf("Refresh(10ms-1ns): error %v, want ErrInvalidOption", s.Err)
	}
	if s := apply(Refresh(2 * Forever)); s.Err != nil || s.RefreshPeriod() != Forever {
		t.Errorf("Refresh(200 years): period %v, error %v; want a hundred years", s.RefreshPeriod(), s.Err)
	}
	if s := apply(BackOff(time.Millisecond, time.Millisecond)); s.Err != nil {
		t.Errorf("BackOff(1ms, 1ms): %v", s.Err)
	} else if first, most := s.SpinBackOff(); first != time.Millisecond || most != time.Millisecond {
		t.Errorf("BackOff(1ms, 1ms): back-off %v to %v", first, most)
	}
	for _, b := range [][2]time.Duration{{time.Millisecond - 1, time.Second}, {2 * time.Millisecond, time.Millisecond}} {
		if s := apply(BackOff(b[0], b[1])); !errors.Is(s.Err, lockerr.ErrInvalidOption) {
			t.Errorf("BackOff(%v, %v): error %v, want ErrInvalidOption", b[0], b[1], s.Err)
		}
	}
}

// Merge leaves base as it was: a call's options are that call's alone. The first invalid
// option is the one reported.
func TestMergeLeavesTheBase(t *testing.T) {
	base := &Settings{Fencing: true}
	first := errors.New("first")
	got := Merge(base, []Shared{
		func(s *Settings) { s.Lease = time.Second },
		nil,
		func(s *Settings) { s.Invalid(first) },
		func(s *Settings) { s.Invalid(errors.New("second")) },
	})
	if got.Lease != time.Second || !got.Fencing || got.Err != first {
		t.Errorf("merged settings %+v; want the base's fencing, a 1s lease and the first error", *got)
	}
	if *base != (Settings{Fencing: true}) {
		t.Errorf("Merge changed its base: %+v", *base)
	}
	if Merge(base, []Shared(nil)) != base {
		t.Error("Merge without options did not return its base")
	}
}
