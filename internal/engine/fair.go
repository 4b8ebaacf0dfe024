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
	hash:   rlockHash,
	fenced: true,
	field:  self,
	grant:  token,
	acquire: func(l *Lock, a *attempt) script.Call {
		a.queued = true
		return script.Call{Script: script.FairAcquire(), Keys: l.fence(a, l.n.Lock, l.n.Queue, l.n.Deadlines),
			Args: []string{a.leaseMs, a.who, a.entryMs(), flag(a.wait), l.c.Publish, l.n.FairChannel, hub.Recheck}}
	},
	channel: func(l *Lock, owner string) string { return l.n.Waiter(owner) },
	// A waiter that gives up passes its turn on if it had come.
	leave: func(ctx context.Context, l *Lock, a *attempt) error {
		return script.FairRelease().Exec(ctx, l.c.Redis, []string{l.n.Lock, l.n.Queue, l.n.Deadlines},
			[]string{"leave", a.owner, "0", l.c.Publish, l.n.FairChannel, hub.WakeOne}).Error()
	},
	release: func(l *Lock, field, latch string) script.Call {
		return script.Call{Script: script.FairRelease(), Keys: []string{l.n.Lock, l.n.Queue, l.n.Deadlines, latch},
			Args: []string{"unlock", field, l.latchTTL(), l.c.Publish, l.n.FairChannel, hub.WakeOne}}
	},
	force: func(l *Lock) script.Call {
		return script.Call{Script: script.FairRelease(), Keys: []string{l.n.Lock, l.n.Queue, l.n.Deadlines},
			Args: []string{"force", "", "0", l.c.Publish, l.n.FairChannel, hub.WakeOne}}
	},
}
