package main

import (
	"context"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/relock-go/relock"
	"github.com/relock-go/relock/internal/keys"
	"github.com/relock-go/relock/internal/redistest"
	"github.com/relock-go/relock/rwlock"
)

// waitingLine matches inspect's text line of a waiting client that it traced to c, parked
// with waiters of the kind ("waiters", "writers" or "readers").
func waitingLine(kind string, c *relock.Client, code, addr string) *regexp.Regexp {
	return regexp.MustCompile(`\n  parked ` + kind + ` of relock client ` + regexp.QuoteMeta(c.ID()) +
		` \(wake code ` + regexp.QuoteMeta(code) + `\); client ` + regexp.QuoteMeta(addr) + `, connected \d+s\n`)
}

// traced waits until c's one named connection is listed, and returns its address and the
// wake code its name carries, as the test reads them from CLIENT LIST by itself.
func traced(t *testing.T, b *redistest.Backend, c *relock.Client) (addr, code string) {
	t.Helper()
	redistest.Eventually(t, 20*time.Second, "a client's connection is not named after it", func() bool {
		return len(namedConns(t, b, c.ID())) == 1
	})
	return namedConns(t, b, c.ID())[0], wakeCodeOf(t, b, c.ID())
}

// findWaiting returns the entry of r's waiting clients with the wake code, or nil.
func findWaiting(r *Report, code string) *WaitingClient {
	for i := range r.WaitingClients {
		if r.WaitingClients[i].Code == code {
			return &r.WaitingClients[i]
		}
	}
	return nil
}

