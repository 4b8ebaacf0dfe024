package keys

import (
	"strings"
	"testing"
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

// FuzzNames checks, for any name, that a valid name's derived keys and channels all land
// in the lock key's slot, hashing the same part of it, and that a name Valid refuses is
// empty or really would split the slots: some derived key hashes another part.
func FuzzNames(f *testing.F) {
	for _, s := range []string{"", "orders:42", "user{7}:cart", "a{}b", "a{b", "a}b", "{", "}", "{}", "}{a}", "{a}}", "a{b}{c}", "\x00{\xff}"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, name string) {
		slot := Slot(name)
		if want := crc16(hashed(name)) % 16384; slot != want {
			t.Fatalf("Slot(%q) = %d; CRC16 of %q gives %d", name, slot, hashed(name), want)
		}
		derived := []string{
			LockChannel(name),
			UnlockLatchPrefix(name) + "x",
			TokenKey(name),
			Suffixed(name, "s"),
			Prefixed("p", name),
			Tagged(name),
		}
		if Valid(name) {
			for _, k := range derived {
				if hashed(k) != hashed(name) || Slot(k) != slot {
					t.Fatalf("valid name %q: key %q hashes %q (slot %d), the lock key %q (slot %d)",
						name, k, hashed(k), Slot(k), hashed(name), slot)
				}
			}
			return
		}
		if name == "" {
			return
		}
		for _, k := range derived {
			if hashed(k) != hashed(name) {
				return // this key would be hashed apart from the lock key
			}
		}
		t.Fatalf("Valid(%q) = false, but every derived key hashes %q as the lock key does", name, hashed(name))
	})
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
