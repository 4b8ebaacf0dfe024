package rlock_test

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/relock-go/relock"
	"github.com/relock-go/relock/internal/redistest"
	"github.com/relock-go/relock/internal/redistest/relocktest"
	"github.com/relock-go/relock/internal/script"
	"github.com/relock-go/relock/rlock"
	"github.com/relock-go/relock/watchdog"
)

// waitDone waits up to d for ctx to end and returns how long that took.
func waitDone(t *testing.T, ctx context.Context, d time.Duration, what string) time.Duration {
	t.Helper()
	start := time.Now()
	select {
	case <-ctx.Done():
		return time.Since(start)
	case <-time.After(d):
		t.Fatalf("%s: the hold's context did not end within %v", what, d)
		return 0
	}
}

// A hold with a 1s watchdog timeout kept for 5s never lapses, and Unlock releases it.
func TestWatchdogKeepsHold(t *testing.T) {
	t.Parallel()
	redistest.EachWithCluster(t, func(t *testing.T, b *redistest.Backend) {
		c := relocktest.New(t, b, relock.WithWatchdogTimeout(time.Second))
		side := b.Client(t)
		mu := c.Lock("kept")
		held, err := mu.Lock(redistest.Context(t, time.Minute))
		if err != nil {
			t.Fatal(err)
		}
		lowest := int64(1 << 62)
		for end := time.Now().Add(5 * time.Second); time.Now().Before(end); time.Sleep(50 * time.Millisecond) {
			p := redistest.PTTL(t, side, "kept")
			if p <= 0 {
				t.Fatalf("the hold lapsed: PTTL %d", p)
			}
			lowest = min(lowest, p)
			if held.Err() != nil {
				t.Fatalf("the hold's context ended: %v", context.Cause(held))
			}
		}
		t.Logf("lowest PTTL seen over 5s: %dms of a 1000ms lease; %+v", lowest, c.WatchdogStats())
		if err := mu.Unlock(held); err != nil {
			t.Fatal(err)
		}
		if n, _ := redistest.Do(t, side, "EXISTS", "kept").AsInt64(); n != 0 {
			t.Error("the lock still exists after Unlock")
		}
		if !errors.Is(context.Cause(held), context.Canceled) {
			t.Errorf("after Unlock the hold's context has cause %v; want context.Canceled", context.Cause(held))
		}
	})
}

// 1,000 holds on one client are renewed with at most 10 script calls per tick, in one
// round trip (no NOSCRIPT fallback), as INFO commandstats on the server confirms.
func TestRenewalBatching(t *testing.T) {
	t.Parallel()
	redistest.Real(t, func(t *testing.T, b *redistest.Backend) {
		c := relocktest.New(t, b, relock.WithWatchdogTimeout(1500*time.Millisecond))
		side, stats := b.Client(t), b.Commands(t)
		held := redistest.Context(t, 2*time.Minute)
		names := make([]string, 1000)
		for i := range names {
			names[i] = "many:" + strconv.Itoa(i)
			var err error
			if held, err = c.Lock(names[i]).Lock(held); err != nil {
				t.Fatal(err)
			}
		}
		// The first round on a fresh server meets NOSCRIPT once and sends EVAL; Redis keeps
		// the script from then on. Measure the rounds after it, from just after one round
		// has ended to just after another has: a round in flight at either end would be
		// counted as sent but not as done.
		afterRound := func() watchdog.Stats {
			ticks := c.WatchdogStats().Ticks
			var st watchdog.Stats
			redistest.Eventually(t, 5*time.Second, "no renewal round", func() bool {
				st = c.WatchdogStats()
				return st.Ticks > ticks
			})
			return st
		}
		afterRound()
		wd0 := afterRound()
		before := stats.Calls(t)
		time.Sleep(2 * time.Second)
		wd1 := afterRound()
		after := stats.Calls(t)

		ticks := wd1.Ticks - wd0.Ticks
		calls := after["evalsha"] + after["eval"] - before["evalsha"] - before["eval"]
		t.Logf("%d ticks, %d script calls on the server, %d pipelined sends, %d renewals", ticks, calls, wd1.Batches-wd0.Batches, wd1.Renewed-wd0.Renewed)
		if ticks < 2 {
			t.Fatalf("only %d renewal ticks in 2s with a 500ms period", ticks)
		}
		if calls > 10*int64(ticks) {
			t.Errorf("%d script calls for %d ticks; want at most 10 per tick", calls, ticks)
		}
		if got := wd1.Batches - wd0.Batches; got != ticks {
			t.Errorf("%d pipelined sends for %d ticks; want one per tick", got, ticks)
		}
		if got := wd1.Renewed - wd0.Renewed; got != 1000*ticks {
			t.Errorf("%d renewals for %d ticks of 1000 holds", got, ticks)
		}
		for _, name := range []string{names[0], names[999]} {
			if p := redistest.PTTL(t, side, name); p <= 0 {
				t.Errorf("%s: PTTL %d", name, p)
			}
		}
		// The last context carries every hold; using it here keeps all 1,000 reachable.
		// Dropped, the garbage collector would abandon them and the rounds would stop.
		if err := held.Err(); err != nil {
			t.Errorf("the holds' context ended: %v", context.Cause(held))
		}
	})
}

