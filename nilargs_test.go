package relock_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/relock-go/relock"
	"github.com/relock-go/relock/countdown"
	"github.com/relock-go/relock/fairlock"
	"github.com/relock-go/relock/internal/redistest"
	"github.com/relock-go/relock/internal/redistest/relocktest"
	"github.com/relock-go/relock/multilock"
	"github.com/relock-go/relock/pubsub"
	"github.com/relock-go/relock/rlock"
	"github.com/relock-go/relock/rwlock"
	"github.com/relock-go/relock/semaphore"
	"github.com/relock-go/relock/spinlock"
	"github.com/relock-go/relock/watchdog"
)

// nilCtx is the context a careless caller passes.
var nilCtx context.Context

// bounded is the context of a call that must not wait: if it went ahead, it would wait for
// a lock held by another owner, for a second.
func bounded() context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	_ = cancel // ends with its timeout
	return ctx
}

// nilCall is one call given a nil context (or, for Do, a nil function) on the thing named
// name, which the case has set up beforehand.
type nilCall struct {
	name string
	call func(c *relock.Client, name string) error
}

// Every call that takes a context refuses a nil one with an error that names the lock and
// for which errors.Is(err, relock.ErrNilArgument) holds: no panic, and the lock's data as
// it was (held by another owner, or a semaphore's or a latch's count). So does Do with a
// nil function, before it locks anything. Token answers "no token"; NewOwner of nil starts
// from context.Background().
func TestNilArguments(t *testing.T) {
	calls := []nilCall{
		{"rlock Lock", func(c *relock.Client, n string) error { return keep(c.Lock(n).Lock(nilCtx)) }},
		{"rlock TryLock", func(c *relock.Client, n string) error { return keep(c.Lock(n).TryLock(nilCtx)) }},
		{"rlock Unlock", func(c *relock.Client, n string) error { return c.Lock(n).Unlock(nilCtx) }},
		{"rlock Extend", func(c *relock.Client, n string) error { return c.Lock(n).Extend(nilCtx, time.Minute) }},
		{"rlock Locker", func(c *relock.Client, n string) error { return keep(c.Lock(n).Locker(nilCtx)) }},
		{"rlock Do", func(c *relock.Client, n string) error { return c.Lock(n).Do(nilCtx, noop) }},
		{"rlock Do of nil", func(c *relock.Client, n string) error { return c.Lock(n).Do(bounded(), nil) }},
		{"rlock HoldCount", func(c *relock.Client, n string) error { return keep(c.Lock(n).HoldCount(nilCtx)) }},
		{"rlock IsHeld", func(c *relock.Client, n string) error { return keep(c.Lock(n).IsHeld(nilCtx)) }},
		{"rlock IsLocked", func(c *relock.Client, n string) error { return keep(c.Lock(n).IsLocked(nilCtx)) }},
		{"rlock TTL", func(c *relock.Client, n string) error { return keep(c.Lock(n).TTL(nilCtx)) }},
		{"rlock ForceUnlock", func(c *relock.Client, n string) error { return keep(c.Lock(n).ForceUnlock(nilCtx)) }},
		{"fair Lock", func(c *relock.Client, n string) error { return keep(c.FairLock(n).Lock(nilCtx)) }},
		{"fair TryLock", func(c *relock.Client, n string) error { return keep(c.FairLock(n).TryLock(nilCtx)) }},
		{"fair Unlock", func(c *relock.Client, n string) error { return c.FairLock(n).Unlock(nilCtx) }},
		{"fair Do of nil", func(c *relock.Client, n string) error { return c.FairLock(n).Do(bounded(), nil) }},
		{"fair ForceUnlock", func(c *relock.Client, n string) error { return keep(c.FairLock(n).ForceUnlock(nilCtx)) }},
		{"rw RLock", func(c *relock.Client, n string) error { return keep(c.RWLock(n).RLock(nilCtx)) }},
		{"rw Lock", func(c *relock.Client, n string) error { return keep(c.RWLock(n).Lock(nilCtx)) }},
		{"rw RUnlock", func(c *relock.Client, n string) error { return c.RWLock(n).RUnlock(nilCtx) }},
		{"rw RLocker", func(c *relock.Client, n string) error { return keep(c.RWLock(n).RLocker(nilCtx)) }},
		{"rw RDo of nil", func(c *relock.Client, n string) error { return c.RWLock(n).RDo(bounded(), nil) }},
		{"rw RHoldCount", func(c *relock.Client, n string) error { return keep(c.RWLock(n).RHoldCount(nilCtx)) }},
		{"rw ForceUnlock", func(c *relock.Client, n string) error { return keep(c.RWLock(n).ForceUnlock(nilCtx)) }},
		{"spin Lock", func(c *relock.Client, n string) error { return keep(c.SpinLock(n).Lock(nilCtx)) }},
		{"spin Do of nil", func(c *relock.Client, n string) error { return c.SpinLock(n).Do(bounded(), nil) }},
		{"multi Lock", func(c *relock.Client, n string) error {
			return keep(c.MultiLock(relock.Member(c.Lock(n)), relock.Member(c.Lock(n+":2"))).Lock(nilCtx))
		}},
		{"multi TryLock", func(c *relock.Client, n string) error {
			return keep(c.MultiLock(relock.Member(c.Lock(n+":2")), relock.Member(c.Lock(n))).TryLock(nilCtx))
		}},
		{"multi Unlock", func(c *relock.Client, n string) error {
			return c.MultiLock(relock.Member(c.Lock(n)), relock.Member(c.Lock(n+":2"))).Unlock(nilCtx)
		}},
		{"multi Do of nil", func(c *relock.Client, n string) error {
			return c.MultiLock(relock.Member(c.Lock(n)), relock.Member(c.Lock(n+":2"))).Do(bounded(), nil)
		}},
	}
	counted := []nilCall{
		{"semaphore Acquire", func(c *relock.Client, n string) error { return c.Semaphore(n).Acquire(nilCtx, 1) }},
		{"semaphore TryAcquire", func(c *relock.Client, n string) error { return keep(c.Semaphore(n).TryAcquire(nilCtx, 1)) }},
		{"semaphore Release", func(c *relock.Client, n string) error { return c.Semaphore(n).Release(nilCtx, 1) }},
		{"semaphore TrySetPermits", func(c *relock.Client, n string) error { return keep(c.Semaphore(n).TrySetPermits(nilCtx, 1)) }},
		{"semaphore AddPermits", func(c *relock.Client, n string) error { return c.Semaphore(n).AddPermits(nilCtx, 1) }},
		{"semaphore AvailablePermits", func(c *relock.Client, n string) error { return keep(c.Semaphore(n).AvailablePermits(nilCtx)) }},
		{"semaphore Drain", func(c *relock.Client, n string) error { return keep(c.Semaphore(n).Drain(nilCtx)) }},
		{"semaphore AcquireLease", func(c *relock.Client, n string) error { return keep(c.Semaphore(n).AcquireLease(nilCtx, 1)) }},
		{"semaphore TryAcquireLease", func(c *relock.Client, n string) error {
			_, _, err := c.Semaphore(n).TryAcquireLease(nilCtx, 1)
			return err
		}},
		{"semaphore ReleaseLease", func(c *relock.Client, n string) error { return c.Semaphore(n).ReleaseLease(nilCtx) }},
		{"latch TrySetCount", func(c *relock.Client, n string) error { return keep(c.CountDownLatch(n).TrySetCount(nilCtx, 1)) }},
		{"latch CountDown", func(c *relock.Client, n string) error { return c.CountDownLatch(n).CountDown(nilCtx) }},
		{"latch Count", func(c *relock.Client, n string) error { return keep(c.CountDownLatch(n).Count(nilCtx)) }},
		{"latch Await", func(c *relock.Client, n string) error { return c.CountDownLatch(n).Await(nilCtx) }},
	}
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		c := relocktest.New(t, b)
		side := b.Client(t)
		ctx := redistest.Context(t, time.Minute)
		call := func(t *testing.T, nc nilCall, name string) (err error) {
			t.Helper()
			defer func() {
				if r := recover(); r != nil {
					t.Fatalf("%s with a nil argument panicked: %v", nc.name, r)
				}
			}()
			return nc.call(c, name)
		}
		for i, nc := range calls {
			t.Run(nc.name, func(t *testing.T) {
				name := fmt.Sprintf("nil:%d", i)
				// Held by another owner (a read hold for the read-write lock's calls), so
				// that a call that went ahead would change or release it.
				var held context.Context
				var err error
				if nc.name[:2] == "rw" {
					held, err = c.RWLock(name).RLock(relock.NewOwner(ctx))
				} else {
					held, err = c.Lock(name).Lock(relock.NewOwner(ctx))
				}
				if err != nil {
					t.Fatal(err)
				}
				redistest.Unchanged(t, side, name, func() {
					wantErr(t, call(t, nc, name), relock.ErrNilArgument, name)
				})
				if held.Err() != nil {
					t.Fatalf("the holder's context ended: %v", context.Cause(held))
				}
			})
		}
		for i, nc := range counted {
			t.Run(nc.name, func(t *testing.T) {
				name := fmt.Sprintf("nilcount:%d", i)
				if _, err := c.Semaphore(name).TrySetPermits(ctx, 2); err != nil {
					t.Fatal(err)
				}
				redistest.Unchanged(t, side, name, func() {
					wantErr(t, call(t, nc, name), relock.ErrNilArgument, name)
				})
			})
		}
		t.Run("Token", func(t *testing.T) {
			if tok, ok := c.Lock("nil:token").Token(nilCtx); tok != 0 || ok {
				t.Errorf("Token(nil) = %d, %v; want 0, false", tok, ok)
			}
			if ids := c.Semaphore("nil:ids").PermitIDs(nilCtx); ids != nil {
				t.Errorf("PermitIDs(nil) = %v; want none", ids)
			}
		})
		t.Run("NewOwner", func(t *testing.T) {
			var owned context.Context
			func() {
				defer func() {
					if r := recover(); r != nil {
						t.Fatalf("NewOwner(nil) panicked: %v", r)
					}
				}()
				owned = relock.NewOwner(nilCtx)
			}()
			held, err := c.Lock("nil:owner").Lock(owned)
			if err != nil {
				t.Fatal(err)
			}
			if err := c.Lock("nil:owner").Unlock(held); err != nil {
				t.Fatal(err)
			}
		})
	})
}

