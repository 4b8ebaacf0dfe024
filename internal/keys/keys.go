// Package keys derives the Redis keys and channels of a lock from its name, in Redisson's
// naming, so that relock and Redisson address the same data.
//
// Every auxiliary key and channel carries the name in a hash tag, so it lives in the same
// cluster slot as the lock key itself and no script ever crosses slots.
package keys

import "strings"

// Valid reports whether name can be a lock name: its auxiliary keys and channels must
// land in the lock key's cluster slot. It must be non-empty, and then:
//   - a name with "{" must hold a non-empty hash tag "{...}": Redisson leaves such names
//     as they are and lets their own tag pick the slot, which only works if Redis sees a
//     tag there ("a{}b" and "a{b" have none);
//   - a name without "{" must not hold "}": wrapped as "{<name>}", the first "}" would
//     end the tag early ("a}b" gives the tag "a").
func Valid(name string) bool {
	if name == "" {
		return false
	}
	i := strings.IndexByte(name, '{')
	if i < 0 {
		return strings.IndexByte(name, '}') < 0
	}
	return strings.IndexByte(name[i+1:], '}') > 0
}

// Prefixed returns "<prefix>:{<name>}", or "<prefix>:<name>" when name has its own tag.
func Prefixed(prefix, name string) string {
	if strings.IndexByte(name, '{') >= 0 {
		return prefix + ":" + name
	}
	return prefix + ":{" + name + "}"
}

// Suffixed returns "{<name>}:<suffix>", or "<name>:<suffix>" when name has its own tag.
func Suffixed(name, suffix string) string {
	if strings.IndexByte(name, '{') >= 0 {
		return name + ":" + suffix
	}
	return "{" + name + "}:" + suffix
}

// Tagged returns the name as its own hash tag: "{<name>}", or the name itself when it has
// a tag already. It prefixes a read-write lock's read-hold timeout keys.
func Tagged(name string) string {
	if strings.IndexByte(name, '{') >= 0 {
		return name
	}
	return "{" + name + "}"
}

// LockChannel is the channel an rlock's unlock publishes on.
func LockChannel(name string) string { return Prefixed("redisson_lock__channel", name) }

// UnlockLatchPrefix is the unlock latch key without its request id:
// "redisson_unlock_latch:{<name>}:" followed by the id.
func UnlockLatchPrefix(name string) string { return Prefixed("redisson_unlock_latch", name) + ":" }

// TokenKey is the fencing counter of a lock.
func TokenKey(name string) string { return Prefixed("redisson_lock_token", name) }

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
