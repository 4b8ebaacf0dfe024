// Package lua holds relock's Lua scripts, the whole protocol on the Redis side, as .lua
// files. The comment at the top of each file is its contract: keys, arguments and replies.
// Redisson's clients run the same data through their own scripts, so a Go service and a
// Java service share locks; these files say exactly what relock does to that data.
//
// whole.lua, shape.lua, expect.lua, wake.lua, count.lua and permit.lua are not scripts of
// their own but preludes: package script puts in front of each script the preludes'
// functions that it calls and values that it names, and no others (a script defines its
// functions anew at every call). whole.lua holds 2^53-1, the largest whole number a
// script keeps exactly, which caps every expiry a script computes from data it did not
// write. shape.lua
// is the lock-shape guard of every script that reads a lock's hash before touching it,
// expect.lua the compare of a hold count of every unlock script, wake.lua the wake
// registry of the scripts that make waiters wait and wake them, count.lua the guard of the
// semaphore's and the count-down latch's key, a string holding a whole number, and
// permit.lua what the semaphore's scripts need of leased permits: their ids, Redis's
// clock, and putting back the expired.
//
// Two habits keep the server's work per call down, as a lock and unlock cycle costs the
// server several times what SET NX and a compare-and-delete do. An acquire script replies
// {1, hold count, third} when the owner got the lock, and may reply the hold count alone,
// an integer, where the third value is 0: an array reply costs the server a table and its
// conversion, on the commonest acquisition. And on the paths every lock cycle takes, a
// number a script passes to a command is written as text ('1'), since the server formats a
// Lua number with snprintf at every call.
//
// One rule keeps other data safe: Redis does not roll back a script that fails half-way,
// so a script reads every key that could fail it (a key of another type: WRONGTYPE) before
// its first write, the auxiliary keys (registries, queue, deadlines, waiting writers,
// fencing counter) as well as the lock's own. A refused call then changes nothing.
package lua

import "embed"

// FS holds the scripts, one .lua file each, as relock runs them.
//
//go:embed *.lua
var FS embed.FS
