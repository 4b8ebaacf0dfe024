package main

import (
	"context"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/relock-go/relock"
	"github.com/relock-go/relock/internal/redistest"
	"github.com/relock-go/relock/internal/redistest/relocktest"
)

// inspect lists waiters in the order they are served: a fair lock's queue and a
// semaphore's queue of clients first in line first, and a read-write lock's waiting
// clients in the order an unlock wakes them, the writers' clients before the readers'
// (docs/operations.md), here although the reader's client registered first. Guards against
// a queue shown back to front, or readers listed ahead of the writers they give way to.
func TestInspectShowsWaitersInTheirOrder(t *testing.T) {
	redistest.Real(t, func(t *testing.T, b *redistest.Backend) {
		ctx := redistest.Context(t, 2*time.Minute)
		holder := relocktest.New(t, b, relock.WithWatchdogTimeout(time.Minute))
		first := relocktest.New(t, b, relock.WithWatchdogTimeout(time.Minute))
		second := relocktest.New(t, b, relock.WithWatchdogTimeout(time.Minute))

		// A fair lock: first's waiter queues, then second's.
		fh, err := holder.FairLock("turns").Lock(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var fair []<-chan error
		for i, c := range []*relock.Client{first, second} {
			fair = append(fair, async(func() error {
				wctx, cancel := context.WithTimeout(ctx, time.Minute)
				defer cancel()
				h, err := c.FairLock("turns").Lock(wctx)
				if err != nil {
					return err
				}
				return c.FairLock("turns").Unlock(h)
			}))
			redistest.Eventually(t, 20*time.Second, "a fair waiter is not queued", func() bool {
				return len(inspectJSON(t, b.Addr, "turns").Queue) == i+1
			})
		}
		r := inspectJSON(t, b.Addr, "turns")
		if len(r.Queue) != 2 || !strings.HasPrefix(r.Queue[0].Owner, first.ID()+":") || !strings.HasPrefix(r.Queue[1].Owner, second.ID()+":") {
			t.Errorf("inspect --json turns: queue %+v; want %s's waiter first, then %s's", r.Queue, first.ID(), second.ID())
		}
		out, _ := relockCmd(t, b.Addr, "", "inspect", "turns")
		if !regexp.MustCompile(`\n  queue 1  ` + regexp.QuoteMeta(first.ID()) + `:\d+ [^\n]*\n  queue 2  ` + regexp.QuoteMeta(second.ID()) + `:\d+ `).MatchString(out) {
			t.Errorf("inspect turns: want %s's waiter as queue 1 and %s's as queue 2:\n%s", first.ID(), second.ID(), out)
		}
		if err := holder.FairLock("turns").Unlock(fh); err != nil {
			t.Fatal(err)
		}
		for _, w := range fair {
			await(t, "a fair waiter", w)
		}

		// A semaphore with no permit free: first's client queues, then second's.
		sem := holder.Semaphore("slots")
		if ok, err := sem.TrySetPermits(ctx, 1); !ok || err != nil {
			t.Fatalf("TrySetPermits: %v, %v", ok, err)
		}
		if err := sem.Acquire(ctx, 1); err != nil {
			t.Fatal(err)
		}
		var permits []<-chan error
		for i, c := range []*relock.Client{first, second} {
			permits = append(permits, async(func() error {
				wctx, cancel := context.WithTimeout(ctx, time.Minute)
				defer cancel()
				if err := c.Semaphore("slots").Acquire(wctx, 1); err != nil {
					return err
				}
				return c.Semaphore("slots").Release(ctx, 1)
			}))
			redistest.Eventually(t, 20*time.Second, "a client is not queued for a permit", func() bool {
				return len(inspectJSON(t, b.Addr, "slots").PermitWaiters) == i+1
			})
		}
		r = inspectJSON(t, b.Addr, "slots")
		if len(r.PermitWaiters) != 2 || r.PermitWaiters[0].Owner != first.ID() || r.PermitWaiters[1].Owner != second.ID() {
			t.Errorf("inspect --json slots: permit waiters %+v; want %s first, then %s", r.PermitWaiters, first.ID(), second.ID())
		}
		out, _ = relockCmd(t, b.Addr, "", "inspect", "slots")
		if !regexp.MustCompile(`\n  queue 1  relock client ` + regexp.QuoteMeta(first.ID()) + ` [^\n]*\n  queue 2  relock client ` + regexp.QuoteMeta(second.ID()) + ` `).MatchString(out) {
			t.Errorf("inspect slots: want %s as queue 1 and %s as queue 2:\n%s", first.ID(), second.ID(), out)
		}
		if err := sem.Release(ctx, 1); err != nil {
			t.Fatal(err)
		}
		for _, w := range permits {
			await(t, "a permit's waiter", w)
		}

		// A read-write lock held for writing: first's reader waits, then second's writer.
		wh, err := holder.RWLock("ledger").Lock(ctx)
		if err != nil {
			t.Fatal(err)
		}
		read := async(func() error {
			wctx, cancel := context.WithTimeout(ctx, time.Minute)
			defer cancel()
			h, err := first.RWLock("ledger").RLock(wctx)
			if err != nil {
				return err
			}
			return first.RWLock("ledger").RUnlock(h)
		})
		redistest.Eventually(t, 20*time.Second, "the reader's client is not registered", func() bool {
			return len(inspectJSON(t, b.Addr, "ledger").WaitingClients) == 1
		})
		wrote := async(func() error {
			wctx, cancel := context.WithTimeout(ctx, time.Minute)
			defer cancel()
			h, err := second.RWLock("ledger").Lock(wctx)
			if err != nil {
				return err
			}
			return second.RWLock("ledger").Unlock(h)
		})
		redistest.Eventually(t, 20*time.Second, "the writer's client is not registered", func() bool {
			return len(inspectJSON(t, b.Addr, "ledger").WaitingClients) == 2
		})
		r = inspectJSON(t, b.Addr, "ledger")
		if ws := r.WaitingClients; len(ws) != 2 || ws[0].ClientID != second.ID() || ws[0].Readers || ws[1].ClientID != first.ID() || !ws[1].Readers {
			t.Errorf("inspect --json ledger: waiting clients %+v; want the writer's client %s, then the reader's %s", ws, second.ID(), first.ID())
		}
		out, _ = relockCmd(t, b.Addr, "", "inspect", "ledger")
		if !regexp.MustCompile(`\n  parked writers of relock client ` + regexp.QuoteMeta(second.ID()) + ` [^\n]*\n  parked readers of relock client ` + regexp.QuoteMeta(first.ID()) + ` `).MatchString(out) {
			t.Errorf("inspect ledger: want the writer's client %s, then the reader's %s:\n%s", second.ID(), first.ID(), out)
		}
		if err := holder.RWLock("ledger").Unlock(wh); err != nil {
			t.Fatal(err)
		}
		await(t, "the writer", wrote)
		await(t, "the reader", read)
	})
}
