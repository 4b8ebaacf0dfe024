package rlock_test

import (
	"context"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/relock-go/relock"
	"github.com/relock-go/relock/internal/hub"
	"github.com/relock-go/relock/internal/redistest"
	"github.com/relock-go/relock/internal/redistest/relocktest"
	"github.com/relock-go/relock/rlock"
)

// waitersInClients parks one waiter for name in each of n new clients (each a process of
// its own, as far as Redis can tell: its own connections, subscriber and wake code) behind
// a hold that the returned holder's client has. Each waiter, once it has had the lock and
// unlocked it, reports its index on the returned channel (-1 for an error, which it
// reports). Their leases are the default 30s, so no waiter tries again on its own within
// the test: whoever tries was woken.
func waitersInClients(t *testing.T, b *redistest.Backend, name string, n int) (holder *relock.Client, held context.Context, clients []*relock.Client, acquired <-chan int) {
	t.Helper()
	holder = relocktest.New(t, b)
	held, err := holder.Lock(name).Lock(redistest.Context(t, time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan int, n)
	for i := 0; i < n; i++ {
		c := relocktest.New(t, b)
		clients = append(clients, c)
		go func() {
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			h, err := c.Lock(name).Lock(ctx)
			if err == nil {
				err = c.Lock(name).Unlock(h)
			}
			if err != nil {
				t.Errorf("waiter of client %d: %v", i, err)
				got <- -1
				return
			}
			got <- i
		}()
	}
	redistest.Eventually(t, 10*time.Second, "the waiters never parked", func() bool {
		parked := 0
		for _, c := range clients {
			parked += c.PubSubStats().Waiting
		}
		return parked == n
	})
	return holder, held, clients, got
}

// woken sums the waits that the clients' wake-ups ended.
func woken(clients []*relock.Client) uint64 {
	var n uint64
	for _, c := range clients {
		n += c.PubSubStats().Woken
	}
	return n
}

// A release wakes one waiter in one client, not one in every client that has one: with a
// waiter in each of four clients, the four acquisitions that follow the first release take
// four wake-ups in all. (Every client waking one waiter per release takes 4+3+2+1 = 10.)
func TestOneWakeUpPerReleaseAcrossClients(t *testing.T) {
	redistest.EachWithCluster(t, func(t *testing.T, b *redistest.Backend) {
		const n = 4
		holder, held, clients, acquired := waitersInClients(t, b, "herd", n)
		if err := holder.Lock("herd").Unlock(held); err != nil {
			t.Fatal(err)
		}
		seen := map[int]bool{}
		for range n {
			i := redistest.Recv(t, acquired, 15*time.Second, "the next waiter's turn: a wake-up was lost")
			if i < 0 || seen[i] {
				t.Fatalf("acquisition by waiter %d (seen: %v)", i, seen)
			}
			seen[i] = true
		}
		if got := woken(clients); got != n {
			t.Errorf("%d wake-ups for %d acquisitions, one waiter per client; want %d", got, n, n)
		}
		for i, c := range clients {
			if st := c.PubSubStats(); st.TimedOut != 0 {
				t.Errorf("client %d: %+v: a waiter woke by its time bound, not by a release", i, st)
			}
		}
	})
}

// Redisson's waiters share the lock's channel with relock's, and hear a relock unlock as
// they hear their own: a "0" on the channel, after the wake code that picks the relock
// client, which is a number (Redisson reads every message on a lock channel as a Java long)
// other than 0 and 1 (the only ones Redisson acts on). relock's waiters are woken as
// before by a Redisson unlock, which publishes "0" alone (TestRedissonLayout).
func TestRelockUnlockWakesRedissonWaiters(t *testing.T) {
	redistest.EachWithCluster(t, func(t *testing.T, b *redistest.Backend) {
		holder, held, clients, acquired := waitersInClients(t, b, "mixed", 1)
		channel := "redisson_lock__channel:{mixed}"

		// A Redisson client's subscription to the lock's channel.
		l := b.Listen(t, channel)

		if err := holder.Lock("mixed").Unlock(held); err != nil {
			t.Fatal(err)
		}
		redistest.Recv(t, acquired, 15*time.Second, "the relock waiter's turn")
		// The waiter has unlocked in turn, with no waiter left: a "0" alone.
		redistest.Eventually(t, 10*time.Second, "the messages of two unlocks", func() bool { return len(l.Messages()) >= 3 })
		msgs := l.Messages()
		if len(msgs) != 3 || msgs[1] != "0" || msgs[2] != "0" {
			t.Fatalf("messages %q; want a wake code, \"0\", and \"0\"", msgs)
		}
		code, err := strconv.ParseInt(msgs[0], 10, 64)
		if err != nil || code < 1000 {
			t.Fatalf("wake code %q: %v; want a Java long of at least 1000, which Redisson ignores", msgs[0], err)
		}
		if got := woken(clients); got != 1 {
			t.Errorf("%d wake-ups of the relock waiter; want 1", got)
		}
	})
}

// A client that was registered to be woken but whose waiter gave up passes the wake-up
// on, or is no longer registered: the waiter of another client is woken by the release,
// not left to its time bound. Both while the quitter's client still listens on the
// channel (its subscription lingers a moment) and after it has stopped.
func TestWakeUpPassedOnByClientThatGaveUp(t *testing.T) {
	t.Parallel()
	for _, when := range []string{"listening", "unsubscribed"} {
		t.Run(when, func(t *testing.T) {
			redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
				holder := relocktest.New(t, b)
				held, err := holder.Lock("quit").Lock(redistest.Context(t, time.Minute))
				if err != nil {
					t.Fatal(err)
				}
				// The quitter registers first, so the release picks it; it gives up once the
				// other waiter has parked too.
				quitter := relocktest.New(t, b)
				ctx, giveUp := context.WithCancel(context.Background())
				defer giveUp()
				gaveUp := make(chan error, 1)
				go func() {
					_, err := quitter.Lock("quit").Lock(ctx)
					gaveUp <- err
				}()
				redistest.Eventually(t, 10*time.Second, "the quitter never parked", func() bool { return quitter.PubSubStats().Waiting == 1 })

				other := relocktest.New(t, b)
				acquired := lockInBackground(other.Lock("quit"), 20*time.Second)
				redistest.Eventually(t, 10*time.Second, "the other waiter never parked", func() bool { return other.PubSubStats().Waiting == 1 })
				giveUp()
				if err := redistest.Recv(t, gaveUp, 10*time.Second, "the quitter's Lock"); err == nil {
					t.Fatal("the quitter got the lock while it was held")
				}
				if when == "unsubscribed" {
					redistest.Eventually(t, 10*time.Second, "the quitter's client kept its subscription", func() bool { return quitter.PubSubStats().Channels == 0 })
				}

				if err := holder.Lock("quit").Unlock(held); err != nil {
					t.Fatal(err)
				}
				if err := redistest.Recv(t, acquired, 15*time.Second, "the other waiter's turn: the wake-up was lost with the quitter"); err != nil {
					t.Fatalf("the other waiter: %v", err)
				}
				if st := other.PubSubStats(); st.Woken != 1 || st.TimedOut != 0 {
					t.Errorf("other waiter's client %+v; want it woken by the release", st)
				}
			})
		})
	}
}

