// Package keys derives the Redis keys and channels of a lock from its name, in Redisson's
// naming, so that relock and Redisson address the same data. It is the one owner of names:
// every key and channel relock touches is made here, and Check refuses the names whose
// keys would not be theirs alone.
//
// Every auxiliary key and channel carries the name in a hash tag, so it lives in the same
// cluster slot as the lock key itself and no script ever crosses slots.
package keys

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/relock-go/relock/internal/lockerr"
)

// The prefixes of auxiliary keys and channels: "<prefix>:{<name>}", as Redisson names them.
// A lock name that starts with one of them followed by ':' would be another lock's key or
// channel, so Check refuses it.
const (
	lockChannel   = "redisson_lock__channel" // rlock's wake-up channel; a fair waiter's channel is this, ':', its owner
	unlockLatch   = "redisson_unlock_latch"  // Redisson's unlock latch, followed by ':' and a request id
	token         = "redisson_lock_token"    // the fencing counter
	queue         = "redisson_lock_queue"    // a fair lock's queue
	deadlines     = "redisson_lock_timeout"  // a fair lock's waiters' deadlines
	rwChannel     = "redisson_rwlock"        // a read-write lock's wake-up channel
	writers       = "relock_rwlock_writers"  // a read-write lock's waiting writers
	waking        = "relock_wake"            // a lock's wake registry: clients with waiters on its shared channel
	readers       = "relock_wake_readers"    // a read-write lock's clients with readers waiting
	semChannel    = "redisson_sc"            // a semaphore's channel: a release publishes the permits available
	semQueue      = "relock_semaphore_queue" // a semaphore's queue of waiting clients
	semDeadlines  = "relock_semaphore_timeout"
	latchChannel  = "redisson_countdownlatch__channel__" // followed by "{<name>}", without ':'
	readTimeout   = ":rwlock_timeout:"                   // within a read hold's timeout key, after the owner
	readTimeoutOf = "rwlock_timeout"
	leaseSuffix   = ":timeout" // a semaphore's leased permits: "{<name>}:timeout", as Redisson's suffixName makes it
	writeSuffix   = ":write"   // a read-write lock's writer field is its owner followed by this
)

// reserved lists the prefixes a lock name must not start with (each followed by ':').
var reserved = [...]struct{ prefix, what string }{
	{lockChannel, "a lock's wake-up channel"},
	{unlockLatch, "a lock's unlock latch (Redisson's)"},
	{token, "a lock's fencing counter"},
	{queue, "a fair lock's queue"},
	{deadlines, "a fair lock's waiter deadlines"},
	{rwChannel, "a read-write lock's wake-up channel"},
	{writers, "a read-write lock's waiting writers"},
	{waking, "a lock's wake registry"},
	{readers, "a read-write lock's registry of waiting readers"},
	{semChannel, "a semaphore's channel"},
	{semQueue, "a semaphore's queue of waiting clients"},
	{semDeadlines, "a semaphore's waiting clients' deadlines"},
}

// Check returns nil when name can be a lock name, and otherwise an error that says why,
// for which errors.Is(err, lockerr.ErrInvalidName) holds. A name is refused when:
//   - it is empty;
//   - its auxiliary keys would not land in the lock key's cluster slot. A name with "{"
//     must hold a non-empty hash tag "{...}": Redisson leaves such names as they are and
//     lets their own tag pick the slot, which only works if Redis sees a tag there ("a{}b"
//     and "a{b" have none). A name without "{" must not hold "}": wrapped as "{<name>}",
//     the first "}" would end the tag early ("a}b" gives the tag "a");
//   - its keys would be another name's. "{M}" (M without braces) is only a hash tag, and
//     Redisson names its keys exactly as those of "M". A name that starts with a reserved
//     prefix and ':' is another lock's key or channel; one with ":rwlock_timeout:" is a
//     read hold's timeout key; a name with a hash tag that ends in ":<uuid>:<n>" is
//     the channel of a fair lock's waiter once prefixed; and one with a hash tag that ends
//     in ":timeout" is a semaphore's zset of leased permits.
func Check(name string) error {
	if name == "" {
		return invalid("empty name")
	}
	open := strings.IndexByte(name, '{')
	if open < 0 {
		if i := strings.IndexByte(name, '}'); i >= 0 {
			return invalid(fmt.Sprintf("'}' at %d without a '{' before it: wrapped in a hash tag as %q, it would end the tag early and put the lock's keys in other cluster slots", i, "{"+name+"}"))
		}
	} else {
		end := strings.IndexByte(name[open+1:], '}')
		switch {
		case end < 0:
			return invalid(fmt.Sprintf("unbalanced brace: '{' at %d has no '}' after it, so the name has no hash tag and its keys would land in other cluster slots", open))
		case end == 0:
			return invalid(fmt.Sprintf("empty hash tag '{}' at %d: Redis would hash the whole key, so the lock's keys would land in other cluster slots", open))
		}
		if inner := name[1 : len(name)-1]; open == 0 && name[len(name)-1] == '}' && !strings.ContainsAny(inner, "{}") {
			return invalid(fmt.Sprintf("the name is only the hash tag {%s}, and its keys would be those of the lock %q; name it %q or %q", inner, inner, inner, name+":lock"))
		}
	}
	for _, r := range reserved {
		if strings.HasPrefix(name, r.prefix+":") {
			return invalid(fmt.Sprintf("it starts with %q, which names %s", r.prefix+":", r.what))
		}
	}
	if i := strings.Index(name, readTimeout); i >= 0 {
		return invalid(fmt.Sprintf("it holds %q (at %d), which names a read-write lock's read hold", readTimeout, i))
	}
	if open >= 0 && strings.HasSuffix(name, leaseSuffix) && len(name) > len(leaseSuffix) {
		of := name[:len(name)-len(leaseSuffix)]
		if len(of) > 2 && of[0] == '{' && of[len(of)-1] == '}' && !strings.ContainsAny(of[1:len(of)-1], "{}") {
			of = of[1 : len(of)-1]
		}
		return invalid(fmt.Sprintf("it ends in %q after a hash tag: it names the leased permits of the semaphore %q", leaseSuffix, of))
	}
	if open >= 0 {
		if i := ownerSuffix(name); i >= 0 {
			fair := name[:i]
			if len(fair) < 2 {
				// unreachable: the name's tag lies before its owner id
			} else if m := fair[1 : len(fair)-1]; fair[0] == '{' && fair[len(fair)-1] == '}' && !strings.ContainsAny(m, "{}") {
				fair = m
			}
			return invalid(fmt.Sprintf("it ends in an owner id %q: prefixed with %q it names the channel of a waiter of the fair lock %q", name[i+1:], lockChannel+":", fair))
		}
	}
	return nil
}

