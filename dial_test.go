package relock_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/relock-go/relock"
	"github.com/relock-go/relock/internal/redistest"
)

// Dial makes a working client from a Redis URL alone, and shares locks with a client made
// the usual way on the same Redis.
func TestDial(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		c, err := relock.Dial("redis://" + b.Addr + "/0")
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		other, err := relock.New(b.Client(t))
		if err != nil {
			t.Fatal(err)
		}
		defer other.Close()
		held, err := c.Lock("dial").Lock(redistest.Context(t, 30*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := other.Lock("dial").TryLock(context.Background()); err == nil {
			t.Fatal("a client made with New got the lock a Dial client holds")
		}
		if err := c.Lock("dial").Unlock(held); err != nil {
			t.Fatal(err)
		}
		if err := c.Close(); err != nil {
			t.Fatal(err)
		}
		if _, err := c.Lock("dial").TryLock(context.Background()); err == nil {
			t.Error("a closed Dial client still locks")
		}
	})
}

// A malformed URL is refused with an error that never shows its password.
func TestDialMalformedURLHidesPassword(t *testing.T) {
	_, err := relock.Dial("redis://alice:s3cret-pw@127.0.0.1:notaport/0")
	if err == nil || strings.Contains(err.Error(), "s3cret-pw") || !strings.Contains(err.Error(), "xxxxx") {
		t.Fatalf("Dial: %v; want an error with the password hidden", err)
	}
}
