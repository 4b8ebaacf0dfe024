package rlock_test

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/relock-go/relock"
	"github.com/relock-go/relock/internal/redistest"
	"github.com/relock-go/relock/internal/redistest/relocktest"
)

// Operations of FuzzLockSequence: each input byte is one, on owner (b/6)%3 and lock
// (b/18)%2.
const (
	fzTryLock = iota
	fzLock    // Lock with a 20ms timeout: a lock held by another owner gives DeadlineExceeded
	fzUnlock
	fzReenter // Lock with the owner's context and no timeout, when the model says it holds
	fzHoldCount
	fzForceUnlock
	fzOps
)

const fzMaxOps = 40

var fzOpNames = [fzOps]string{"TryLock", "Lock(20ms)", "Unlock", "re-enter", "HoldCount", "ForceUnlock"}

// fzHold is the model of one lock: who holds it and how many times (owner -1: free).
type fzHold struct{ owner, count int }

// FuzzLockSequence runs short sequences of lock calls by up to three owners on one or two
// locks of one client, and checks every result against a model of who holds what.
func FuzzLockSequence(f *testing.F) {
	f.Add([]byte{0, 0, 2, 2})
	f.Add([]byte{0, 6, 1, 7, 8, 2, 6})
	b := redistest.Mini(f)
	c := relocktest.New(f, b)
	var inputs atomic.Int64

	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) > fzMaxOps {
			data = data[:fzMaxOps]
		}
		ctx := context.Background()
		n := inputs.Add(1)
		names := [2]string{fmt.Sprintf("fz:%d:a", n), fmt.Sprintf("fz:%d:b", n)}
		// Each owner's context: no owner until its first acquisition, then a context that
		// carries the owner and is never cancelled (a hold's context ends at its unlock).
		var owners [3]context.Context
		for i := range owners {
			owners[i] = relock.NewOwner(ctx)
		}
		model := [2]fzHold{{-1, 0}, {-1, 0}}
		// A lock the model says is held is released at the end, so the client's watchdog
		// does not carry it into the next input.
		defer func() {
			if t.Failed() {
				for _, name := range names {
					c.Lock(name).ForceUnlock(ctx)
				}
				return
			}
			for l, h := range model {
				for ; h.count > 0; h.count-- {
					if err := c.Lock(names[l]).Unlock(owners[h.owner]); err != nil {
						t.Errorf("final Unlock of %s by owner %d: %v", names[l], h.owner, err)
						return
					}
				}
			}
		}()

		for step, by := range data {
			op, o, l := int(by)%fzOps, int(by)/fzOps%3, int(by)/(fzOps*3)%2
			mu := c.Lock(names[l])
			h := &model[l]
			free, mine := h.owner < 0, h.owner == o
			where := fmt.Sprintf("step %d: %s by owner %d on lock %d (model %+v)", step, fzOpNames[op], o, l, *h)
			wantErr := func(err, target error) {
				t.Helper()
				if !errors.Is(err, target) {
					t.Fatalf("%s: err = %v; want %v", where, err, target)
				}
			}
			acquired := func(held context.Context, err error) {
				t.Helper()
				if err != nil {
					t.Fatalf("%s: %v; want acquired", where, err)
				}
				owners[o] = context.WithoutCancel(held)
				h.owner, h.count = o, h.count+1
			}

			switch op {
			case fzTryLock:
				held, err := mu.TryLock(owners[o])
				if free || mine {
					acquired(held, err)
				} else {
					wantErr(err, relock.ErrLocked)
				}
			case fzLock, fzReenter:
				if op == fzReenter && mine {
					acquired(mu.Lock(owners[o]))
					break
				}
				// A lock that must wait gives up after 20ms; one the owner may take gets
				// 5s, room for a loaded machine (the fuzzer's own workers take the CPUs).
				wait := 20 * time.Millisecond
				if free || mine {
					wait = 5 * time.Second
				}
				tctx, cancel := context.WithTimeout(owners[o], wait)
				held, err := mu.Lock(tctx)
				if free || mine {
					acquired(context.WithoutCancel(held), err)
				} else {
					wantErr(err, context.DeadlineExceeded)
				}
				cancel()
			case fzUnlock:
				err := mu.Unlock(owners[o])
				if !mine {
					wantErr(err, relock.ErrNotHeld)
					break
				}
				if err != nil {
					t.Fatalf("%s: Unlock: %v", where, err)
				}
				if h.count--; h.count == 0 {
					h.owner = -1
				}
			case fzHoldCount:
				want := 0
				if mine {
					want = h.count
				}
				if got, err := mu.HoldCount(owners[o]); err != nil || got != want {
					t.Fatalf("%s: HoldCount = %d, %v; want %d", where, got, err, want)
				}
			case fzForceUnlock:
				if deleted, err := mu.ForceUnlock(ctx); err != nil || deleted == free {
					t.Fatalf("%s: ForceUnlock = %v, %v; want %v", where, deleted, err, !free)
				}
				*h = fzHold{-1, 0}
			}

			if locked, err := mu.IsLocked(ctx); err != nil || locked != (h.owner >= 0) {
				t.Fatalf("%s: then IsLocked = %v, %v; model %+v", where, locked, err, *h)
			}
		}
	})
}
