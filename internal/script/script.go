// Package script wraps relock's Lua scripts (the files of package lua), each once, and
// runs them: one at a time through rueidis, which sends EVALSHA and falls back to EVAL when
// the server has not seen the script (after a restart or SCRIPT FLUSH), or several
// pipelined with Batch, which does the same for a whole round trip.
//
// Every script touches only keys of one lock, or (the renewal batch) of locks in one
// cluster slot. The comment at the top of each file is its contract: keys, arguments and
// replies.
package script

import (
	"context"
	"crypto/sha1"
	"encoding/hex"
	"maps"
	"regexp"
	"strings"

	"github.com/redis/rueidis"

	"github.com/relock-go/relock/lua"
)

// Script is one Lua script, wrapped once: scripts are immutable, so one set serves every
// client in the process.
type Script struct {
	lua    *rueidis.Lua
	Source string // the text sent by EVAL
	SHA1   string // its digest, sent by EVALSHA
}

// Exec runs the script once: EVALSHA, and EVAL if the server does not know it.
func (s *Script) Exec(ctx context.Context, rc rueidis.Client, keys, args []string) rueidis.RedisResult {
	return s.lua.Exec(ctx, rc, keys, args)
}

// with prepends to a script's source the functions of preludes that it calls, directly or
// through one another, and the values of preludes that it or they name: whole.lua (the
// largest whole number a script keeps exactly), shape.lua (the lock-shape guard),
// expect.lua (the compare of a release's expected hold count), wake.lua (the wake
// registry), count.lua (the guard of a counting kind's key), permit.lua (leased permits'
// ids, clock and reclaim). Redis scripts cannot include one another.
//
// The functions a script never calls are left out because Redis runs a script's whole text
// at every call, and every function it defines is a closure made anew each time: on the
// lock and unlock scripts the unused ones cost the server about a tenth of a microsecond
// a cycle, for nothing. For the same reason a script may have a line "-- preludes": the
// functions go there instead of at the top, so that a path that returns above it (the
// commonest one, written without them) never makes them.
func with(src string, preludes ...string) string {
	var defs []definition
	for _, p := range preludes {
		defs = append(defs, definitions(p)...)
	}
	// A prelude function uses only what is defined before it (a Lua local is not in scope
	// above its definition), so one pass from the last to the first finds them all.
	need, named := calls(src), names(src)
	keep := make([]bool, len(defs))
	for i := len(defs) - 1; i >= 0; i-- {
		d := defs[i]
		if d.value && named[d.name] || !d.value && need[d.name] {
			keep[i] = true
			maps.Copy(need, calls(d.text))
			maps.Copy(named, names(d.text))
		}
	}
	var b strings.Builder
	for i, d := range defs {
		if keep[i] {
			b.WriteString(d.text)
		}
	}
	above, below, marked := strings.Cut(src, preludesHere)
	if !marked {
		return b.String() + src
	}
	for name := range names(above) {
		for _, d := range defs {
			if d.name == name {
				panic("script: " + name + " is used above the preludes' line") // a build mistake, caught by every test
			}
		}
	}
	return above + "\n" + b.String() + below
}

// preludesHere is the line of a script where with puts the preludes' functions.
const preludesHere = "\n-- preludes\n"

// definition is one top-level function or value of a prelude: its name and its text, up to
// the next one (the comment of the next one's group may come with it).
type definition struct {
	name, text string
	value      bool // "local <name> =": kept where it is named, not only where it is called
}

// definitions splits a prelude into its top-level definitions, each starting on a line
// "local function <name>(" or "local <name> =" at the line's start; the prelude's header
// comment, before the first, is dropped.
func definitions(prelude string) []definition {
	starts := localDefinition.FindAllStringSubmatchIndex(prelude, -1)
	defs := make([]definition, len(starts))
	for i, m := range starts {
		end := len(prelude)
		if i+1 < len(starts) {
			end = starts[i+1][0]
		}
		defs[i] = definition{name: prelude[m[4]:m[5]], text: prelude[m[0]:end], value: m[2] < 0}
	}
	return defs
}

