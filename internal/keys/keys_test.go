package keys

import (
	"errors"
	"strings"
	"testing"

	"github.com/relock-go/relock/internal/lockerr"
)

// latch is the prefix of the unlock latches Redisson's clients write for a lock named name
// (relock writes none): a name must not collide with them either.
func latch(name string) string { return prefixed(unlockLatch, name) + ":" }

func TestNames(t *testing.T) {
	cases := []struct {
		name, channel, latch, token string
	}{
		{"orders:42", "redisson_lock__channel:{orders:42}", "redisson_unlock_latch:{orders:42}:", "redisson_lock_token:{orders:42}"},
		{"user{7}:cart", "redisson_lock__channel:user{7}:cart", "redisson_unlock_latch:user{7}:cart:", "redisson_lock_token:user{7}:cart"},
	}
	for _, c := range cases {
		n := Of(c.name)
		if n.Channel != c.channel || latch(c.name) != c.latch || n.Token != c.token {
			t.Errorf("Of(%q) = channel %q, latch %q, token %q; want %q, %q, %q", c.name, n.Channel, latch(c.name), n.Token, c.channel, c.latch, c.token)
		}
	}
	if got := Of("jobs").ReadTimeout("o:1", 2); got != "{jobs}:o:1:rwlock_timeout:2" {
		t.Errorf("ReadTimeout = %q", got)
	}
	if got := Of("a{b}").ReadTimeout("o:1", 2); got != "a{b}:o:1:rwlock_timeout:2" {
		t.Errorf("ReadTimeout with a tag = %q", got)
	}
	if got := Of("a{b}").Waiter("o:1"); got != "redisson_lock__channel:a{b}:o:1" {
		t.Errorf("Waiter with a tag = %q", got)
	}
}