// Deleting the key behind the holder's back ends its context with ErrLeaseLost within one
// renewal period (plus a round trip), and Unlock then reports ErrNotHeld.
func TestLeaseLostWhenKeyGone(t *testing.T) {
	t.Parallel()
	const timeout = 900 * time.Millisecond // period 300ms
	ways := map[string]func(t *testing.T, b *redistest.Backend, side rueidis.Client){
		"DEL": func(t *testing.T, _ *redistest.Backend, side rueidis.Client) {
			redistest.Do(t, side, "DEL", "vanishing")
		},
		"FLUSHALL": func(t *testing.T, b *redistest.Backend, side rueidis.Client) {
			b.DoOnMasters(t, side, "FLUSHALL")
		},
		"ForceUnlock by another client": func(t *testing.T, b *redistest.Backend, _ rueidis.Client) {
			if ok, err := relocktest.New(t, b).Lock("vanishing").ForceUnlock(context.Background()); !ok || err != nil {
				t.Fatalf("ForceUnlock = %v, %v", ok, err)
			}
		},
	}
	redistest.EachWithCluster(t, func(t *testing.T, b *redistest.Backend) {
		for way, remove := range ways {
			c := relocktest.New(t, b, relock.WithWatchdogTimeout(timeout))
			side := b.Client(t)
			mu := c.Lock("vanishing")
			held, err := mu.Lock(redistest.Context(t, time.Minute))
			if err != nil {
				t.Fatal(err)
			}
			// Remove the key just after a renewal round (which also loads the renewal
			// script, so no NOSCRIPT round trip follows).
			ticks := c.WatchdogStats().Ticks
			redistest.Eventually(t, 5*time.Second, "no renewal round", func() bool { return c.WatchdogStats().Ticks > ticks })
			remove(t, b, side)
			// Rounds are counted as they are sent: the first one sent from here on must
			// be the one that finds the loss. Counting rounds rather than time keeps the
			// check exact on a machine too loaded to keep its periods.
			sent := c.WatchdogStats().Batches
			took := waitDone(t, held, 5*time.Second, way)
			if cause := context.Cause(held); !errors.Is(cause, relock.ErrLeaseLost) {
				t.Errorf("%s: cause %v; want ErrLeaseLost", way, cause)
			}
			rounds := c.WatchdogStats().Batches - sent
			t.Logf("%s: lease loss seen after %v and %d renewal round (period %v)", way, took.Round(time.Millisecond), rounds, timeout/3)
			if rounds > 1 {
				t.Errorf("%s: lease loss seen after %d renewal rounds; want the first round after the removal", way, rounds)
			}
			// Queries with the ended hold's context answer for its owner.
			if _, err := mu.TTL(held); !errors.Is(err, relock.ErrNotHeld) {
				t.Errorf("%s: TTL after loss: %v; want ErrNotHeld", way, err)
			}
			if n, err := mu.HoldCount(held); n != 0 || err != nil {
				t.Errorf("%s: HoldCount after loss = %d, %v; want 0", way, n, err)
			}
			if err := mu.Unlock(held); !errors.Is(err, relock.ErrNotHeld) {
				t.Errorf("%s: Unlock after loss: %v; want ErrNotHeld", way, err)
			}
		}
	})
}