// calls returns the names that text calls: every name followed by "(", outside comments.
// It finds more than the calls (a method's name, say), which only matters for a name that
// a prelude defines.
func calls(text string) map[string]bool {
	names := make(map[string]bool)
	for _, m := range call.FindAllStringSubmatch(comment.ReplaceAllString(text, ""), -1) {
		names[m[1]] = true
	}
	return names
}

// names returns the names that text mentions, outside comments: a value a prelude defines
// is kept wherever it is named.
func names(text string) map[string]bool {
	found := make(map[string]bool)
	for _, n := range name.FindAllString(comment.ReplaceAllString(text, ""), -1) {
		found[n] = true
	}
	return found
}

var (
	localDefinition = regexp.MustCompile(`(?m)^local (function )?([A-Za-z_][A-Za-z0-9_]*)\s*[(=]`)
	call            = regexp.MustCompile(`([A-Za-z_][A-Za-z0-9_]*)\s*\(`)
	name            = regexp.MustCompile(`[A-Za-z_][A-Za-z0-9_]*`)
	// comment is a Lua line comment: the scripts have no "--" inside a string literal.
	comment = regexp.MustCompile(`--[^\n]*`)
)

func newScript(src string) *Script {
	sum := sha1.Sum([]byte(src))
	return &Script{lua: rueidis.NewLuaScript(src), Source: src, SHA1: hex.EncodeToString(sum[:])}
}

// source returns the script file's text.
func source(file string) string {
	b, err := lua.FS.ReadFile(file)
	if err != nil {
		panic("script: " + file + " is not embedded in package lua") // a build mistake, caught by every test
	}
	return string(b)
}

// The preludes that with prepends.
var (
	whole  = source("whole.lua")
	shape  = source("shape.lua")
	expect = source("expect.lua")
	wake   = source("wake.lua")
	count  = source("count.lua")
	permit = source("permit.lua")
)

// Scripts are immutable once made, so one set serves every client in the process.
var (
	rlockAcquireScript       = newScript(with(source("rlock_acquire.lua"), whole, shape, wake))
	rlockUnlockScript        = newScript(with(source("rlock_unlock.lua"), whole, shape, expect, wake))
	rlockHandScript          = newScript(with(source("rlock_hand.lua"), whole, expect, wake))
	rlockForceUnlockScript   = newScript(with(source("rlock_force_unlock.lua"), whole, shape))
	rlockStateScript         = newScript(with(source("rlock_state.lua"), whole, shape))
	rlockRenewScript         = newScript(source("rlock_renew.lua"))
	fairAcquireScript        = newScript(with(source("fair_acquire.lua"), whole, shape))
	fairReleaseScript        = newScript(with(source("fair_release.lua"), whole, shape, expect))
	rwlockReadAcquireScript  = newScript(with(source("rwlock_read_acquire.lua"), whole, shape, wake))
	rwlockWriteAcquireScript = newScript(with(source("rwlock_write_acquire.lua"), whole, shape, wake))
	rwlockUnlockScript       = newScript(with(source("rwlock_unlock.lua"), whole, shape, expect, wake))
	rwlockRenewScript        = newScript(with(source("rwlock_renew.lua"), whole))
	passScript               = newScript(with(source("pass.lua"), whole, wake))
	semaphoreAcquireScript   = newScript(with(source("semaphore_acquire.lua"), whole, count, permit))
	semaphoreLeaveScript     = newScript(source("semaphore_leave.lua"))
	semaphoreReleaseScript   = newScript(with(source("semaphore_release.lua"), whole, count))
	semaphoreReturnScript    = newScript(with(source("semaphore_return.lua"), whole, count, permit))
	semaphoreRenewScript     = newScript(with(source("semaphore_renew.lua"), whole, permit))
	semaphoreAvailableScript = newScript(with(source("semaphore_available.lua"), whole, count, permit))
	semaphoreDrainScript     = newScript(with(source("semaphore_drain.lua"), whole, count, permit))
	latchSetScript           = newScript(with(source("latch_set.lua"), whole, count))
	latchCountDownScript     = newScript(with(source("latch_count_down.lua"), whole, count))
)

