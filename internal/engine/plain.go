package engine

import (
	"github.com/relock-go/relock/internal/hub"
	"github.com/relock-go/relock/internal/script"
)

// Plain is Redisson's RLock: the hash <name> maps owners to hold counts; waiters share
// the lock's channel and register their client in the lock's wake registry, and an unlock
// wakes one waiter of the client registered longest (with none registered, one waiter per
// client, as Redisson's unlock does; see lua/wake.lua), or hands the lock to a waiter of its
// own client (handoff.go).
var Plain = &layout{
	name:   "lock",
	hash:   rlockHash,
	fenced: true,
	shared: true,
	field:  self,
	acquire: func(l *Lock, a *attempt) call {
		return l.fence(a, newCall(script.RLockAcquire(), []string{l.n.Lock, l.n.Wake}, []string{a.leaseMs, a.who, a.code(), a.stay, l.n.Channel, l.c.Publish}))
	},
	channel: func(l *Lock, _ string) string { return l.n.Channel },
	release: func(l *Lock, field, expected string) call {
		return newCall(script.RLockUnlock(), []string{l.n.Lock, l.n.Channel, l.n.Wake}, []string{hub.WakeOne, field, expected, l.c.Publish})
	},
	hand: func(l *Lock, field string, to *attempt) call {
		return l.fence(to, newCall(script.RLockHand(), []string{l.n.Lock, l.n.Channel, l.n.Wake},
			[]string{field, "1", l.c.Publish, to.owner, to.leaseMs, l.c.WakeCode}))
	},
	force: func(l *Lock) call {
		return newCall(script.RLockForceUnlock(), []string{l.n.Lock, l.n.Channel}, []string{hub.WakeOne, l.c.Publish, rlockHash.shape})
	},
}