// Waiters of a plain lock and of a read-write lock leave nothing in the lock's keys but
// their client's wake code in the lock's wake registry: inspect shows each registered
// client, traced through the code in its connections' names to its client id, address and
// connection age, whichever node its connection is on; readers, registered apart, are
// marked as such. An entry whose client is gone (no connection carries its code; it stays
// until the registry expires) is shown as not connected.
func TestInspectShowsWaitingClients(t *testing.T) {
	redistest.RealWithCluster(t, func(t *testing.T, b *redistest.Backend) {
		everyNodeKnown(t, b)
		ctx := redistest.Context(t, 2*time.Minute)
		notConnected := "client not connected"
		if b.Cluster != nil {
			notConnected = "client not found"
		}

		// A plain lock: a waiter of another client is parked behind the holder.
		holder, waiter := tracedClient(t, b), tracedClient(t, b)
		held, err := holder.Lock("orders").Lock(ctx)
		if err != nil {
			t.Fatal(err)
		}
		waited := async(func() error {
			wctx, cancel := context.WithTimeout(ctx, time.Minute)
			defer cancel()
			h, err := waiter.Lock("orders").Lock(wctx)
			if err != nil {
				return err
			}
			return waiter.Lock("orders").Unlock(h)
		})
		addr, code := traced(t, b, waiter)
		var r *Report
		redistest.Eventually(t, 20*time.Second, "the waiter's client is not in the wake registry", func() bool {
			_, r = inspectBinary(t, b, "--json", "orders")
			return len(r.WaitingClients) > 0
		})
		want := WaitingClient{Code: code, ClientID: waiter.ID()}
		got := findWaiting(r, code)
		if len(r.WaitingClients) != 1 || got == nil || got.Readers || got.ClientID != want.ClientID ||
			got.Client == nil || got.Client.Addr != addr || got.Client.Connections != 1 || got.Client.AgeSeconds < 0 {
			t.Errorf("inspect --json orders: waiting clients %+v (%+v); want one, code %s, client %s at %s",
				r.WaitingClients, got, code, waiter.ID(), addr)
		}
		if r.Subscribers < 1 || r.ClientsUnknown != "" {
			t.Errorf("inspect --json orders: %d subscribers, clients unknown %q; want the waiter's client counted", r.Subscribers, r.ClientsUnknown)
		}
		out, _ := inspectBinary(t, b, "orders")
		if !waitingLine("waiters", waiter, code, addr).MatchString(out) ||
			!strings.Contains(out, "\n  waiting clients  ") || strings.Contains(out, "not connected") || strings.Contains(out, "not found") {
			t.Errorf("inspect orders does not show the waiting client %s (code %s) at %s:\n%s", waiter.ID(), code, addr, out)
		}
		if err := holder.Lock("orders").Unlock(held); err != nil {
			t.Fatal(err)
		}
		await(t, "the plain lock's waiter", waited)

		// A read-write lock under writer preference: a writer of one client waits for the
		// holder's read hold, and a reader of another waits behind that writer.
		pref := rwlock.WithWriterPreference()
		rholder, writer, reader := tracedClient(t, b), tracedClient(t, b), tracedClient(t, b)
		rheld, err := rholder.RWLock("ledger").RLock(ctx, pref)
		if err != nil {
			t.Fatal(err)
		}
		wrote := async(func() error {
			wctx, cancel := context.WithTimeout(ctx, time.Minute)
			defer cancel()
			h, err := writer.RWLock("ledger").Lock(wctx, pref)
			if err != nil {
				return err
			}
			return writer.RWLock("ledger").Unlock(h)
		})
		redistest.Eventually(t, 20*time.Second, "the writer is not waiting", func() bool {
			_, r = inspectBinary(t, b, "--json", "ledger")
			return len(r.Writers) == 1
		})
		read := async(func() error {
			rctx, cancel := context.WithTimeout(ctx, time.Minute)
			defer cancel()
			h, err := reader.RWLock("ledger").RLock(rctx, pref)
			if err != nil {
				return err
			}
			return reader.RWLock("ledger").RUnlock(h)
		})
		waddr, wcode := traced(t, b, writer)
		raddr, rcode := traced(t, b, reader)
		redistest.Eventually(t, 20*time.Second, "the writer's and the reader's clients are not both registered", func() bool {
			_, r = inspectBinary(t, b, "--json", "ledger")
			return findWaiting(r, wcode) != nil && findWaiting(r, rcode) != nil
		})
		w, rd := findWaiting(r, wcode), findWaiting(r, rcode)
		if len(r.WaitingClients) != 2 || w.Readers || w.ClientID != writer.ID() || w.Client == nil || w.Client.Addr != waddr {
			t.Errorf("inspect --json ledger: waiting clients %+v; want the writer's client %s (code %s) at %s, not readers",
				r.WaitingClients, writer.ID(), wcode, waddr)
		}
		if !rd.Readers || rd.ClientID != reader.ID() || rd.Client == nil || rd.Client.Addr != raddr {
			t.Errorf("inspect --json ledger: waiting clients %+v; want the reader's client %s (code %s) at %s, readers",
				r.WaitingClients, reader.ID(), rcode, raddr)
		}
		out, _ = inspectBinary(t, b, "ledger")
		if !waitingLine("writers", writer, wcode, waddr).MatchString(out) || !waitingLine("readers", reader, rcode, raddr).MatchString(out) {
			t.Errorf("inspect ledger does not show the writer's client at %s and the reader's at %s:\n%s", waddr, raddr, out)
		}
		if err := rholder.RWLock("ledger").RUnlock(rheld); err != nil {
			t.Fatal(err)
		}
		await(t, "the rwlock's writer", wrote)
		await(t, "the rwlock's reader", read)

		// The entry that a client which died while it waited leaves behind: a code that no
		// connection carries, until the registry expires.
		stale := tracedClient(t, b)
		holdLock(t, stale, "stale")
		gone := "1152921504606846975"
		rc := b.Client(t)
		redistest.MustDo(t, rc, "ZADD", keys.Of("stale").Wake, "1", gone)
		redistest.MustDo(t, rc, "PEXPIRE", keys.Of("stale").Wake, "60000")
		_, r = inspectBinary(t, b, "--json", "stale")
		if len(r.WaitingClients) != 1 || r.WaitingClients[0] != (WaitingClient{Code: gone}) || r.ClientsUnknown != "" {
			t.Errorf("inspect --json stale: waiting clients %+v (clients unknown %q); want the code %s alone, with no client",
				r.WaitingClients, r.ClientsUnknown, gone)
		}
		out, _ = inspectBinary(t, b, "stale")
		if !strings.Contains(out, "\n  parked waiters of wake code "+gone+"; "+notConnected+"\n") ||
			!strings.Contains(out, "named relock:<client id>:<wake code>;") {
			t.Errorf("inspect stale does not show the gone client's entry as %s:\n%s", notConnected, out)
		}
	})
}