// A client that died while registered to be woken (its entry still counts, but nobody
// listens on its presence channel) is never the one an unlock picks: the waiter of a live
// client is woken by the release, not left to its time bound.
func TestWakeUpSkipsDeadClient(t *testing.T) {
	redistest.EachWithCluster(t, func(t *testing.T, b *redistest.Backend) {
		holder, held, clients, acquired := waitersInClients(t, b, "dead", 1)
		// The dead client's entry ends before the live one's (the holder's 30s lease and a
		// second from now), so it comes first.
		side := b.Client(t)
		redistest.MustDo(t, side, "ZADD", "relock_wake:{dead}", strconv.FormatInt(time.Now().Add(10*time.Second).UnixMilli(), 10), "4242")
		if err := holder.Lock("dead").Unlock(held); err != nil {
			t.Fatal(err)
		}
		if i := redistest.Recv(t, acquired, 15*time.Second, "the live waiter's turn: the dead client was picked"); i != 0 {
			t.Fatalf("waiter %d", i)
		}
		if st := clients[0].PubSubStats(); st.Woken != 1 || st.TimedOut != 0 {
			t.Errorf("live client %+v; want its waiter woken by the release", st)
		}
	})
}

// A lock freed without an unlock (its key deleted here, as when its holder's process died
// and the lease ran out, or Redis evicted it) goes to whoever tries first: here a first
// attempt of another client, with a 300ms fixed lease that then runs out without an unlock.
// The waiter parked meanwhile sleeps until the old 30s lease's end, unless the newcomer's
// acquisition tells it of the shorter lease, as any acquisition does while clients are
// registered to be woken. It must, also on the cheap path of a first attempt at a free lock.
func TestFirstAttemptAnnouncesItsLease(t *testing.T) {
	redistest.EachWithCluster(t, func(t *testing.T, b *redistest.Backend) {
		holder, waiter, newcomer := relocktest.New(t, b), relocktest.New(t, b), relocktest.New(t, b)
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if _, err := holder.Lock("vanish", rlock.WithLease(30*time.Second)).Lock(ctx); err != nil {
			t.Fatal(err)
		}
		next := lockInBackground(waiter.Lock("vanish"), 20*time.Second)
		redistest.Eventually(t, 10*time.Second, "the waiter never parked", func() bool { return waiter.PubSubStats().Waiting == 1 })
		redistest.MustDo(t, b.Client(t), "DEL", "vanish")
		if _, err := newcomer.Lock("vanish", rlock.WithLease(300*time.Millisecond)).TryLock(ctx); err != nil {
			t.Fatal(err)
		}
		if err := redistest.Recv(t, next, 10*time.Second, "the waiter's Lock after the newcomer's 300ms hold: it slept on the old 30s lease"); err != nil {
			t.Fatal(err)
		}
	})
}

