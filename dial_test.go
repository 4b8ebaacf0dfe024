package relock_test

import (
	"context"
	"net"
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

// A well-formed URL whose server cannot be reached is refused with an error that names
// the address but never shows the URL's user or password. Guards against the connection
// error quoting the URL as given.
func TestDialUnreachableHidesUserInfo(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // nothing listens there now: the connection is refused
	c, err := relock.Dial("redis://alice:s3cret-pw@" + addr + "/0")
	if err == nil {
		c.Close()
		t.Fatalf("Dial of %s, where nothing listens: no error", addr)
	}
	if msg := err.Error(); strings.Contains(msg, "s3cret-pw") || strings.Contains(msg, "alice") || !strings.Contains(msg, addr) {
		t.Fatalf("Dial: %v; want an error that names %s and hides the user and password", err, addr)
	}
}
