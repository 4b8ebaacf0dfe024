package engine

import (
	"context"

	"github.com/relock-go/relock/internal/hub"
	"github.com/relock-go/relock/internal/script"
)

// Fair queues waiters in arrival order (relock's own semantics). Each waiter listens on a
// channel of its own, and an unlock wakes exactly the next live waiter. A waiter keeps an
// entry in the queue that it refreshes every refresh period, and leaves when it gives up.
var Fair = &layout{
	name:   "fairlock",
	hash:   rlockHash,
	fenced: true,
	field:  self,
	acquire: func(l *Lock, a *attempt) call {
		a.queued = true
		return l.fence(a, newCall(script.FairAcquire(), []string{l.n.Lock, l.n.Queue, l.n.Deadlines},
			[]string{a.leaseMs, a.who, a.entryMs(), flag(a.wait), l.c.Publish, l.n.FairChannel, hub.Recheck}))
	},
	channel: func(l *Lock, owner string) string { return l.n.Waiter(owner) },
	// A waiter that gives up passes its turn on if it had come.
	leave: func(ctx context.Context, l *Lock, a *attempt) error {
		return script.FairRelease().Exec(ctx, l.c.Redis, []string{l.n.Lock, l.n.Queue, l.n.Deadlines},
			[]string{"leave", a.owner, "", l.c.Publish, l.n.FairChannel, hub.WakeOne}).Error()
	},
	release: func(l *Lock, field, expected string) call {
		return newCall(script.FairRelease(), []string{l.n.Lock, l.n.Queue, l.n.Deadlines},
			[]string{"unlock", field, expected, l.c.Publish, l.n.FairChannel, hub.WakeOne})
	},
	force: func(l *Lock) call {
		return newCall(script.FairRelease(), []string{l.n.Lock, l.n.Queue, l.n.Deadlines},
			[]string{"force", "", "", l.c.Publish, l.n.FairChannel, hub.WakeOne})
	},
}