// Waiters that an unlock did not wake learn the new hold's lease, whether they wait in
// other clients than the one woken or beside the woken waiter in its client: when that hold
// ends without an unlock (a fixed lease that runs out, a holder that died), they try at its
// end, not when the previous hold would have ended. Here each waiter, once it has the
// lock, keeps it for a short fixed lease and never unlocks; the holder they waited behind
// had the default 30s lease.
func TestWaitersLearnNewHoldsLease(t *testing.T) {
	t.Parallel()
	for _, clientsOf := range []struct {
		name   string
		n      int  // clients the waiters are spread over
		unlock bool // the first holder unlocks; else its 3s lease runs out
	}{{"across clients", 3, true}, {"in one client", 1, true}, {"in one client after a lease ran out", 1, false}} {
		t.Run(clientsOf.name, func(t *testing.T) {
			redistest.EachWithCluster(t, func(t *testing.T, b *redistest.Backend) {
				const n = 3
				holder := relocktest.New(t, b)
				var opts []rlock.Option
				if !clientsOf.unlock {
					opts = append(opts, rlock.WithLease(3*time.Second))
				}
				held, err := holder.Lock("relay", opts...).Lock(redistest.Context(t, time.Minute))
				if err != nil {
					t.Fatal(err)
				}
				got := make(chan error, n)
				var clients []*relock.Client
				for range clientsOf.n {
					clients = append(clients, relocktest.New(t, b))
				}
				for i := range n {
					c := clients[i%len(clients)]
					go func() {
						ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
						defer cancel()
						_, err := c.Lock("relay", rlock.WithLease(300*time.Millisecond)).Lock(ctx)
						got <- err
					}()
				}
				redistest.Eventually(t, 10*time.Second, "the waiters never parked", func() bool { return relocktest.Waiting(clients...) == n })
				if clientsOf.unlock {
					if err := holder.Lock("relay").Unlock(held); err != nil {
						t.Fatal(err)
					}
				}
				for range n {
					if err := redistest.Recv(t, got, 10*time.Second, "the next waiter's turn after a 300ms hold: it slept on the old 30s lease"); err != nil {
						t.Fatal(err)
					}
				}
			})
		})
	}
}

// A client whose releases are handed on among its own waiters still frees the lock for
// everybody at least once in every hub.HandRun+1 releases: Redisson's waiters, which are
// not in the wake registry, hear a "0" then, and try. Here one client's goroutines keep
// the lock busy, and a Redisson client's subscription counts the "0"s.
func TestHandoffRunsLetRedissonWaitersIn(t *testing.T) {
	redistest.EachWithCluster(t, func(t *testing.T, b *redistest.Backend) {
		l := b.Listen(t, "redisson_lock__channel:{runs}")
		c := relocktest.New(t, b)
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		const goroutines, each = 3, 40
		var wg sync.WaitGroup
		for range goroutines {
			wg.Add(1)
			go func() {
				defer wg.Done()
				mu := c.Lock("runs")
				for range each {
					h, err := mu.Lock(relock.NewOwner(ctx))
					if err != nil {
						t.Errorf("Lock: %v", err)
						return
					}
					time.Sleep(2 * time.Millisecond)
					if err := mu.Unlock(h); err != nil {
						t.Errorf("Unlock: %v", err)
						return
					}
				}
			}()
		}
		wg.Wait()
		const releases = goroutines * each
		// The last release's message may still be on its way.
		want := releases/(hub.HandRun+1) - 1
		redistest.Eventually(t, 10*time.Second, "too few releases freed the lock for Redisson's waiters", func() bool {
			zeros := 0
			for _, m := range l.Messages() {
				if m == "0" {
					zeros++
				}
			}
			return zeros >= want
		})
	})
}