// Redis paused past the lease: the holder's context ends by its local deadline although
// Redis never answered.
func TestLeaseLostWhenRedisPaused(t *testing.T) {
	redistest.Real(t, func(t *testing.T, b *redistest.Backend) {
		c := relocktest.New(t, b, relock.WithWatchdogTimeout(time.Second))
		mu := c.Lock("paused")
		asked := time.Now() // the local deadline runs from when the acquiring request was sent
		held, err := mu.Lock(redistest.Context(t, time.Minute))
		if err != nil {
			t.Fatal(err)
		}
		b.Server.Pause(t)
		took := waitDone(t, held, 10*time.Second, "Redis paused")
		paused := time.Since(asked)
		b.Server.Resume(t)
		if cause := context.Cause(held); !errors.Is(cause, relock.ErrLeaseLost) {
			t.Fatalf("cause %v; want ErrLeaseLost", cause)
		}
		// It ends no earlier than the lease less the allowance for clocks that disagree (a
		// hundredth of the lease and 2ms).
		if earliest := time.Second - 12*time.Millisecond; paused < earliest {
			t.Errorf("the hold ended %v after acquisition, before its 1s lease less the allowance (%v) could run out", paused, earliest)
		}
		t.Logf("lease loss signalled %v after the pause began, %v after acquisition", took.Round(time.Millisecond), paused.Round(time.Millisecond))
		// The local deadline errs early (it runs from when the request was sent); once the
		// lease has run out in Redis too, the hold is gone there as well.
		side := b.Client(t)
		redistest.Eventually(t, 5*time.Second, "the key outlived its lease", func() bool {
			n, err := redistest.Do(t, side, "EXISTS", "paused").AsInt64()
			return err == nil && n == 0
		})
		if err := mu.Unlock(held); !errors.Is(err, relock.ErrNotHeld) {
			t.Errorf("Unlock after the lease ran out: %v; want ErrNotHeld", err)
		}
	})
}

// Redis restarted without persistence: the hold is reported lost, and a lock taken after
// the restart is renewed normally (the scripts are sent again after NOSCRIPT).
func TestLeaseLostOnRestart(t *testing.T) {
	t.Parallel()
	redistest.Real(t, func(t *testing.T, b *redistest.Backend) {
		c := relocktest.New(t, b, relock.WithWatchdogTimeout(time.Second))
		held, err := c.Lock("restarted").Lock(redistest.Context(t, time.Minute))
		if err != nil {
			t.Fatal(err)
		}
		b.Server.Restart(t)
		waitDone(t, held, 10*time.Second, "Redis restarted")
		if cause := context.Cause(held); !errors.Is(cause, relock.ErrLeaseLost) {
			t.Fatalf("cause %v; want ErrLeaseLost", cause)
		}

		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		// The first command after the restart meets a dead connection; Lock must find out
		// that its attempt did not run and send it again.
		again, err := c.Lock("after-restart").Lock(ctx)
		if err != nil {
			t.Fatalf("Lock after the restart: %v", err)
		}
		side := b.Client(t) // made after the restart: its connection is fresh
		renewed := c.WatchdogStats().Renewed
		for end := time.Now().Add(3 * time.Second); time.Now().Before(end); time.Sleep(50 * time.Millisecond) {
			if p := redistest.PTTL(t, side, "after-restart"); p <= 0 {
				t.Fatalf("the lock taken after the restart lapsed: PTTL %d", p)
			}
		}
		if again.Err() != nil {
			t.Fatalf("the new hold's context ended: %v", context.Cause(again))
		}
		if n, _ := redistest.Do(t, side, "HGET", "after-restart", mustOwner(t, side, "after-restart")).AsInt64(); n != 1 {
			t.Errorf("hold count after the retried acquisition = %d; want 1 (counted once)", n)
		}
		if got := c.WatchdogStats().Renewed - renewed; got < 5 {
			t.Errorf("%d renewals in 3s after the restart; want the new hold renewed every period", got)
		}
	})
}

