package engine

import (
	"context"
	"fmt"
	"sync"

	"github.com/relock-go/relock/internal/owner"
)

// Locker returns a sync.Locker on l, as etcd's concurrency.NewLocker: for code that takes
// a sync.Locker (sync.Cond, a library's hook). Every Lock is taken by a new owner, so two
// goroutines that share the Locker exclude each other as they would with a sync.Mutex (a
// read lock's Locker lets them share, as sync.RWMutex.RLocker does); it is not reentrant.
// Lock waits until the lock is taken or ctx ends; Unlock releases the hold the Locker
// took, whichever goroutine calls it.
//
// sync.Locker has no error to return, and returning from Lock without the lock would
// break mutual exclusion unseen, so Lock panics with the *Error when the lock cannot be
// taken: ctx ended, the client closed, Redis kept failing. Unlock of a Locker that holds
// nothing panics, as sync.Mutex's does. An Unlock whose release fails does not panic: the
// hold is no longer renewed and frees when its lease runs out (the client logs it). A
// name that is not valid is reported here, never by a panic.
func (l *Lock) Locker(ctx context.Context) (sync.Locker, error) {
	if err := l.check(ctx, nil); err != nil {
		return nil, l.fail("locker", err)
	}
	return &locker{l: l, ctx: ctx}, nil
}

type locker struct {
	l   *Lock
	ctx context.Context

	mu   sync.Mutex
	held []context.Context // the holds taken and not released: one, or a read lock's several
}

func (k *locker) Lock() {
	held, err := k.l.lock(owner.Fresh(k.ctx), "lock", true, &k.l.defaults)
	if err != nil {
		panic(err)
	}
	k.mu.Lock()
	k.held = append(k.held, held)
	k.mu.Unlock()
}

func (k *locker) Unlock() {
	k.mu.Lock()
	n := len(k.held)
	if n == 0 {
		k.mu.Unlock()
		panic(fmt.Sprintf("relock: Unlock of an unlocked Locker of lock %q", k.l.Name()))
	}
	held := k.held[n-1]
	k.held[n-1] = nil
	k.held = k.held[:n-1]
	k.mu.Unlock()
	_ = k.l.Unlock(held) // a failed release is no longer renewed: see Locker
}
