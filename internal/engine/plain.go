package engine

import (
	"github.com/relock-go/relock/internal/hub"
	"github.com/relock-go/relock/internal/script"
)

// Plain is Redisson's RLock: the hash <name> maps owners to hold counts; waiters share
// the lock's channel, and an unlock wakes one waiter per client, whichever wins the next
// attempt.
var Plain = &layout{
	hash:   rlockHash,
	fenced: true,
	shared: true,
	field:  self,
	grant:  token,
	acquire: func(l *Lock, a *attempt) script.Call {
		return script.Call{Script: script.RLockAcquire(), Keys: l.fence(a, l.n.Lock), Args: []string{a.leaseMs, a.who}}
	},
	channel: func(l *Lock, _ string) string { return l.n.Channel },
	release: func(l *Lock, field, latch string) script.Call {
		return script.Call{Script: script.RLockUnlock(), Keys: []string{l.n.Lock, l.n.Channel, latch},
			Args: []string{hub.WakeOne, field, l.latchTTL(), l.c.Publish}}
	},
	force: func(l *Lock) script.Call {
		return script.Call{Script: script.RLockForceUnlock(), Keys: []string{l.n.Lock, l.n.Channel},
			Args: []string{hub.WakeOne, l.c.Publish, rlockHash.shape}}
	},
}