func invalid(reason string) error {
	return fmt.Errorf("%w: %s", lockerr.ErrInvalidName, reason)
}

// ownerSuffix returns where ":<uuid>:<n>" starts at the end of s, or -1.
func ownerSuffix(s string) int {
	const uuidLen = 36
	c := strings.LastIndexByte(s, ':')
	start := c - uuidLen
	if start < 1 || s[start-1] != ':' || !IsOwner(s[start:]) {
		return -1
	}
	return start - 1
}

// IsOwner reports whether s is an owner "<uuid>:<n>": a client's UUID and a whole number,
// negative too, which relock counts per client and Redisson takes from a thread id, any
// Java long. The lock scripts check the same shape (lua/shape.lua).
func IsOwner(s string) bool {
	id, n, ok := strings.Cut(s, ":")
	if !ok || !IsUUID(id) {
		return false
	}
	n = strings.TrimPrefix(n, "-")
	if n == "" {
		return false
	}
	for i := 0; i < len(n); i++ {
		if n[i] < '0' || n[i] > '9' {
			return false
		}
	}
	return true
}

// IsUUID reports whether s is a UUID in its text form "8-4-4-4-12" hex digits: the id of a
// relock or Redisson client, the first part of every owner.
func IsUUID(s string) bool {
	if len(s) != 36 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch i {
		case 8, 13, 18, 23:
			if c != '-' {
				return false
			}
		default:
			if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F') {
				return false
			}
		}
	}
	return true
}

// prefixed returns "<prefix>:{<name>}", or "<prefix>:<name>" when name has its own tag.
func prefixed(prefix, name string) string {
	if strings.IndexByte(name, '{') >= 0 {
		return prefix + ":" + name
	}
	return prefix + ":{" + name + "}"
}

// tagged returns the name as its own hash tag: "{<name>}", or the name itself when it has
// a tag already. It prefixes a read-write lock's read-hold timeout keys.
func tagged(name string) string {
	if strings.IndexByte(name, '{') >= 0 {
		return name
	}
	return "{" + name + "}"
}

// Names is the layout of one lock name: every key and channel that a lock of any kind
// with that name uses. Only the keys of the lock's kind exist in Redis.
type Names struct {
	Lock    string // the lock itself: the bare name
	Channel string // a plain lock's wake-up channel, redisson_lock__channel:{<name>}
	Token   string // the fencing counter, redisson_lock_token:{<name>}

	Queue       string // a fair lock's queue of waiting owners, redisson_lock_queue:{<name>}
	Deadlines   string // a fair lock's zset of its waiters' deadlines, redisson_lock_timeout:{<name>}
	FairChannel string // a fair waiter's channel without its owner, redisson_lock__channel:{<name>}:

	RWChannel string // a read-write lock's wake-up channel, redisson_rwlock:{<name>}
	Writers   string // a read-write lock's zset of waiting writers, relock_rwlock_writers:{<name>}
	Readers   string // a read-write lock's clients with readers waiting, relock_wake_readers:{<name>}

	// Wake is the wake registry of a plain lock or a read-write lock's writers: the relock
	// clients with waiters on the lock's shared channel, relock_wake:{<name>}. An unlock
	// wakes one of them (see lua/wake.lua).
	Wake string
	Tag  string // the prefix of a read-write lock's read-hold timeout keys, {<name>}
}

