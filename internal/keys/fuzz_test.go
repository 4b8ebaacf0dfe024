package keys

import (
	"errors"
	"strings"
	"testing"

	"github.com/relock-go/relock/internal/lockerr"
)

// hashed returns the part of key that Redis Cluster hashes, found independently of
// Slot: the content of the first "{...}" when it is non-empty, else the whole key.
func hashed(key string) string {
	open := strings.Index(key, "{")
	if open < 0 {
		return key
	}
	rest := key[open+1:]
	end := strings.Index(rest, "}")
	if end <= 0 {
		return key
	}
	return rest[:end]
}

// crc16 is CRC-16/XMODEM computed with a table, to check Slot's bitwise loop.
var crcTable = func() (t [256]uint16) {
	for i := range t {
		crc := uint16(i) << 8
		for range 8 {
			if crc&0x8000 != 0 {
				crc = crc<<1 ^ 0x1021
			} else {
				crc <<= 1
			}
		}
		t[i] = crc
	}
	return t
}()

func crc16(s string) uint16 {
	var crc uint16
	for i := 0; i < len(s); i++ {
		crc = crc<<8 ^ crcTable[byte(crc>>8)^s[i]]
	}
	return crc
}

// Owners and request ids have the shape "<uuid>:<n>", as relock's and Redisson's do.
var fuzzOwners = []string{"5df8512c-e096-4359-bc82-07efb0bc9d8e:7", "0c9b8a7d-6e5f-4a3b-9c2d-1e0f9a8b7c6d:1"}

// derived returns every key and channel a lock named name has, of every kind, for the
// owners and request ids of fuzzOwners: the lock key; rlock's channel; Redisson's unlock
// latches;
// the fencing counter; the fair lock's queue, deadlines and waiters' channels; the
// read-write lock's channel, waiting writers and read holds' timeout keys; the semaphore's
// channel, queue, deadlines, waiting clients' channels and leased permits.
func derived(name string) []string {
	n := Of(name)
	sem := SemaphoreOf(name)
	ks := []string{n.Lock, n.Channel, n.Token, n.Queue, n.Deadlines, n.RWChannel, n.Writers,
		sem.Channel, sem.Queue, sem.Deadlines, sem.Leases}
	for _, o := range fuzzOwners {
		ks = append(ks, latch(name)+o, n.Waiter(o), sem.Waiters+o,
			n.ReadTimeout(o, 1), n.ReadTimeout(o, 12), n.ReadTimeout(WriteField(o), 1))
	}
	return ks
}

// rivals returns names built from a that a careless layout lets share a's keys: its keys
// and channels taken as names, its hash tag alone and wrapped, a itself wrapped, its
// prefixes up to a ':', and those with b or an owner appended. The fuzzer finds few of
// them by chance.
func rivals(a, b string) []string {
	tag := Of(a).Tag
	rs := []string{b, "{" + a + "}", hashed(a), "{" + hashed(a) + "}", tag + b, tag + ":" + b, a + ":" + b}
	for _, k := range derived(a) {
		rs = append(rs, k, k+":"+b)
		if i := strings.LastIndexByte(k, ':'); i > 0 {
			rs = append(rs, k[:i])
		}
	}
	for _, o := range fuzzOwners {
		rs = append(rs, tag+":"+o, a+":"+o, tag+":"+o+":rwlock_timeout:1")
	}
	if i := strings.LastIndexByte(a, ':'); i > 0 {
		rs = append(rs, a[:i])
	}
	if inner, ok := strings.CutPrefix(a, "{"); ok {
		rs = append(rs, strings.TrimSuffix(inner, "}"))
	}
	return rs
}

// FuzzNames checks, for any name:
//   - a valid name's derived keys and channels all land in the lock key's slot, hashing
//     the same part of it;
//   - a name Check refuses is refused with ErrInvalidName and a reason; among the names
//     refused for their slots, each is empty or really would split the slots;
//   - no two different valid names share a key or a channel, of any kind: a against b and
//     against every rival name built from a.
func FuzzNames(f *testing.F) {
	for _, s := range []string{"", "orders:42", "user{7}:cart", "a{}b", "a{b", "a}b", "{", "}", "{}", "}{a}", "{a}}", "a{b}{c}", "\x00{\xff}", "x", "{x}"} {
		f.Add(s, "x")
	}
	f.Add("x", "{x}")
	f.Add("x{y}", "x{y}:"+fuzzOwners[0])
	f.Add("jobs", "redisson_lock_queue:{jobs}")
	f.Add("jobs", "{jobs}:timeout")
	f.Add("a{b}", "a{b}:timeout")
	f.Fuzz(func(t *testing.T, a, b string) {
		slot := Slot(a)
		if want := crc16(hashed(a)) % 16384; slot != want {
			t.Fatalf("Slot(%q) = %d; CRC16 of %q gives %d", a, slot, hashed(a), want)
		}
		err := Check(a)
		if err != nil {
			if !errors.Is(err, lockerr.ErrInvalidName) || len(err.Error()) <= len(lockerr.ErrInvalidName.Error())+2 {
				t.Fatalf("Check(%q) = %v; want ErrInvalidName with a reason", a, err)
			}
			if a == "" || !slotReason(err) {
				return
			}
			for _, k := range derived(a) {
				if hashed(k) != hashed(a) {
					return // this key would be hashed apart from the lock key
				}
			}
			t.Fatalf("Check(%q) = %v, but every derived key hashes %q as the lock key does", a, err, hashed(a))
		}
		for _, k := range derived(a) {
			if hashed(k) != hashed(a) || Slot(k) != slot {
				t.Fatalf("valid name %q: key %q hashes %q (slot %d), the lock key %q (slot %d)",
					a, k, hashed(k), Slot(k), hashed(a), slot)
			}
		}
		mine := map[string]bool{}
		for _, k := range derived(a) {
			mine[k] = true
		}
		for _, r := range rivals(a, b) {
			if r == a || Check(r) != nil {
				continue
			}
			for _, k := range derived(r) {
				if mine[k] {
					t.Fatalf("names %q and %q share the key or channel %q", a, r, k)
				}
			}
		}
	})
}

// slotReason reports whether Check refused a name because its keys would split the slots
// (as opposed to sharing another name's keys).
func slotReason(err error) bool {
	return strings.Contains(err.Error(), "cluster slots")
}

// The CRC16 of Redis Cluster's specification, and slots Redis reports.
func TestSlotVectors(t *testing.T) {
	if got := crc16("123456789"); got != 0x31C3 {
		t.Fatalf("crc16(123456789) = %#x; want 0x31c3", got)
	}
	for key, want := range map[string]uint16{"123456789": 0x31C3, "foo": 12182, "bar": 5061, "{foo}bar": 12182} {
		if got := Slot(key); got != want {
			t.Errorf("Slot(%q) = %d; want %d", key, got, want)
		}
	}
}