// A WithLease hold is not renewed: it expires after its lease, with no renewal sent, and
// its context ends with ErrLeaseLost.
func TestFixedLeaseNotRenewed(t *testing.T) {
	t.Parallel()
	redistest.RealWithCluster(t, func(t *testing.T, b *redistest.Backend) {
		c := relocktest.New(t, b, relock.WithWatchdogTimeout(600*time.Millisecond))
		side, stats := b.Client(t), b.Commands(t)
		// Load the acquire script first, so that the count below is not blurred by the
		// one NOSCRIPT a fresh server answers. (The hash tag puts the warm-up on the
		// master of "fixed" in a cluster.)
		if err := c.Lock("{fixed}:warm-up").Do(redistest.Context(t, time.Minute), func(context.Context) error { return nil }); err != nil {
			t.Fatal(err)
		}
		before := stats.Calls(t)
		held, err := c.Lock("fixed").Lock(redistest.Context(t, time.Minute), rlock.WithLease(2*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		// The key carries the 2s lease itself, not the watchdog's 600ms.
		if p := redistest.PTTL(t, side, "fixed"); p <= 1000 || p > 2000 {
			t.Errorf("PTTL %dms just after a WithLease(2s) acquisition", p)
		}
		took := waitDone(t, held, 5*time.Second, "fixed lease")
		if cause := context.Cause(held); !errors.Is(cause, relock.ErrLeaseLost) {
			t.Errorf("cause %v; want ErrLeaseLost", cause)
		}
		if took < 1500*time.Millisecond {
			t.Errorf("the fixed lease's context ended after %v, well before its 2s", took)
		}
		redistest.Eventually(t, 3*time.Second, "the key did not expire", func() bool {
			n, _ := redistest.Do(t, side, "EXISTS", "fixed").AsInt64()
			return n == 0
		})
		after := stats.Calls(t)
		// One EVALSHA for the acquisition, and no renewal. A check round (after the
		// subscriber reconnected, which a loaded machine can make it do) looks at a fixed
		// lease without extending it: its calls are allowed for, and count no renewal.
		st := c.WatchdogStats()
		if calls := after["evalsha"] + after["eval"] - before["evalsha"] - before["eval"]; calls < 1 || calls > 1+int64(st.Calls) {
			t.Errorf("%d script calls, with %d of the watchdog's checks; want the acquisition alone", calls, st.Calls)
		}
		if st.Renewed != 0 {
			t.Errorf("watchdog %+v renewed a fixed lease", st)
		}
	})
}

// After Unlock returns no renewal for that lock is sent again, however close to a tick
// the unlock comes.
func TestNoRenewalAfterUnlock(t *testing.T) {
	t.Parallel()
	redistest.EachWithCluster(t, func(t *testing.T, b *redistest.Backend) {
		// Period 200ms: the unlocks below land at 12 points spread over a period. (A
		// shorter lease would lapse whenever a loaded machine stalls the renewal.)
		c := relocktest.New(t, b, relock.WithWatchdogTimeout(600*time.Millisecond))
		mu := c.Lock("released")
		ctx := redistest.Context(t, time.Minute)
		for i := 0; i < 12; i++ {
			held, err := mu.Lock(ctx)
			if err != nil {
				t.Fatal(err)
			}
			time.Sleep(time.Duration(i*71%240) * time.Millisecond)
			if err := mu.Unlock(held); err != nil {
				t.Fatal(err)
			}
			calls := c.WatchdogStats().Calls
			time.Sleep(250 * time.Millisecond) // more than a period
			if got := c.WatchdogStats().Calls; got != calls {
				t.Fatalf("round %d: %d renewal calls sent after Unlock returned", i, got-calls)
			}
		}
		if st := c.WatchdogStats(); st.Calls == 0 {
			t.Errorf("stats %+v: no renewal was ever sent, the test proved nothing", st)
		}
	})
}

// Fencing is opt-in per lock (docs/design.md, data layout): a lock taken without
// WithFencing, by Lock, TryLock, a re-entry or a handoff, leaves no fencing counter
// behind, only Redisson's lock hash, and its holds carry no token.
func TestUnfencedLockKeepsNoCounter(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		const name = "unfenced"
		c := relocktest.New(t, b)
		side := b.Client(t)
		ctx := redistest.Context(t, 30*time.Second)
		mu := c.Lock(name)
		held, err := mu.Lock(ctx)
		if err != nil {
			t.Fatal(err)
		}
		again, err := mu.TryLock(held)
		if err != nil {
			t.Fatal(err)
		}
		if _, ok := mu.Token(again); ok {
			t.Error("an unfenced hold has a token")
		}
		got := parkWaiter(t, c, mu, ctx)
		for _, h := range []context.Context{again, held} {
			if err := mu.Unlock(h); err != nil {
				t.Fatal(err)
			}
		}
		w := redistest.Recv(t, got, 10*time.Second, "the handed waiter's Lock")
		if w == nil {
			t.FailNow()
		}
		if n, _ := redistest.Do(t, side, "EXISTS", "redisson_lock_token:{"+name+"}").AsInt64(); n != 0 {
			t.Error("an unfenced lock's acquisitions wrote a fencing counter")
		}
		if err := mu.Unlock(w); err != nil {
			t.Fatal(err)
		}
	})
}