// Of returns the names of the lock name. It does not check name: see Check.
func Of(name string) Names {
	ch := prefixed(lockChannel, name)
	return Names{
		Lock:        name,
		Channel:     ch,
		Token:       prefixed(token, name),
		Queue:       prefixed(queue, name),
		Deadlines:   prefixed(deadlines, name),
		FairChannel: ch + ":",
		RWChannel:   prefixed(rwChannel, name),
		Writers:     prefixed(writers, name),
		Readers:     prefixed(readers, name),
		Wake:        prefixed(waking, name),
		Tag:         tagged(name),
	}
}

// Semaphore is the layout of a semaphore named name: Redisson's RSemaphore, a string key
// of available permits whose releases publish the new count on its channel, and relock's
// queue of waiting clients beside it.
type Semaphore struct {
	Permits   string // the available permits: the bare name
	Channel   string // redisson_sc:{<name>}: a release publishes the permits available
	Queue     string // relock_semaphore_queue:{<name>}: waiting clients in arrival order
	Deadlines string // relock_semaphore_timeout:{<name>}: by when each must come back
	// Waiters is the prefix of a waiting client's own channel, the queue's name and ':';
	// the client's id follows. A client waits there until it is first in line.
	Waiters string
	// Leases is Redisson's RPermitExpirableSemaphore's zset of leased permits, {<name>}:timeout:
	// each permit id (16 bytes) scored by the Unix time in milliseconds when it runs out.
	Leases string
}

// SemaphoreOf returns the names of the semaphore name. It does not check name: see Check.
func SemaphoreOf(name string) Semaphore {
	q := prefixed(semQueue, name)
	return Semaphore{Permits: name, Channel: prefixed(semChannel, name), Queue: q, Deadlines: prefixed(semDeadlines, name), Waiters: q + ":",
		Leases: tagged(name) + leaseSuffix}
}

// Latch is the layout of a count-down latch named name: Redisson's RCountDownLatch, a
// string key with the count, and its channel.
type Latch struct {
	Count   string // the count: the bare name
	Channel string // redisson_countdownlatch__channel__{<name>}: "0" when the count reaches zero
}

// LatchOf returns the names of the latch name. It does not check name: see CheckLatch.
func LatchOf(name string) Latch {
	return Latch{Count: name, Channel: latchChannel + "{" + name + "}"}
}

// CheckLatch is Check for a count-down latch, which refuses names with braces as well:
// Redisson wraps the whole name in braces to name a latch's channel, so a name with a
// hash tag of its own would put its channel in another cluster slot than its count.
func CheckLatch(name string) error {
	if err := Check(name); err != nil {
		return err
	}
	if i := strings.IndexAny(name, "{}"); i >= 0 {
		return invalid(fmt.Sprintf("a brace at %d: a count-down latch's channel wraps the whole name in a hash tag, as Redisson names it, so a name with braces would put the channel in another cluster slot than the count", i))
	}
	return nil
}

// Waiter is the private channel of a fair lock's waiter: redisson_lock__channel:{<name>}:<owner>.
func (n Names) Waiter(owner string) string { return n.FairChannel + owner }

// Presence is the channel that a client with the wake code code subscribes to while it has
// waiters on the lock, relock_wake:{<name>}:<code>: an unlock picks a registered client
// only while somebody listens there (see lua/wake.lua).
func (n Names) Presence(code string) string { return n.Wake + ":" + code }

// ReadTimeouts is the prefix of owner's read holds' timeout keys of a read-write lock,
// "{<name>}:<owner>:rwlock_timeout": hold k's key is this, ':', k.
func (n Names) ReadTimeouts(owner string) string {
	return n.Tag + ":" + owner + ":" + readTimeoutOf
}

// ReadTimeout is the timeout key of owner's read hold k.
func (n Names) ReadTimeout(owner string, k int64) string {
	return n.ReadTimeouts(owner) + ":" + strconv.FormatInt(k, 10)
}

// WriteField is the hash field that counts owner's write holds of a read-write lock; its
// read holds are counted under owner itself.
func WriteField(owner string) string { return owner + writeSuffix }

// IsWriteField reports whether field counts write holds, and whose.
func IsWriteField(field string) (owner string, ok bool) {
	return strings.CutSuffix(field, writeSuffix)
}

// Slot returns the Redis Cluster slot of key: CRC16 (XMODEM) of its hash tag, or of the
// whole key when it has none, modulo 16384.
func Slot(key string) uint16 {
	if i := strings.IndexByte(key, '{'); i >= 0 {
		if j := strings.IndexByte(key[i+1:], '}'); j > 0 {
			key = key[i+1 : i+1+j]
		}
	}
	var crc uint16
	for i := 0; i < len(key); i++ {
		crc ^= uint16(key[i]) << 8
		for b := 0; b < 8; b++ {
			if crc&0x8000 != 0 {
				crc = crc<<1 ^ 0x1021
			} else {
				crc <<= 1
			}
		}
	}
	return crc % 16384
}
