// Package lockopt holds the options of every lock kind and the settings they make.
//
// An option belongs to the kinds that understand it, and the compiler holds it to them:
// package rlock's options (Shared) apply to every kind, a fair lock's own options (Fair)
// only to fair locks, a read-write lock's own (RW) only to read-write locks. Each lock
// package names the interface its methods take: rlock takes Shared, fairlock ForFair
// (Shared or Fair), rwlock ForRW (Shared or RW). So rwlock.WithWriterPreference given to
// an rlock or fair lock does not compile, rather than being ignored.
package lockopt

import (
	"fmt"
	"time"

	"github.com/relock-go/relock/internal/lockerr"
)

// Lease returns the lease d as Redis keeps it, in whole milliseconds, and whether it is
// one (at least a millisecond). A fraction of a millisecond is dropped rather than kept by
// the client alone: the hold's context would then outlive Redis's lease by it, and
// another owner could get the lock while that context is live. Every lease the caller
// gives (WithLease, Extend, the client's watchdog timeout) goes through it.
func Lease(d time.Duration) (time.Duration, bool) {
	return d.Truncate(time.Millisecond), d >= time.Millisecond
}

// DefaultRefresh is how often a fair lock's waiter, or a waiting writer under writer
// preference, refreshes its queue entry.
const DefaultRefresh = 5 * time.Second

// Settings are the options in force for one acquisition.
type Settings struct {
	Lease   time.Duration // 0: the client's watchdog timeout, renewed while held
	Fencing bool
	Refresh time.Duration // Fair, and writers under preference: how often a waiter refreshes its entry; 0: DefaultRefresh
	// WriterPreference: new readers give way to a waiting writer (read-write locks).
	WriterPreference bool
	// Wait bounds how long Lock waits, without bounding the hold; 0: only ctx bounds it.
	Wait time.Duration
	// SpinFirst and SpinMost are a spin lock's back-off between tries: the first, and the
	// most it grows to; 0: DefaultSpinFirst, DefaultSpinMost.
	SpinFirst, SpinMost time.Duration
	Err                 error // the first invalid option
}

// A spin lock's back-off by default: Redisson's RSpinLock's (1ms, doubling, up to 128ms).
const (
	DefaultSpinFirst = time.Millisecond
	DefaultSpinMost  = 128 * time.Millisecond
)

// SpinBackOff is a spin lock's back-off in force: the first and the most.
func (s *Settings) SpinBackOff() (first, most time.Duration) {
	first, most = s.SpinFirst, s.SpinMost
	if first == 0 {
		first = DefaultSpinFirst
	}
	if most == 0 {
		most = max(DefaultSpinMost, first)
	}
	return first, most
}

// RefreshPeriod is the refresh period in force.
func (s *Settings) RefreshPeriod() time.Duration {
	if s.Refresh == 0 {
		return DefaultRefresh
	}
	return s.Refresh
}

// Invalid records err unless an earlier option was invalid already: the call that gets
// these settings fails with the first.
func (s *Settings) Invalid(err error) {
	if s.Err == nil {
		s.Err = err
	}
}

// Option is an option of any kind, as the engine applies it.
type Option interface{ apply(*Settings) }

// Shared is an option of every kind of lock.
type Shared func(*Settings)

// Fair is an option of fair locks only.
type Fair func(*Settings)

// RW is an option of read-write locks only.
type RW func(*Settings)

// Spin is an option of spin locks only.
type Spin func(*Settings)

// ForSpin is what a spin lock takes: Shared or Spin.
type ForSpin interface {
	Option
	spin()
}

// ForFair is what a fair lock takes: Shared or Fair.
type ForFair interface {
	Option
	fair()
}

// ForRW is what a read-write lock takes: Shared or RW.
type ForRW interface {
	Option
	rw()
}

func (f Shared) apply(s *Settings) { call(f, s) }
func (f Fair) apply(s *Settings)   { call(f, s) }
func (f RW) apply(s *Settings)     { call(f, s) }
func (Shared) fair()               {}
func (Shared) rw()                 {}
func (Fair) fair()                 {}
func (RW) rw()                     {}
func (f Spin) apply(s *Settings)   { call(f, s) }
func (Shared) spin()               {}
func (Spin) spin()                 {}

// call applies f; a nil option changes nothing.
func call(f func(*Settings), s *Settings) {
	if f != nil {
		f(s)
	}
}

// Merge returns base with opts applied. Without options it returns base itself: only a
// call with options pays for a copy.
func Merge[O Option](base *Settings, opts []O) *Settings {
	if len(opts) == 0 {
		return base
	}
	own := *base
	for _, o := range opts {
		if any(o) != nil { // a nil interface value: no option
			o.apply(&own)
		}
	}
	return &own
}

// Forever is the longest period a setting takes (a longer one is taken as Forever): a
// hundred years, as good as none. A refresh period's entry lives two periods, and twice
// a longer one, in milliseconds, overflows a server whose clock counts nanoseconds
// (miniredis, which then deletes the entry at once).
const Forever = 100 * 365 * 24 * time.Hour

// Refresh sets the refresh period, at least 10ms (else ErrInvalidOption); a longer one
// than Forever is taken as Forever.
func Refresh(d time.Duration) func(*Settings) {
	return func(s *Settings) {
		if d < 10*time.Millisecond {
			s.Invalid(lockerr.ErrInvalidOption)
			return
		}
		s.Refresh = min(d, Forever)
	}
}

// BackOff sets a spin lock's back-off: first at least a millisecond, most at least first
// (else ErrInvalidOption).
func BackOff(first, most time.Duration) func(*Settings) {
	return func(s *Settings) {
		if first < time.Millisecond || most < first {
			s.Invalid(fmt.Errorf("%w: a spin back-off from %v to %v; the first must be at least 1ms, the most at least the first", lockerr.ErrInvalidOption, first, most))
			return
		}
		s.SpinFirst, s.SpinMost = first, most
	}
}