// AcquireReply appends the integers of an acquire script's reply (rlock, fair, read or
// write) to dst: {1, hold count, third} when the owner got the lock, {0, ms} when it must
// wait, {2} for an upgrade. A bare integer n, the reply of an acquisition whose third value
// is 0 (see package lua), reads as {1, n, 0}. It allocates nothing when dst has room for
// three.
func AcquireReply(dst []int64, r rueidis.RedisResult) ([]int64, error) {
	m, err := r.ToMessage()
	if err != nil {
		return nil, err
	}
	if m.IsInt64() {
		n, _ := m.AsInt64()
		return append(dst, 1, n, 0), nil
	}
	arr, err := m.ToArray()
	if err != nil {
		return nil, err
	}
	for _, e := range arr {
		n, err := e.AsInt64()
		if err != nil {
			return nil, err
		}
		dst = append(dst, n)
	}
	return dst, nil
}

// RLockAcquire acquires or re-enters a reentrant lock (rlock_acquire.lua).
func RLockAcquire() *Script { return rlockAcquireScript }

// RLockUnlock releases one hold of a reentrant lock, compared with the count the client
// expects (rlock_unlock.lua).
func RLockUnlock() *Script { return rlockUnlockScript }

// RLockHand releases an owner's last hold of a reentrant lock and hands the lock to a
// waiter of the same client in the same step (rlock_hand.lua).
func RLockHand() *Script { return rlockHandScript }

// RLockForceUnlock deletes a reentrant lock whoever holds it (rlock_force_unlock.lua).
func RLockForceUnlock() *Script { return rlockForceUnlockScript }

// RLockState reads a reentrant lock's state (rlock_state.lua).
func RLockState() *Script { return rlockStateScript }

// RLockRenew renews many reentrant locks' leases in one call (rlock_renew.lua).
func RLockRenew() *Script { return rlockRenewScript }

// FairAcquire acquires, re-enters or queues for a fair lock (fair_acquire.lua).
func FairAcquire() *Script { return fairAcquireScript }

// FairRelease unlocks a fair lock, leaves its queue, or force-unlocks it, waking the next
// live waiter (fair_release.lua).
func FairRelease() *Script { return fairReleaseScript }

// RWLockReadAcquire takes or re-enters a read hold (rwlock_read_acquire.lua).
func RWLockReadAcquire() *Script { return rwlockReadAcquireScript }

// RWLockWriteAcquire takes or re-enters the write hold (rwlock_write_acquire.lua).
func RWLockWriteAcquire() *Script { return rwlockWriteAcquireScript }

// RWLockUnlock releases one read or write hold, compared with the count the client expects
// (rwlock_unlock.lua).
func RWLockUnlock() *Script { return rwlockUnlockScript }

// RWLockRenew renews many read-write locks' holds in one call (rwlock_renew.lua).
func RWLockRenew() *Script { return rwlockRenewScript }

// Pass passes a wake-up on to the next client registered to be woken for a lock (pass.lua).
func Pass() *Script { return passScript }

// SemaphoreAcquire takes permits, or queues the client for them (semaphore_acquire.lua).
func SemaphoreAcquire() *Script { return semaphoreAcquireScript }

// SemaphoreLeave takes a client that stops waiting out of the queue (semaphore_leave.lua).
func SemaphoreLeave() *Script { return semaphoreLeaveScript }

// SemaphoreRelease adds permits and publishes the count (semaphore_release.lua).
func SemaphoreRelease() *Script { return semaphoreReleaseScript }

// SemaphoreReturn gives back leased permits by their ids (semaphore_return.lua).
func SemaphoreReturn() *Script { return semaphoreReturnScript }

// SemaphoreRenew renews many leases of permits in one call (semaphore_renew.lua).
func SemaphoreRenew() *Script { return semaphoreRenewScript }

// SemaphoreAvailable reads the available permits, putting back leased ones that ran out
// (semaphore_available.lua).
func SemaphoreAvailable() *Script { return semaphoreAvailableScript }

// SemaphoreDrain takes every available permit (semaphore_drain.lua).
func SemaphoreDrain() *Script { return semaphoreDrainScript }

// LatchSet sets a count-down latch's count if it has none (latch_set.lua).
func LatchSet() *Script { return latchSetScript }

// LatchCountDown counts a latch down, opening it at zero (latch_count_down.lua).
func LatchCountDown() *Script { return latchCountDownScript }
