package engine

import (
	"context"

	"github.com/relock-go/relock/internal/keys"
	"github.com/relock-go/relock/internal/script"
)

// Write is the write side of Redisson's RReadWriteLock: its hash field is the owner's
// with ":write" appended. Under writer preference a waiting writer registers in the
// writers zset, refreshes its entry and leaves it when it gives up.
var Write = &layout{
	name:   "write",
	hash:   rwlockHash,
	fenced: true,
	shared: true,
	field:  keys.WriteField,
	acquire: func(l *Lock, a *attempt) call {
		a.queued = a.wait && a.s.WriterPreference
		return l.fence(a, newCall(script.RWLockWriteAcquire(), []string{l.n.Lock, l.n.Writers, l.n.ReadTimeouts(a.who), l.n.Wake},
			[]string{a.leaseMs, a.owner, a.who, flag(a.queued), a.entryMs(), a.code(), a.stay, l.n.RWChannel, l.c.Publish}))
	},
	channel: rwChannel,
	// A preferred writer that gives up stops holding readers back.
	leave: func(ctx context.Context, l *Lock, a *attempt) error {
		return l.c.Redis.Do(ctx, l.c.Redis.B().Zrem().Key(l.n.Writers).Member(a.owner).Build()).Error()
	},
	release: rwRelease("write"),
	force:   rwForce,
}
