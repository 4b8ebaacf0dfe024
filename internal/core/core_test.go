package core

import (
	"strconv"
	"testing"
)

// A wake code is published on a lock's channel, which Redisson's clients read as a Java
// long: it must be a decimal number of at least 1000 (below are the lock messages) that
// fits in one, below 2^61 as NewWakeCode promises. A code of 64 random bits would be past
// a long's range half the time, and a Redisson client could not read the message.
func TestWakeCodesFitAJavaLong(t *testing.T) {
	for range 1000 {
		code := NewWakeCode()
		n, err := strconv.ParseInt(code, 10, 64)
		if err != nil || n < 1000 || n >= 1<<61 || strconv.FormatInt(n, 10) != code {
			t.Fatalf("wake code %q: %d, %v; want a decimal number in [1000, 2^61)", code, n, err)
		}
	}
}

// ParseConnName reads back what ConnName makes, and nothing else: relock inspect names the
// process behind an owner or a wake code from its connections' names, so a name without
// a client id or a wake code, or without relock's prefix, must not be taken for a relock
// client's. Guards against a parser that accepts "relock::<code>" or "relock:<id>:" and
// reports a client with an empty id or wake code.
func TestParseConnNameReadsOnlyConnNames(t *testing.T) {
	const id = "7f2c6a9e-3b1d-4c5e-9f0a-1b2c3d4e5f60"
	code := NewWakeCode()
	if gotID, gotCode, ok := ParseConnName(ConnName(id, code)); !ok || gotID != id || gotCode != code {
		t.Errorf("ParseConnName(ConnName(%q, %q)) = %q, %q, %v; want them back", id, code, gotID, gotCode, ok)
	}
	for _, name := range []string{"relock::" + code, "relock:" + id + ":", "relock::", "relock:" + id, "relock:", "", "other:" + id + ":" + code} {
		if gotID, gotCode, ok := ParseConnName(name); ok {
			t.Errorf("ParseConnName(%q) = %q, %q, true; want false: ConnName makes no such name", name, gotID, gotCode)
		}
	}
}