// 8 goroutines × 50 acquisitions get strictly increasing tokens in acquisition order; a
// re-entry keeps its token.
func TestFencingTokensIncrease(t *testing.T) {
	redistest.EachWithCluster(t, func(t *testing.T, b *redistest.Backend) {
		c1, c2 := relocktest.New(t, b), relocktest.New(t, b)
		ctx := redistest.Context(t, 2*time.Minute)
		var (
			mu     sync.Mutex // orders the appends; the lock already does, this is for -race
			tokens []int64
			wg     sync.WaitGroup
		)
		for g := 0; g < 8; g++ {
			c := []*relock.Client{c1, c2}[g%2]
			lock := c.Lock("fenced", rlock.WithFencing())
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := 0; i < 50; i++ {
					held, err := lock.Lock(ctx)
					if err != nil {
						t.Error(err)
						return
					}
					tok, ok := lock.Token(held)
					if !ok {
						t.Error("no token for a fenced hold")
					}
					again, err := lock.Lock(held)
					if err != nil {
						t.Error(err)
						return
					}
					if tok2, _ := lock.Token(again); tok2 != tok {
						t.Errorf("re-entry changed the token from %d to %d", tok, tok2)
					}
					mu.Lock()
					tokens = append(tokens, tok)
					mu.Unlock()
					_ = lock.Unlock(again)
					if err := lock.Unlock(held); err != nil {
						t.Error(err)
					}
				}
			}()
		}
		wg.Wait()
		if len(tokens) != 400 {
			t.Fatalf("%d tokens; want 400", len(tokens))
		}
		for i := 1; i < len(tokens); i++ {
			if tokens[i] <= tokens[i-1] {
				t.Fatalf("token %d after %d: not strictly increasing in acquisition order", tokens[i], tokens[i-1])
			}
		}
		if _, ok := c1.Lock("unfenced").Token(context.Background()); ok {
			t.Error("Token reported a token for a context that holds nothing")
		}
	})
}

// fencedWrite is a resource that checks tokens: it accepts a write only with a token at
// least as high as the highest it has accepted.
const fencedWrite = `local last = tonumber(redis.call('get', KEYS[1]) or '0')
if tonumber(ARGV[1]) < last then return 0 end
redis.call('set', KEYS[1], ARGV[1]); redis.call('set', KEYS[2], ARGV[2]); return 1`

// A holder that sleeps past its fixed lease and then writes is rejected by the fenced
// resource after another holder wrote. (The resource's two keys share a hash tag, so that
// its script runs on a cluster too.)
func TestFencingRejectsStaleHolder(t *testing.T) {
	redistest.EachWithCluster(t, func(t *testing.T, b *redistest.Backend) {
		c1, c2 := relocktest.New(t, b), relocktest.New(t, b)
		side := b.Client(t)
		write := rueidis.NewLuaScript(fencedWrite)
		put := func(token int64, value string) int64 {
			t.Helper()
			n, err := write.Exec(context.Background(), side, []string{"{resource}:token", "{resource}:value"},
				[]string{strconv.FormatInt(token, 10), value}).AsInt64()
			if err != nil {
				t.Fatal(err)
			}
			return n
		}
		slow := c1.Lock("ledger", rlock.WithFencing())
		held, err := slow.Lock(redistest.Context(t, time.Minute), rlock.WithLease(300*time.Millisecond))
		if err != nil {
			t.Fatal(err)
		}
		staleToken, _ := slow.Token(held)
		waitDone(t, held, 5*time.Second, "fixed lease") // the holder "sleeps" past its lease

		fast := c2.Lock("ledger", rlock.WithFencing())
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		newer, err := fast.Lock(ctx)
		if err != nil {
			t.Fatal(err)
		}
		newToken, _ := fast.Token(newer)
		if newToken <= staleToken {
			t.Fatalf("new token %d not above the stale one %d", newToken, staleToken)
		}
		if put(newToken, "new holder") != 1 {
			t.Fatal("the current holder's write was rejected")
		}
		if put(staleToken, "stale holder") != 0 {
			t.Error("the stale holder's write was accepted")
		}
		if v, _ := redistest.Do(t, side, "GET", "{resource}:value").ToString(); v != "new holder" {
			t.Errorf("resource = %q; want the current holder's write", v)
		}
		if !errors.Is(context.Cause(held), relock.ErrLeaseLost) {
			t.Errorf("the stale holder's context cause is %v; want ErrLeaseLost", context.Cause(held))
		}
	})
}

// A re-entry with a fixed lease shorter than what the owner's hold was promised cuts
// nothing short, in the hold's context as in Redis (the key keeps the longer of the two):
// past the shorter lease the context is live and the owner holds the lock.
func TestShorterReentryKeepsTheContext(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		c := relocktest.New(t, b)
		mu := c.Lock("reentry:shorter")
		held, err := mu.Lock(redistest.Context(t, time.Minute), rlock.WithLease(time.Minute))
		if err != nil {
			t.Fatal(err)
		}
		again, err := mu.Lock(held, rlock.WithLease(100*time.Millisecond))
		if err != nil {
			t.Fatal(err)
		}
		time.Sleep(500 * time.Millisecond) // past the shorter lease, well within the minute
		if err := held.Err(); err != nil {
			t.Fatalf("the hold's context ended after a re-entry shorter than its lease (cause %v); want it live for the minute Redis keeps", context.Cause(held))
		}
		if ok, err := mu.IsHeld(held); err != nil || !ok {
			t.Fatalf("IsHeld: %v %v; want held", ok, err)
		}
		for _, h := range []context.Context{again, held} {
			if err := mu.Unlock(h); err != nil {
				t.Fatal(err)
			}
		}
	})
}

