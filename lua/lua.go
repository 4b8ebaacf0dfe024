// Package lua holds relock's Lua scripts. Each script is a .lua file in this folder,
// embedded at build time and wrapped once as a *rueidis.Lua, which sends EVALSHA and falls
// back to EVAL when the server has not seen the script (after a restart or SCRIPT FLUSH).
//
// Every script touches only keys of one lock, all in one cluster slot. The comment at the
// top of each file is its contract: keys, arguments and replies.
package lua

import (
	_ "embed"

	"github.com/redis/rueidis"
)

var (
	//go:embed rlock_acquire.lua
	rlockAcquire string
	//go:embed rlock_unlock.lua
	rlockUnlock string
	//go:embed rlock_force_unlock.lua
	rlockForceUnlock string
	//go:embed rlock_state.lua
	rlockState string
)

// Scripts are immutable once made, so one set serves every client in the process.
var (
	rlockAcquireScript     = rueidis.NewLuaScript(rlockAcquire)
	rlockUnlockScript      = rueidis.NewLuaScript(rlockUnlock)
	rlockForceUnlockScript = rueidis.NewLuaScript(rlockForceUnlock)
	rlockStateScript       = rueidis.NewLuaScript(rlockState)
)

// RLockAcquire acquires or re-enters a reentrant lock (rlock_acquire.lua).
func RLockAcquire() *rueidis.Lua { return rlockAcquireScript }

// RLockUnlock releases one hold of a reentrant lock, once per request id (rlock_unlock.lua).
func RLockUnlock() *rueidis.Lua { return rlockUnlockScript }

// RLockForceUnlock deletes a reentrant lock whoever holds it (rlock_force_unlock.lua).
func RLockForceUnlock() *rueidis.Lua { return rlockForceUnlockScript }

// RLockState reads a reentrant lock's state (rlock_state.lua).
func RLockState() *rueidis.Lua { return rlockStateScript }
