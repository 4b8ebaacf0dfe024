package engine

import (
	"context"

	"github.com/relock-go/relock/internal/hub"
	"github.com/relock-go/relock/internal/keys"
	"github.com/relock-go/relock/internal/script"
)

// Read is the read side of Redisson's RReadWriteLock: many owners may hold it at once.
// The owner's read holds are counted under its own field of the hash, and each has a
// timeout key of its own, {<name>}:<owner>:rwlock_timeout:<k>. Read holds carry no token.
var Read = &layout{
	name:   "read",
	hash:   rwlockHash,
	shared: true,
	shares: true,
	field:  self,
	acquire: func(l *Lock, a *attempt) call {
		return newCall(script.RWLockReadAcquire(), []string{l.n.Lock, l.n.ReadTimeouts(a.who), l.n.Writers, l.n.Readers, l.n.Wake},
			[]string{a.leaseMs, a.who, keys.WriteField(a.who), flag(a.s.WriterPreference), a.code(), a.stay, l.n.RWChannel, l.c.Publish})
	},
	// The read acquire script's third value says whether the hold was taken beside the
	// owner's write hold, which then lives as long as it does.
	keepsWrite: true,
	// A read hold taken with the context of the owner's write hold is the first step of a
	// downgrade: it must outlive the write hold, so it does not derive from it.
	parent: func(l *Lock, held context.Context, owner string) context.Context {
		return l.c.Watchdog.Outside(held, l.n.Lock, keys.WriteField(owner))
	},
	channel: rwChannel,
	release: rwRelease("read"),
	force:   rwForce,
}

// rwChannel is where a read-write lock's waiters listen, readers and writers alike.
func rwChannel(l *Lock, _ string) string { return l.n.RWChannel }

// rwRelease releases one hold of one side of a read-write lock.
func rwRelease(side string) func(l *Lock, field, expected string) call {
	return func(l *Lock, field, expected string) call {
		return newCall(script.RWLockUnlock(), []string{l.n.Lock, l.n.RWChannel, l.n.Tag, l.n.Writers, l.n.Wake, l.n.Readers},
			[]string{field, side, expected, l.c.Publish})
	}
}

// rwForce deletes a read-write lock; every waiter may try once it is gone, since readers
// can all enter.
func rwForce(l *Lock) call {
	return newCall(script.RLockForceUnlock(), []string{l.n.Lock, l.n.RWChannel}, []string{hub.WakeAll, l.c.Publish, rwlockHash.shape})
}
