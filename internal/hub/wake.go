package hub

import (
	"context"
	"slices"
	"strconv"
	"time"

	"github.com/redis/rueidis"

	"github.com/relock-go/relock/internal/bound"
	"github.com/relock-go/relock/internal/script"
)

// One wake-up per release across clients (lua/wake.lua). A lock's waiters register their
// client's wake code in the lock's wake registry; the unlock that frees the lock picks one
// registered client and publishes its code on the lock's channel, then the lock message
// ("0", or "1") that Redisson's clients act on. Every relock client hears both: the one
// whose code it is wakes one waiter, and all of them ignore the message that follows a
// code. A message with no code before it (Redisson's unlock, or relock's with nobody
// registered) wakes one waiter in every client, as it always did.

// Registry names a lock's wake registries: Wake, of the clients with waiters that an
// unlock wakes one at a time; Readers, of the clients with a read-write lock's readers
// waiting, who are all woken together.
type Registry struct {
	Wake, Readers string
}

// PublishCommand is the command that wakes the waiters of a lock channel: PUBLISH, or with
// sharded pub/sub SPUBLISH, whose subscribers listen on the channel's shard.
func PublishCommand(sharded bool) string {
	if sharded {
		return "spublish"
	}
	return "publish"
}

// pass is a wake-up this client got for a channel it no longer waits on.
type pass struct {
	channel string
	reg     Registry
}

// isCode reports whether a message on a lock channel is a wake code rather than one of
// the lock messages: codes have four digits or more, the lock messages one.
func isCode(msg string) bool { return len(msg) >= 4 && digits(msg) }

// isLease reports whether a message is a new hold's lease, "-" and its milliseconds.
func isLease(msg string) bool { return len(msg) >= 2 && msg[0] == '-' && digits(msg[1:]) }

func digits(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

// onLease handles a new hold's lease heard on channel c: the waiters parked on the
// channel's timer were told to sleep until the previous hold ended, and must look again
// when this one ends, if that is sooner. Nobody tries now. h.mu must be held.
func (h *Hub) onLease(c *channel, msg string) {
	ms, err := strconv.ParseInt(msg[1:], 10, 64)
	if err != nil || !slices.ContainsFunc(c.waiters, func(w *waiter) bool { return w.shared }) {
		return
	}
	h.arm(c, time.Duration(ms)*time.Millisecond)
}

// onCode handles a wake code heard on channel c. h.mu must be held.
func (h *Hub) onCode(name string, c *channel, code string) {
	c.skip++ // the lock message follows, and is this wake-up's, not one of its own
	if code != h.code {
		return
	}
	if c.refs > 0 {
		h.grantOne(c)
		return
	}
	// Nobody here waits any more (the waiter gave up, and the channel lingers): the
	// release that picked this client must still wake somebody.
	h.passLater(name, c)
}

// passLater has the hub's goroutine pass a wake-up for channel c on to another client
// (see passOn), if its waiters register. h.mu must be held.
func (h *Hub) passLater(name string, c *channel) {
	if c.reg.Wake != "" {
		h.passes = append(h.passes, pass{name, c.reg})
		h.poke()
	}
}

// passOn runs the pass-ons that onCode queued, from the hub's goroutine: each wakes the
// next registered client of the lock, or every client once when none is (lua/pass.lua).
// Best effort: one that fails leaves the waiters to their time bound.
func (h *Hub) passOn() {
	h.mu.Lock()
	passes := h.passes
	h.passes = nil
	h.mu.Unlock()
	if len(passes) == 0 {
		return
	}
	calls := make([]script.Call, len(passes))
	for i, p := range passes {
		calls[i] = script.Call{Script: script.Pass(), Keys: []string{p.reg.Wake, p.channel}, Args: []string{WakeOne, h.publish}}
	}
	ctx, cancel := context.WithTimeout(h.ctx, passTimeout)
	defer cancel()
	script.Batch(ctx, h.rc, calls)
}

// unregister takes this client's code out of the registries of channels it is about to
// unsubscribe. Best effort: an entry left behind runs out by itself, and meanwhile a
// wake-up that picks this client is passed on while it still hears the channel.
func (h *Hub) unregister(regs []Registry) {
	var cmds rueidis.Commands
	for _, r := range regs {
		for _, key := range []string{r.Wake, r.Readers} {
			if key != "" {
				cmds = append(cmds, h.rc.B().Zrem().Key(key).Member(h.code).Build())
			}
		}
	}
	if len(cmds) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(h.ctx, passTimeout)
	defer cancel()
	// Waited for until ctx ends only (see package bound): the hub's loop would otherwise
	// wait out a dial of a node that hangs, starting no subscription meanwhile.
	bound.Wait(ctx, func() []rueidis.RedisResult {
		return h.rc.DoMulti(ctx, cmds...) // in a cluster, each to its key's node
	})
}

// Others reports whether other subscribers of this client share the channel: a waiter
// that gets the lock then keeps its client registered, which the unlock that woke it took
// out of the registry, so that the next unlock can pick this client again.
func (s *Sub) Others() bool {
	s.h.mu.Lock()
	defer s.h.mu.Unlock()
	return s.c.refs > 1
}

// passTimeout bounds a pass-on or an unregistering, which must not hold up the hub's loop
// for long: either can fail without harm beyond a wait that runs to its bound.
const passTimeout = 2 * time.Second
