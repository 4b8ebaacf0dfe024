package engine

import (
	"context"

	"github.com/redis/rueidis"

	"github.com/relock-go/relock/internal/script"
)

// layout is one kind of lock: which keys and scripts its calls use and with what
// arguments, the message its release publishes, the hash field of an owner, and whether
// it takes fencing tokens. The mechanism (engine.go, attempt.go) calls it and never asks
// which kind it serves; a new kind is a new layout. Each kind's layout lives in the file
// that names it: plain.go, fair.go, read.go, write.go.
type layout struct {
	// name is the kind's name, as the observer hears it (observe.Kind).
	name string
	// hash is the shape of the lock's hash.
	hash hash
	// fenced: WithFencing makes a first-level acquisition take a token.
	fenced bool
	// shared: waiters of every owner listen on one channel and register their client to
	// be woken (lua/wake.lua); a waiter that gets the lock tells the ones still parked of
	// its lease (hub.Sub.Took).
	shared bool
	// shares: holds of different owners coexist (readers), so a waiter that gets the lock
	// also wakes the next parked one of its kind, which may get it too.
	shares bool
	// spins: waiters subscribe to nothing and are never woken; they try again after a
	// back-off that grows (see spin.go).
	spins bool
	// field is the hash field that counts owner's holds.
	field func(owner string) string
	// acquire is the acquire call of a, and marks a as queued when its waiter keeps an
	// entry that it must refresh and leave.
	acquire func(l *Lock, a *attempt) call
	// keepsWrite: the acquire reply's third value says whether the hold was taken beside
	// the owner's write hold (leases.Grant.KeepsWrite), rather than being the fencing token.
	keepsWrite bool
	// parent is the context a new hold of owner derives from; nil: the caller's.
	parent func(l *Lock, held context.Context, owner string) context.Context
	// channel is the channel a waiter of owner listens on.
	channel func(l *Lock, owner string) string
	// leave takes a queued waiter that gives up out of the queue; nil: never queued.
	leave func(ctx context.Context, l *Lock, a *attempt) error
	// release releases one hold of field if its count in Redis is expected ("": any), as
	// expect.lua says.
	release func(l *Lock, field, expected string) call
	// hand releases field's last hold and hands the lock to the parked waiter to of the
	// same client in the same call. nil: the kind's releases are never handed on (see
	// handoff.go).
	hand func(l *Lock, field string, to *attempt) call
	// force deletes the lock whoever holds it and wakes its waiters.
	force func(l *Lock) call
}

// call is one script call of a lock. It has room for the most keys and arguments of any
// kind's call and is passed by value, so that building one on the hot path (every
// acquisition and every unlock) allocates nothing.
type call struct {
	script *script.Script
	keys   [6]string
	args   [9]string
	nk, na int
}

// newCall returns the call of s with keys and args; it panics when they do not fit, which
// every test of the kind would show.
func newCall(s *script.Script, keys, args []string) call {
	c := call{script: s, nk: len(keys), na: len(args)}
	copy(c.keys[:], keys)
	copy(c.args[:], args)
	if c.nk > len(c.keys) || c.na > len(c.args) {
		panic("engine: a call with more keys or arguments than a call has room for")
	}
	return c
}

// exec runs the call once.
func (c *call) exec(ctx context.Context, rc rueidis.Client) rueidis.RedisResult {
	return c.script.Exec(ctx, rc, c.keys[:c.nk], c.args[:c.na])
}

// batched is the call as script.Batch takes it.
func (c *call) batched() script.Call {
	return script.Call{Script: c.script, Keys: c.keys[:c.nk], Args: c.args[:c.na]}
}

// hash is the shape of a lock's hash, shared by the kinds that use one hash: plain and fair
// locks an RLock's, the two sides of a read-write lock an RReadWriteLock's.
type hash struct {
	// shape names it as the state and force scripts check it: "rlock" or "rwlock".
	shape string
	// tagged: holds have read timeout keys under the name's hash tag, which the
	// watchdog's renewal needs.
	tagged bool
	// renewal is the script that renews holds of the hash (leases.Grant.Renewal).
	renewal *script.Script
}

var (
	rlockHash  = hash{shape: "rlock", renewal: script.RLockRenew()}
	rwlockHash = hash{shape: "rwlock", tagged: true, renewal: script.RWLockRenew()}
)

// self is the field of a kind that counts an owner's holds under the owner itself.
func self(owner string) string { return owner }

func flag(b bool) string {
	if b {
		return "1"
	}
	return "0"
}
