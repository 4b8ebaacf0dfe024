// Package lua holds relock's Lua scripts. Each script is a .lua file in this folder,
// embedded at build time and wrapped once as a *rueidis.Lua, which sends EVALSHA and falls
// back to EVAL when the server has not seen the script (after a restart or SCRIPT FLUSH).
//
// Every script touches only keys of one lock, or (the renewal batch) of locks in one
// cluster slot. The comment at the top of each file is its contract: keys, arguments and
// replies.
package lua

import (
	"crypto/sha1"
	_ "embed"
	"encoding/hex"

	"github.com/redis/rueidis"
)

// Script is one Lua script: Exec sends it (through the embedded *rueidis.Lua); Source and
// SHA1 let a caller build its own EVALSHA and EVAL commands for a pipelined batch.
type Script struct {
	*rueidis.Lua
	Source string
	SHA1   string
}

// guarded prepends shape.lua, the lock-shape guard, to a script that uses it.
func guarded(src string) string { return shape + src }

func newScript(src string) *Script {
	sum := sha1.Sum([]byte(src))
	return &Script{Lua: rueidis.NewLuaScript(src), Source: src, SHA1: hex.EncodeToString(sum[:])}
}

var (
	//go:embed shape.lua
	shape string
	//go:embed rlock_acquire.lua
	rlockAcquire string
	//go:embed rlock_unlock.lua
	rlockUnlock string
	//go:embed rlock_force_unlock.lua
	rlockForceUnlock string
	//go:embed rlock_state.lua
	rlockState string
	//go:embed rlock_renew.lua
	rlockRenew string
	//go:embed fair_acquire.lua
	fairAcquire string
	//go:embed fair_release.lua
	fairRelease string
	//go:embed rwlock_read_acquire.lua
	rwlockReadAcquire string
	//go:embed rwlock_write_acquire.lua
	rwlockWriteAcquire string
	//go:embed rwlock_unlock.lua
	rwlockUnlock string
	//go:embed rwlock_renew.lua
	rwlockRenew string
)

// Scripts are immutable once made, so one set serves every client in the process.
var (
	rlockAcquireScript       = newScript(guarded(rlockAcquire))
	rlockUnlockScript        = newScript(rlockUnlock)
	rlockForceUnlockScript   = newScript(guarded(rlockForceUnlock))
	rlockStateScript         = newScript(guarded(rlockState))
	rlockRenewScript         = newScript(rlockRenew)
	fairAcquireScript        = newScript(guarded(fairAcquire))
	fairReleaseScript        = newScript(guarded(fairRelease))
	rwlockReadAcquireScript  = newScript(guarded(rwlockReadAcquire))
	rwlockWriteAcquireScript = newScript(guarded(rwlockWriteAcquire))
	rwlockUnlockScript       = newScript(rwlockUnlock)
	rwlockRenewScript        = newScript(rwlockRenew)
)

// RLockAcquire acquires or re-enters a reentrant lock (rlock_acquire.lua).
func RLockAcquire() *Script { return rlockAcquireScript }

// RLockUnlock releases one hold of a reentrant lock, once per request id (rlock_unlock.lua).
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

// RWLockUnlock releases one read or write hold, once per request id (rwlock_unlock.lua).
func RWLockUnlock() *Script { return rwlockUnlockScript }

// RWLockRenew renews many read-write locks' holds in one call (rwlock_renew.lua).
func RWLockRenew() *Script { return rwlockRenewScript }