// Token answers only while the hold is the owner's: once the hold's lease (less its
// allowance for clocks) has run out, its context has ended and there is no token to give,
// even before the watchdog's loop has noticed. A 3ms lease runs out as Lock returns: its
// allowance is 3ms. (Token used to answer the token of such a hold, 20 times in 20.)
func TestTokenEndsWithTheLease(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		c := relocktest.New(t, b, relock.WithLogger(nil))
		mu := c.Lock("token-lease", rlock.WithFencing())
		ctx := redistest.Context(t, time.Minute)
		for i := range 20 {
			held, err := mu.Lock(ctx, rlock.WithLease(3*time.Millisecond))
			if err != nil {
				t.Fatal(err)
			}
			if tok, ok := mu.Token(held); ok {
				t.Fatalf("try %d: Token = %d, true for a hold whose lease has run out", i, tok)
			}
			if !errors.Is(context.Cause(held), relock.ErrLeaseLost) {
				t.Fatalf("try %d: the hold's cause is %v; want ErrLeaseLost", i, context.Cause(held))
			}
		}
	})
}

// Token answers while the owner holds, through a re-entry and its Unlock, and not once the
// hold has ended: released by its last Unlock, or lost (another client forced the lock
// free, which the watchdog's next renewal finds).
func TestTokenEndsWithTheHold(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		c := relocktest.New(t, b, relock.WithLogger(nil), relock.WithWatchdogTimeout(1500*time.Millisecond))
		mu := c.Lock("token-hold", rlock.WithFencing())
		ctx := redistest.Context(t, time.Minute)
		held, err := mu.Lock(relock.NewOwner(ctx))
		if err != nil {
			t.Fatal(err)
		}
		tok, ok := mu.Token(held)
		if !ok || tok < 1 {
			t.Fatalf("Token of a live hold = %d, %v; want a token", tok, ok)
		}
		again, err := mu.Lock(held)
		if err != nil {
			t.Fatal(err)
		}
		if err := mu.Unlock(again); err != nil {
			t.Fatal(err)
		}
		if got, ok := mu.Token(held); !ok || got != tok {
			t.Fatalf("Token after a re-entry's Unlock = %d, %v; want %d, true", got, ok, tok)
		}
		if err := mu.Unlock(held); err != nil {
			t.Fatal(err)
		}
		if got, ok := mu.Token(held); ok {
			t.Fatalf("Token after the last Unlock = %d, true; want false", got)
		}

		held, err = mu.Lock(relock.NewOwner(ctx))
		if err != nil {
			t.Fatal(err)
		}
		if ok, err := relocktest.New(t, b).Lock("token-hold").ForceUnlock(ctx); !ok || err != nil {
			t.Fatalf("ForceUnlock = %v, %v; want true", ok, err)
		}
		waitDone(t, held, 10*time.Second, "a hold forced free")
		if got, ok := mu.Token(held); ok {
			t.Fatalf("Token of a hold lost (%v) = %d, true; want false", context.Cause(held), got)
		}
	})
}

// An Unlock that fails (here: every command answers an error) stops the renewal: the
// hold's context ends with ErrLeaseLost and the key runs out with its lease, instead of
// being kept alive for a holder that has moved on.
func TestFailedUnlockStopsRenewal(t *testing.T) {
	t.Run("miniredis", func(t *testing.T) {
		b := redistest.Mini(t)
		c := relocktest.New(t, b, relock.WithWatchdogTimeout(1500*time.Millisecond), relock.WithTimeout(300*time.Millisecond))
		side := b.Client(t)
		mu := c.Lock("orphan")
		held, err := mu.Lock(redistest.Context(t, time.Minute))
		if err != nil {
			t.Fatal(err)
		}
		b.Mini.SetError("ERR injected")
		err = mu.Unlock(held)
		b.Mini.SetError("")
		if err == nil || errors.Is(err, relock.ErrNotHeld) {
			t.Fatalf("Unlock with every command failing: %v; want the failure", err)
		}
		if st := c.WatchdogStats(); st.Holds != 0 {
			t.Errorf("watchdog still renews %d holds after the failed unlock", st.Holds)
		}
		waitDone(t, held, time.Second, "hold after a failed unlock")
		if cause := context.Cause(held); !errors.Is(cause, relock.ErrLeaseLost) {
			t.Errorf("cause %v; want ErrLeaseLost", cause)
		}
		// The key still has the owner: it must go by itself, within one lease.
		if p := redistest.PTTL(t, side, "orphan"); p <= 0 || p > 1500 {
			t.Fatalf("PTTL after the failed unlock = %d; want the lease running out", p)
		}
		redistest.Eventually(t, 5*time.Second, "the orphaned key was kept alive", func() bool {
			n, _ := redistest.Do(t, side, "EXISTS", "orphan").AsInt64()
			return n == 0
		})
	})
}