// A lock, semaphore, latch or client that no client made (a zero value, say a struct
// field that was never set, or a nil pointer) fails every call with ErrInvalidOption,
// saying so, and never panics: it has no client to send through.
func TestZeroValues(t *testing.T) {
	for _, v := range []struct {
		what string
		unmade
	}{
		{"zero", unmade{new(rlock.Mutex), new(fairlock.Mutex), new(spinlock.Mutex), new(rwlock.RWMutex),
			new(multilock.MultiLock), new(semaphore.Weighted), new(countdown.Latch), new(relock.Client)}},
		{"nil", unmade{}},
	} {
		t.Run(v.what, func(t *testing.T) { v.check(t) })
	}
}

// unmade is one of each of the values TestZeroValues calls.
type unmade struct {
	mu *rlock.Mutex
	fm *fairlock.Mutex
	sm *spinlock.Mutex
	rw *rwlock.RWMutex
	ml *multilock.MultiLock
	s  *semaphore.Weighted
	l  *countdown.Latch
	c  *relock.Client
}

func (u unmade) check(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	mu, fm, sm, rw, ml, s, l, c := u.mu, u.fm, u.sm, u.rw, u.ml, u.s, u.l, u.c
	calls := map[string]func() error{
		"rlock Lock":           func() error { return keep(mu.Lock(ctx)) },
		"rlock TryLock":        func() error { return keep(mu.TryLock(ctx)) },
		"rlock Unlock":         func() error { return mu.Unlock(ctx) },
		"rlock Do":             func() error { return mu.Do(ctx, noop) },
		"rlock HoldCount":      func() error { return keep(mu.HoldCount(ctx)) },
		"rlock IsHeld":         func() error { return keep(mu.IsHeld(ctx)) },
		"rlock IsLocked":       func() error { return keep(mu.IsLocked(ctx)) },
		"rlock TTL":            func() error { return keep(mu.TTL(ctx)) },
		"rlock ForceUnlock":    func() error { return keep(mu.ForceUnlock(ctx)) },
		"rlock Extend":         func() error { return mu.Extend(ctx, time.Second) },
		"rlock Locker":         func() error { return keep(mu.Locker(ctx)) },
		"fair Lock":            func() error { return keep(fm.Lock(ctx)) },
		"fair TryLock":         func() error { return keep(fm.TryLock(ctx)) },
		"fair Unlock":          func() error { return fm.Unlock(ctx) },
		"fair IsLocked":        func() error { return keep(fm.IsLocked(ctx)) },
		"spin Lock":            func() error { return keep(sm.Lock(ctx)) },
		"spin TryLock":         func() error { return keep(sm.TryLock(ctx)) },
		"spin Unlock":          func() error { return sm.Unlock(ctx) },
		"rw RLock":             func() error { return keep(rw.RLock(ctx)) },
		"rw Lock":              func() error { return keep(rw.Lock(ctx)) },
		"rw RUnlock":           func() error { return rw.RUnlock(ctx) },
		"rw Unlock":            func() error { return rw.Unlock(ctx) },
		"rw IsLocked":          func() error { return keep(rw.IsLocked(ctx)) },
		"rw RLocker":           func() error { return keep(rw.RLocker(ctx)) },
		"multi Lock":           func() error { return keep(ml.Lock(ctx)) },
		"multi TryLock":        func() error { return keep(ml.TryLock(ctx)) },
		"multi Unlock":         func() error { return ml.Unlock(ctx) },
		"multi Do":             func() error { return ml.Do(ctx, noop) },
		"semaphore Acquire":    func() error { return s.Acquire(ctx, 1) },
		"semaphore TryAcquire": func() error { return keep(s.TryAcquire(ctx, 1)) },
		"semaphore Release":    func() error { return s.Release(ctx, 1) },
		"semaphore AddPermits": func() error { return s.AddPermits(ctx, 1) },
		"semaphore Drain":      func() error { return keep(s.Drain(ctx)) },
		"semaphore TrySetPermits": func() error {
			return keep(s.TrySetPermits(ctx, 1))
		},
		"semaphore AcquireLease": func() error {
			return keep(s.AcquireLease(ctx, 1))
		},
		"semaphore ReleaseLease": func() error { return s.ReleaseLease(ctx) },
		"latch TrySetCount":      func() error { return keep(l.TrySetCount(ctx, 1)) },
		"latch CountDown":        func() error { return l.CountDown(ctx) },
		"latch Count":            func() error { return keep(l.Count(ctx)) },
		"latch Await":            func() error { return l.Await(ctx) },
		"client Lock":            func() error { return keep(c.Lock("x").Lock(ctx)) },
		"client FairLock":        func() error { return keep(c.FairLock("x").Lock(ctx)) },
		"client SpinLock":        func() error { return keep(c.SpinLock("x").Lock(ctx)) },
		"client RWLock":          func() error { return keep(c.RWLock("x").RLock(ctx)) },
		"client MultiLock":       func() error { return keep(c.MultiLock(relock.Member(c.Lock("x"))).Lock(ctx)) },
		"client Semaphore":       func() error { return c.Semaphore("x").Acquire(ctx, 1) },
		"client CountDownLatch":  func() error { return keep(c.CountDownLatch("x").Count(ctx)) },
		"client Close":           func() error { return c.Close() },
	}
	for what, call := range calls {
		func() {
			defer func() {
				if r := recover(); r != nil {
					t.Errorf("%s of a value no client made panicked: %v", what, r)
				}
			}()
			if err := call(); !errors.Is(err, relock.ErrInvalidOption) {
				t.Errorf("%s of a value no client made: %v; want errors.Is ErrInvalidOption", what, err)
			}
		}()
	}
	answers := map[string]func() any{
		"rlock Token":          func() any { tok, ok := mu.Token(ctx); return fmt.Sprint(tok, ok) },
		"rlock Name":           func() any { return mu.Name() },
		"fair Name":            func() any { return fm.Name() },
		"spin Name":            func() any { return sm.Name() },
		"rw Name":              func() any { return rw.Name() },
		"multi Names":          func() any { return len(ml.Names()) },
		"semaphore Name":       func() any { return s.Name() },
		"semaphore PermitIDs":  func() any { return len(s.PermitIDs(ctx)) },
		"latch Name":           func() any { return l.Name() },
		"client ID":            func() any { return c.ID() },
		"client WatchdogStats": func() any { return c.WatchdogStats() == watchdog.Stats{} },
		"client PubSubStats":   func() any { return c.PubSubStats() == pubsub.Stats{} },
		"an error of no cause": func() any { return (&relock.Error{Op: "lock", Name: "x"}).Error() },
	}
	want := map[string]any{"rlock Token": "0 false", "multi Names": 0, "semaphore PermitIDs": 0,
		"client WatchdogStats": true, "client PubSubStats": true, "an error of no cause": `relock: lock "x"`}
	for what, answer := range answers {
		func() {
			defer func() {
				if r := recover(); r != nil {
					t.Errorf("%s of a value no client made panicked: %v", what, r)
				}
			}()
			w, ok := want[what]
			if !ok {
				w = ""
			}
			if got := answer(); got != w {
				t.Errorf("%s of a value no client made = %#v; want %#v", what, got, w)
			}
		}()
	}
}
