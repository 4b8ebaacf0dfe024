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