// An Unlock of a hold that late requests stay with reads the hold count first
// (docs/design.md, late requests); when that fails too, the Unlock failed, and the hold
// leaves the watchdog as any failed unlock's does (docs/reliability.md, "A failed
// unlock"): renewal stops, its context ends with ErrLeaseLost, and the lock frees itself
// within a lease.
func TestFailedUnlockOfALateHoldStopsRenewal(t *testing.T) {
	b := redistest.Mini(t)
	late := redistest.NewLateRequests(b.Client(t))
	c := relocktest.On(t, late, relock.WithWatchdogTimeout(1500*time.Millisecond), relock.WithTimeout(300*time.Millisecond))
	side := b.Client(t)
	ctx := redistest.Context(t, time.Minute)
	mu := c.Lock("late-orphan")
	// A first hold loads the scripts, so that the held request is the acquisition itself.
	if err := mu.Do(ctx, func(context.Context) error { return nil }); err != nil {
		t.Fatal(err)
	}
	// The first request is never sent: it stays one that may still run.
	arrived, _ := late.HoldBroken(script.RLockAcquire().SHA1, "late-orphan")
	held, err := mu.Lock(ctx)
	redistest.Arrived(t, arrived, "Lock", err)
	if err != nil {
		t.Fatalf("Lock whose first request was held up: %v", err)
	}
	b.Mini.SetError("ERR injected")
	err = mu.Unlock(held)
	b.Mini.SetError("")
	if err == nil || errors.Is(err, relock.ErrNotHeld) {
		t.Fatalf("Unlock with every command failing: %v; want the failure", err)
	}
	if st := c.WatchdogStats(); st.Holds != 0 {
		t.Errorf("watchdog still renews %d holds after the failed unlock", st.Holds)
	}
	waitDone(t, held, time.Second, "hold after a failed unlock")
	if cause := context.Cause(held); !errors.Is(cause, relock.ErrLeaseLost) {
		t.Errorf("cause %v; want ErrLeaseLost", cause)
	}
	redistest.Eventually(t, 5*time.Second, "the orphaned key to run out", func() bool {
		n, _ := redistest.Do(t, side, "EXISTS", "late-orphan").AsInt64()
		return n == 0
	})
}

// A re-entry returns the hold's context; the hold's context ends at the release that
// frees the lock, and Close ends the holds still known with ErrClosed.
func TestHoldContext(t *testing.T) {
	redistest.EachWithCluster(t, func(t *testing.T, b *redistest.Backend) {
		c := relocktest.New(t, b)
		mu := c.Lock("scoped")
		parent, cancelParent := context.WithCancel(redistest.Context(t, time.Minute))
		defer cancelParent()
		first, err := mu.Lock(parent)
		if err != nil {
			t.Fatal(err)
		}
		second, err := mu.Lock(first)
		if err != nil {
			t.Fatal(err)
		}
		if second != first {
			t.Error("a re-entry with the hold's context returned another context")
		}
		derived, stop := context.WithTimeout(first, time.Minute)
		defer stop()
		third, err := mu.Lock(derived)
		if err != nil {
			t.Fatal(err)
		}
		for i := 0; i < 2; i++ {
			if err := mu.Unlock(first); err != nil {
				t.Fatal(err)
			}
			if first.Err() != nil {
				t.Fatalf("the hold's context ended with holds left: %v", context.Cause(first))
			}
		}
		if err := mu.Unlock(first); err != nil {
			t.Fatal(err)
		}
		for _, ctx := range []context.Context{first, third} {
			if !errors.Is(context.Cause(ctx), context.Canceled) {
				t.Errorf("after the last Unlock: cause %v; want context.Canceled", context.Cause(ctx))
			}
		}
		if parent.Err() != nil {
			t.Error("Unlock ended the caller's own context")
		}

		kept, err := c.Lock("kept-at-close").Lock(parent)
		if err != nil {
			t.Fatal(err)
		}
		if err := c.Close(); err != nil {
			t.Fatal(err)
		}
		if !errors.Is(context.Cause(kept), relock.ErrClosed) {
			t.Errorf("after Close: cause %v; want ErrClosed", context.Cause(kept))
		}
	})
}