// A lock whose key is gone while a waiter is parked on it (deleted behind its holder's
// back, or its lease run out: neither sends a message) is free, but its waiter still
// sleeps until the lease it last saw runs out: inspect says so and shows the waiting
// client and the channel's subscribers, as for a held lock. Guards against a plain
// "free: no such key" that hid the waiter from the operator.
func TestInspectShowsWaitersOfAFreeLock(t *testing.T) {
	redistest.Real(t, func(t *testing.T, b *redistest.Backend) {
		ctx := redistest.Context(t, 2*time.Minute)
		holder, waiter := tracedClient(t, b), tracedClient(t, b)
		held, err := holder.Lock("vanished").Lock(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = holder.Lock("vanished").Unlock(held) }()
		waited := async(func() error {
			wctx, cancel := context.WithTimeout(ctx, time.Minute)
			defer cancel()
			h, err := waiter.Lock("vanished").Lock(wctx)
			if err != nil {
				return err
			}
			return waiter.Lock("vanished").Unlock(h)
		})
		addr, code := traced(t, b, waiter)
		redistest.Eventually(t, 20*time.Second, "the waiter's client is not in the wake registry", func() bool {
			_, r := inspectBinary(t, b, "--json", "vanished")
			return len(r.WaitingClients) > 0
		})
		redistest.MustDo(t, b.Client(t), "DEL", "vanished")

		_, r := inspectBinary(t, b, "--json", "vanished")
		if r.Kind != "none" || r.Locked || findWaiting(r, code) == nil || r.Subscribers < 1 {
			t.Errorf("inspect --json of a free lock with a parked waiter: %+v; want kind none, the waiting client %s, its subscription", r, code)
		}
		out, _ := inspectBinary(t, b, "vanished")
		if !strings.Contains(out, "vanished: free: no such key; waiters are parked") || !waitingLine("waiters", waiter, code, addr).MatchString(out) {
			t.Errorf("inspect of a free lock with a parked waiter:\n%s", out)
		}
		// Taken again, and released, the lock wakes its waiter.
		again, err := holder.Lock("vanished").Lock(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if err := holder.Lock("vanished").Unlock(again); err != nil {
			t.Fatal(err)
		}
		await(t, "the waiter", waited)
	})
}

// A read-write lock whose key is gone while a client waits on its channel and in no
// registry, as Redisson's waiters do, is free with waiters parked: inspect counts the
// subscription to the rwlock's channel, as for a held rwlock. Guards against a free lock's
// view that counts only a plain lock's channel, and so hides an rwlock's waiters.
func TestInspectShowsRWLockSubscribersOfAFreeLock(t *testing.T) {
	redistest.Real(t, func(t *testing.T, b *redistest.Backend) {
		b.Listen(t, keys.Of("ledger").RWChannel)
		r := inspectJSON(t, b.Addr, "ledger")
		if r.Kind != "none" || r.Locked || r.Subscribers != 1 || len(r.WaitingClients) != 0 {
			t.Errorf("inspect --json of a free rwlock with a client on its channel: %+v; want kind none, 1 subscriber", r)
		}
		out, err := relockCmd(t, b.Addr, "", "inspect", "ledger")
		if err != nil || out != "ledger: free: no such key; waiters are parked, and try when the lease they last saw runs out\n"+
			"  waiting clients  1 (subscribed to the lock's wake-up channel)\n" {
			t.Errorf("inspect of a free rwlock with a client on its channel: %v\n%s", err, out)
		}
	})
}
