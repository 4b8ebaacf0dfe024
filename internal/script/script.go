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

// guarded prepends shape.lua, the lock-shape guard, to a script that uses it.
func guarded(src string) string { return shape + src }

// releasing prepends expect.lua, the compare of a release's expected hold count, to a
// script that releases one hold.
func releasing(src string) string { return expect + src }

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

// shape is the lock-shape guard (shape.lua) that guarded prepends; expect is the release
// compare (expect.lua) that releasing prepends.
var (
	shape  = source("shape.lua")
	expect = source("expect.lua")
)

// Scripts are immutable once made, so one set serves every client in the process.
var (
	rlockAcquireScript       = newScript(guarded(source("rlock_acquire.lua")))
	rlockUnlockScript        = newScript(releasing(source("rlock_unlock.lua")))
	rlockForceUnlockScript   = newScript(guarded(source("rlock_force_unlock.lua")))
	rlockStateScript         = newScript(guarded(source("rlock_state.lua")))
	rlockRenewScript         = newScript(source("rlock_renew.lua"))
	fairAcquireScript        = newScript(guarded(source("fair_acquire.lua")))
	fairReleaseScript        = newScript(guarded(releasing(source("fair_release.lua"))))
	rwlockReadAcquireScript  = newScript(guarded(source("rwlock_read_acquire.lua")))
	rwlockWriteAcquireScript = newScript(guarded(source("rwlock_write_acquire.lua")))
	rwlockUnlockScript       = newScript(releasing(source("rwlock_unlock.lua")))
	rwlockRenewScript        = newScript(source("rwlock_renew.lua"))
)

// RLockAcquire acquires or re-enters a reentrant lock (rlock_acquire.lua).
func RLockAcquire() *Script { return rlockAcquireScript }

// RLockUnlock releases one hold of a reentrant lock, compared with the count the client
// expects (rlock_unlock.lua).
func RLockUnlock() *Script { return rlockUnlockScript }

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