// mustOwner returns the only owner field of a lock hash.
func mustOwner(t *testing.T, rc rueidis.Client, name string) string {
	t.Helper()
	fields, err := redistest.Do(t, rc, "HKEYS", name).AsStrSlice()
	if err != nil || len(fields) != 1 {
		t.Fatalf("HKEYS %s = %v, %v; want one owner", name, fields, err)
	}
	return fields[0]
}

// WithWaitTimeout bounds the wait and nothing else: a held lock makes Lock fail with
// DeadlineExceeded after the bound, and a lock taken within it keeps a live context after.
func TestWaitTimeout(t *testing.T) {
	redistest.EachWithCluster(t, func(t *testing.T, b *redistest.Backend) {
		c1, c2 := relocktest.New(t, b), relocktest.New(t, b)
		ctx := context.Background()
		held, err := c1.Lock("bounded").Lock(ctx, rlock.WithWaitTimeout(100*time.Millisecond))
		if err != nil {
			t.Fatal(err)
		}
		// A context bound far above the option's ends the call should the option be lost.
		waitCtx, cancelWait := context.WithTimeout(ctx, 5*time.Second)
		_, err = c2.Lock("bounded").Lock(waitCtx, rlock.WithWaitTimeout(100*time.Millisecond))
		ctxEnded := waitCtx.Err() != nil
		cancelWait()
		if !errors.Is(err, context.DeadlineExceeded) || ctxEnded {
			t.Fatalf("Lock on a held lock with a 100ms wait bound: %v (the call's 5s context ended: %v); want DeadlineExceeded from the bound", err, ctxEnded)
		}
		time.Sleep(200 * time.Millisecond)
		if held.Err() != nil {
			t.Fatalf("the hold's context ended with the wait bound: %v", context.Cause(held))
		}
		// A bound that is not positive is refused, naming the lock, and the hold is kept:
		// taken for none, it would wait on a held lock without end.
		for _, d := range []time.Duration{0, -time.Nanosecond, -time.Second} {
			bounded, cancel := context.WithTimeout(ctx, 5*time.Second)
			_, err := c2.Lock("bounded").Lock(bounded, rlock.WithWaitTimeout(d))
			cancel()
			if !errors.Is(err, relock.ErrInvalidOption) || !strings.Contains(err.Error(), `"bounded"`) {
				t.Errorf("a wait bound of %v: %v; want ErrInvalidOption naming the lock", d, err)
			}
		}
		if n, err := c1.Lock("bounded").HoldCount(held); n != 1 || err != nil {
			t.Errorf("hold count after the refused calls: %d, %v; want 1", n, err)
		}
		if err := c1.Lock("bounded").Unlock(held); err != nil {
			t.Fatal(err)
		}
	})
}

// A WithLease hold's context ends when its lease runs out, for a holder that watches Done
// as for one that asks Err, even when the watchdog's own rounds are far apart (the default
// 30s lease renews every 10s).
func TestFixedLeaseDoneOnTime(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		c := relocktest.New(t, b)
		held, err := c.Lock("fixed-done").Lock(redistest.Context(t, time.Minute), rlock.WithLease(500*time.Millisecond))
		if err != nil {
			t.Fatal(err)
		}
		waitDone(t, held, 5*time.Second, "a 500ms fixed lease")
		if cause := context.Cause(held); !errors.Is(cause, relock.ErrLeaseLost) {
			t.Errorf("cause %v; want ErrLeaseLost", cause)
		}
	})
}

// An option given to one call is that call's alone (README: a lease "per lock or per
// call"): a later call without options takes the lock with the lock's own settings, not
// with a lease or an invalid option an earlier call was given.
func TestPerCallOptionsStayWithTheirCall(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		c := relocktest.New(t, b) // the watchdog timeout: 30s, renewed
		side := b.Client(t)
		ctx := redistest.Context(t, time.Minute)
		mu := c.Lock("per-call")
		if _, err := mu.Lock(ctx, rlock.WithLease(0)); !errors.Is(err, relock.ErrInvalidLease) {
			t.Fatalf("Lock with a zero lease: %v, want ErrInvalidLease", err)
		}
		held, err := mu.Lock(ctx, rlock.WithLease(5*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		if err := mu.Unlock(held); err != nil {
			t.Fatal(err)
		}
		held, err = mu.Lock(ctx)
		if err != nil {
			t.Fatalf("Lock without options after a call with an invalid one: %v", err)
		}
		defer mu.Unlock(held)
		if p := redistest.PTTL(t, side, "per-call"); p <= 5000 {
			t.Errorf("PTTL %dms after a Lock without options, want the watchdog's 30s: an earlier call's 5s lease stayed with the lock", p)
		}
	})
}