// Every key derived from a valid name lives in the lock key's cluster slot, and every name
// refused for its slots really would split them.
func TestSameSlot(t *testing.T) {
	names := []string{"a", "orders:42", "{x}", "a{b}c", "a{b}{c}", "a}{b}", "x{y{z}}", "a{}b", "a{b", "{", "}", "{}", "", "ü{ß}"}
	for _, name := range names {
		n := Of(name)
		derived := []string{n.Channel, latch(name) + "req", n.Token, n.ReadTimeout("o:1", 1)}
		same := true
		for _, k := range derived {
			if Slot(k) != Slot(name) {
				same = false
			}
		}
		valid := Check(name) == nil
		if valid && !same {
			t.Errorf("valid name %q has derived keys in other slots: %v", name, derived)
		}
		if err := Check(name); !valid && name != "" && same && slotReason(err) {
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

// Check says why it refuses a name, and every refusal is ErrInvalidName. Guards against a
// bare "invalid lock name" that leaves the user guessing, and against refusing a name
// without a reason the user can act on.
func TestCheckReasons(t *testing.T) {
	const owner = "5df8512c-e096-4359-bc82-07efb0bc9d8e:7"
	cases := []struct{ name, reason string }{
		{"", "empty name"},
		{"bad{name", "unbalanced brace: '{' at 3 has no '}'"},
		{"a}b", "'}' at 1 without a '{'"},
		{"a{}b", "empty hash tag '{}' at 1"},
		{"{x}", `only the hash tag {x}, and its keys would be those of the lock "x"; name it "x" or "{x}:lock"`},
		{"{orders:42}", `would be those of the lock "orders:42"`},
		{"redisson_lock_queue:{jobs}", `starts with "redisson_lock_queue:", which names a fair lock's queue`},
		{"redisson_lock__channel:x", `"redisson_lock__channel:"`},
		{"redisson_unlock_latch:{x}:" + owner, `"redisson_unlock_latch:"`},
		{"redisson_lock_token:x", `"redisson_lock_token:"`},
		{"redisson_lock_timeout:x", `"redisson_lock_timeout:"`},
		{"redisson_rwlock:x", `"redisson_rwlock:"`},
		{"relock_rwlock_writers:x", `"relock_rwlock_writers:"`},
		{"{x}:" + owner + ":rwlock_timeout:1", `":rwlock_timeout:" (at 42)`},
		{"{x}:" + owner, `ends in an owner id "` + owner + `"`},
		{"jobs{7}:" + owner, `waiter of the fair lock "jobs{7}"`},
		// A Redisson owner's thread id is any Java long, its fair waiters' channels too.
		{"{x}:5df8512c-e096-4359-bc82-07efb0bc9d8e:-7", `ends in an owner id "5df8512c-e096-4359-bc82-07efb0bc9d8e:-7"`},
		// A UUID's hex digits in either case, as IsUUID reads them and lua/shape.lua's %x.
		{"{x}:5DF8512C-E096-4359-BC82-07EFB0BC9D8E:7", `ends in an owner id "5DF8512C-E096-4359-BC82-07EFB0BC9D8E:7"`},
		// The read holds' infix anywhere in the name, its start too.
		{":rwlock_timeout:1", `":rwlock_timeout:" (at 0)`},
	}
	for _, c := range cases {
		err := Check(c.name)
		if !errors.Is(err, lockerr.ErrInvalidName) {
			t.Errorf("Check(%q) = %v; want ErrInvalidName", c.name, err)
			continue
		}
		if !strings.Contains(err.Error(), c.reason) {
			t.Errorf("Check(%q) = %q; want it to say %q", c.name, err, c.reason)
		}
	}
	for _, name := range []string{"x", "orders:42", "{x}:lock", "a{b}c", "a}{b}", "{{x}}", "x:" + owner, "redisson_lock_queue", "my:redisson_lock_queue:x", "rwlock_timeout:1", "ü{ß}", "{x}:" + owner + "-", "{x}:" + owner[:36] + ":-", "{x}:" + owner[:36] + ":+7"} {
		if err := Check(name); err != nil {
			t.Errorf("Check(%q) = %v; want nil", name, err)
		}
	}
}

// No two different valid names share a key or a channel, of any kind: every name made of
// up to three pieces that a careless layout confuses (braces, colons, reserved prefixes,
// owner ids, the read holds' infix) is checked against all the others. Guards against
// "x" and "{x}" sharing a fair lock's queue, fencing counter, channels and read holds'
// timeout keys, and against a name that is another lock's key.
func TestNoSharedKeys(t *testing.T) {
	pieces := []string{"x", "y", "{", "}", ":", "{x}", fuzzOwners[0], ":" + fuzzOwners[0], "rwlock_timeout", ":rwlock_timeout:1", "1",
		"redisson_lock_queue", "redisson_lock__channel", "redisson_rwlock"}
	names := []string{""}
	for range 3 {
		for _, n := range names {
			for _, p := range pieces {
				names = append(names, n+p)
			}
		}
	}
	owner := map[string]string{} // key or channel → the name it came from
	valid := 0
	for _, n := range names {
		if Check(n) != nil {
			continue
		}
		valid++
		for _, k := range derived(n) {
			if other, ok := owner[k]; ok && other != n {
				t.Fatalf("names %q and %q share the key or channel %q", other, n, k)
			}
			owner[k] = n
		}
	}
	if valid < 100 {
		t.Fatalf("only %d valid names were compared", valid)
	}
}

// A semaphore's and a count-down latch's names are Redisson's (RedissonSemaphore,
// RedissonCountDownLatch): the channel "redisson_sc:{<name>}", or with the name's own tag
// "redisson_sc:<name>", and the latch's "redisson_countdownlatch__channel__{<name>}"; the
// semaphore's queue keys are relock's, in the name's slot. A latch's name with braces is
// refused, since Redisson's channel for it would leave the count's slot; the semaphore's
// queue prefixes are reserved. Guards against a channel that Redisson's clients do not
// listen on, and against queue keys in another slot.
func TestCountingNames(t *testing.T) {
	s := SemaphoreOf("builds")
	if s.Permits != "builds" || s.Channel != "redisson_sc:{builds}" || s.Queue != "relock_semaphore_queue:{builds}" ||
		s.Deadlines != "relock_semaphore_timeout:{builds}" || s.Waiters != "relock_semaphore_queue:{builds}:" {
		t.Errorf("SemaphoreOf(builds) = %+v", s)
	}
	if s := SemaphoreOf("ci{7}:builds"); s.Channel != "redisson_sc:ci{7}:builds" || s.Queue != "relock_semaphore_queue:ci{7}:builds" {
		t.Errorf("SemaphoreOf with a tag = %+v", s)
	}
	for _, name := range []string{"builds", "ci{7}:builds"} {
		s := SemaphoreOf(name)
		for _, k := range []string{s.Channel, s.Queue, s.Deadlines, s.Waiters + "5df8512c-e096-4359-bc82-07efb0bc9d8e"} {
			if Slot(k) != Slot(name) {
				t.Errorf("%q of semaphore %q is in slot %d, the permits in %d", k, name, Slot(k), Slot(name))
			}
		}
	}
	if l := LatchOf("ready"); l.Count != "ready" || l.Channel != "redisson_countdownlatch__channel__{ready}" {
		t.Errorf("LatchOf(ready) = %+v", l)
	}
	if err := CheckLatch("ready"); err != nil {
		t.Errorf("CheckLatch(ready) = %v", err)
	}
	// "{x}y" too, whose brace comes first: wrapped as Redisson does, its channel's tag is "{x".
	for _, name := range []string{"a{b}", "x{y}z", "{x}y", "", "relock_semaphore_queue:x"} {
		if err := CheckLatch(name); !errors.Is(err, lockerr.ErrInvalidName) {
			t.Errorf("CheckLatch(%q) = %v; want ErrInvalidName", name, err)
		}
	}
	for _, name := range []string{"relock_semaphore_queue:x", "relock_semaphore_timeout:{x}"} {
		if err := Check(name); !errors.Is(err, lockerr.ErrInvalidName) {
			t.Errorf("Check(%q) = %v; want ErrInvalidName", name, err)
		}
	}
}
