package reentrant

import (
	"time"

	"github.com/relock-go/relock/internal/lockerr"
)

// Option changes how a lock is taken; the front ends alias it.
type Option func(*Settings)

// Settings are the options in force for one acquisition.
type Settings struct {
	Lease   time.Duration // 0: the client's watchdog timeout, renewed while held
	Fencing bool
	Refresh time.Duration // Fair, and writers under preference: how often a waiter refreshes its entry; 0: DefaultRefresh
	// WriterPreference: new readers give way to a waiting writer (read-write locks).
	WriterPreference bool
	// Wait bounds how long Lock waits, without bounding the hold; 0: only ctx bounds it.
	Wait time.Duration
	Err  error // the first invalid option
}

func (s *Settings) apply(opts []Option) {
	for _, o := range opts {
		if o != nil {
			o(s)
		}
	}
}

func (s *Settings) refresh() time.Duration {
	if s.Refresh == 0 {
		return DefaultRefresh
	}
	return s.Refresh
}

func (s *Settings) invalid(err error) {
	if s.Err == nil {
		s.Err = err
	}
}

// WithLease sets a fixed lease of at least a millisecond, not renewed.
func WithLease(d time.Duration) Option {
	return func(s *Settings) {
		if d < time.Millisecond {
			s.invalid(lockerr.ErrInvalidLease)
			return
		}
		s.Lease = d
	}
}

// WithFencing makes first-level acquisitions take a fencing token.
func WithFencing() Option {
	return func(s *Settings) { s.Fencing = true }
}

// WithRefresh sets how often a fair lock's waiter refreshes its queue entry, at least 10ms.
func WithRefresh(d time.Duration) Option {
	return func(s *Settings) {
		if d < 10*time.Millisecond {
			s.invalid(lockerr.ErrInvalidOption)
			return
		}
		s.Refresh = d
	}
}

// WithWriterPreference makes new readers of a read-write lock wait while a writer waits.
func WithWriterPreference() Option {
	return func(s *Settings) { s.WriterPreference = true }
}

// WithWaitTimeout bounds how long Lock waits, and only that: the hold's context does not
// inherit the bound. d must be positive.
func WithWaitTimeout(d time.Duration) Option {
	return func(s *Settings) {
		if d <= 0 {
			s.invalid(lockerr.ErrInvalidOption)
			return
		}
		s.Wait = d
	}
}
