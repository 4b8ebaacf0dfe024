package keys

import (
	"testing"
)

func TestNames(t *testing.T) {
	cases := []struct {
		name, channel, latch, token string
	}{
		{"orders:42", "redisson_lock__channel:{orders:42}", "redisson_unlock_latch:{orders:42}:", "redisson_lock_token:{orders:42}"},
		{"user{7}:cart", "redisson_lock__channel:user{7}:cart", "redisson_unlock_latch:user{7}:cart:", "redisson_lock_token:user{7}:cart"},
	}
	for _, c := range cases {
		if got := LockChannel(c.name); got != c.channel {
			t.Errorf("LockChannel(%q) = %q; want %q", c.name, got, c.channel)
		}
		if got := UnlockLatchPrefix(c.name); got != c.latch {
			t.Errorf("UnlockLatchPrefix(%q) = %q; want %q", c.name, got, c.latch)
		}
		if got := TokenKey(c.name); got != c.token {
			t.Errorf("TokenKey(%q) = %q; want %q", c.name, got, c.token)
		}
	}
	if got := Suffixed("jobs", "s"); got != "{jobs}:s" {
		t.Errorf("Suffixed = %q", got)
	}
	if got := Suffixed("a{b}", "s"); got != "a{b}:s" {
		t.Errorf("Suffixed with a tag = %q", got)
	}
}

// Every key derived from a valid name lives in the lock key's cluster slot, and every name
// for which that would not hold is invalid.
func TestSameSlot(t *testing.T) {
	names := []string{"a", "orders:42", "{x}", "a{b}c", "a{b}{c}", "a}{b}", "x{y{z}}", "a{}b", "a{b", "{", "}", "{}", "", "ü{ß}"}
	for _, name := range names {
		derived := []string{LockChannel(name), UnlockLatchPrefix(name) + "req", TokenKey(name), Suffixed(name, "s")}
		same := true
		for _, k := range derived {
			if Slot(k) != Slot(name) {
				same = false
			}
		}
		if Valid(name) && !same {
			t.Errorf("valid name %q has derived keys in other slots: %v", name, derived)
		}
		if !Valid(name) && name != "" && same {
			t.Errorf("name %q is refused although its keys share a slot", name)
		}
	}
}

func TestSlotKnownValues(t *testing.T) {
	// Values from the Redis Cluster specification and CLUSTER KEYSLOT.
	for key, want := range map[string]uint16{"123456789": 12739, "foo": 12182, "{user1000}.following": 3443} {
		if got := Slot(key); got != want {
			t.Errorf("Slot(%q) = %d; want %d", key, got, want)
		}
	}
}
