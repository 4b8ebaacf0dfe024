package countdown_test

import (
	"context"
	"errors"
	"math"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/relock-go/relock"
	"github.com/relock-go/relock/internal/redistest"
	"github.com/relock-go/relock/internal/redistest/javaside"
	"github.com/relock-go/relock/internal/redistest/relocktest"
)

func TestMain(m *testing.M) {
	// Main also stops the Redis Cluster the "cluster" subtests share, and checks for leaked goroutines.
	os.Exit(redistest.Main(m))
}

// channelOf is the channel Redisson's RCountDownLatch publishes on: the whole name in a
// hash tag, whatever the name holds.
func channelOf(name string) string { return "redisson_countdownlatch__channel__{" + name + "}" }

// latchNames returns the latch names a test uses on b: one on a single server, one on
// each master of a cluster, so that every shard runs the latch's scripts.
func latchNames(t *testing.T, b *redistest.Backend, prefix string) []string {
	t.Helper()
	if b.Cluster != nil {
		return b.Cluster.NamesOnEveryMaster(t, prefix)
	}
	return []string{prefix + "0"}
}

// javaOn is a Java service's Redisson client on rc, publishing as relock does on b:
// SPUBLISH with sharded pub/sub, which relock uses on a Redis 7 cluster, else PUBLISH.
func javaOn(b *redistest.Backend, rc rueidis.Client) *javaside.Java {
	return javaside.New(rc, b.Cluster != nil)
}

// state is the latch key as Redis holds it: "string <count> -1" for a latch with a count
// (a string, no expiry), "none <nil> -2" for an open latch (no key).
func state(t *testing.T, rc rueidis.Client, name string) string {
	t.Helper()
	return redistest.Snapshot(t, rc, name)
}

const noKey = "none <nil> -2"

func counted(n int64) string { return "string " + strconv.FormatInt(n, 10) + " -1" }

// wantErr checks that err is target, wrapped as *relock.Error naming the latch name, and
// that its text names it too.
func wantErr(t *testing.T, err, target error, name string) {
	t.Helper()
	if err == nil {
		t.Fatalf("err = nil; want %v", target)
	}
	if !errors.Is(err, target) {
		t.Fatalf("err = %v; want errors.Is %v", err, target)
	}
	var le *relock.Error
	if !errors.As(err, &le) || le.Name != name {
		t.Fatalf("err = %v (%T); want a *relock.Error naming %q", err, err, name)
	}
	if !strings.Contains(err.Error(), name) {
		t.Fatalf("err = %q; want its text to name the latch %q", err, name)
	}
}

// await runs l.Await in the background with a context bounded at d and hands back its
// result.
func await(c *relock.Client, name string, d time.Duration) <-chan error {
	done := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), d)
		defer cancel()
		done <- c.CountDownLatch(name).Await(ctx)
	}()
	return done
}

// stillWaiting fails t if any result arrives on done within a moment: the waiters must
// still be blocked. It asserts no speed: a correct latch passes however slow the machine.
func stillWaiting(t *testing.T, done <-chan error, why string) {
	t.Helper()
	select {
	case err := <-done:
		t.Fatalf("Await returned (err %v) %s", err, why)
	case <-time.After(300 * time.Millisecond):
	}
}

// parked waits until cond says the waiters are parked, and fails t if one of them
// returns from Await meanwhile: the latch, with its count of count, must hold them.
func parked(t *testing.T, done <-chan error, count int, cond func() bool) {
	t.Helper()
	var early error
	returned := false
	ok := redistest.Await(10*time.Second, func() bool {
		select {
		case early = <-done:
			returned = true
			return true
		default:
			return cond()
		}
	})
	switch {
	case returned:
		t.Fatalf("Await returned (err %v) on a latch with a count of %d", early, count)
	case !ok:
		t.Fatalf("after 10s: the waiters never parked")
	}
}

// recorder is a rueidis client that notes the name of every command sent through it, so
// that a test can tell that a relock client sent nothing, on miniredis too.
type recorder struct {
	rueidis.Client
	mu   sync.Mutex
	sent []string
}

func (r *recorder) note(cmds ...[]string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, c := range cmds {
		if len(c) > 0 {
			r.sent = append(r.sent, strings.ToUpper(c[0]))
		}
	}
}

// Sent returns the names of the commands sent so far, in order.
func (r *recorder) Sent() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.sent)
}

func (r *recorder) Do(ctx context.Context, cmd rueidis.Completed) rueidis.RedisResult {
	r.note(cmd.Commands())
	return r.Client.Do(ctx, cmd)
}

func (r *recorder) DoMulti(ctx context.Context, multi ...rueidis.Completed) []rueidis.RedisResult {
	for _, c := range multi {
		r.note(c.Commands())
	}
	return r.Client.DoMulti(ctx, multi...)
}

func (r *recorder) DoCache(ctx context.Context, cmd rueidis.Cacheable, ttl time.Duration) rueidis.RedisResult {
	r.note(cmd.Commands())
	return r.Client.DoCache(ctx, cmd, ttl)
}

func (r *recorder) DoMultiCache(ctx context.Context, multi ...rueidis.CacheableTTL) []rueidis.RedisResult {
	for _, c := range multi {
		r.note(c.Cmd.Commands())
	}
	return r.Client.DoMultiCache(ctx, multi...)
}

func (r *recorder) DoStream(ctx context.Context, cmd rueidis.Completed) rueidis.RedisResultStream {
	r.note(cmd.Commands())
	return r.Client.DoStream(ctx, cmd)
}

func (r *recorder) DoMultiStream(ctx context.Context, multi ...rueidis.Completed) rueidis.MultiRedisResultStream {
	for _, c := range multi {
		r.note(c.Commands())
	}
	return r.Client.DoMultiStream(ctx, multi...)
}

func (r *recorder) Receive(ctx context.Context, subscribe rueidis.Completed, fn func(rueidis.PubSubMessage)) error {
	r.note(subscribe.Commands())
	return r.Client.Receive(ctx, subscribe, fn)
}

// recordedClient returns a relock client on a recorder of a new rueidis client of b,
// closed at t's cleanup.
func recordedClient(t *testing.T, b *redistest.Backend, opts ...relock.Option) (*relock.Client, *recorder) {
	t.Helper()
	rec := &recorder{Client: b.Client(t)}
	c := relocktest.On(t, rec, opts...)
	return c, rec
}

// serverCalls returns a function that reads the commands b's servers have run (INFO
// commandstats, summed over a cluster's masters), or nil on miniredis, which has none.
func serverCalls(t *testing.T, b *redistest.Backend) func() map[string]int64 {
	t.Helper()
	if b.Mini != nil {
		return nil
	}
	cc := b.Commands(t)
	return func() map[string]int64 { return cc.Calls(t) }
}

// noise is what servers run that is no latch traffic: the harness's INFO, connection
// handshakes and keep-alives, a cluster client's topology queries, replication.
func noise(cmd string) bool {
	switch cmd {
	case "info", "ping", "hello", "readonly", "auth", "select", "replconf", "psync":
		return true
	}
	return strings.HasPrefix(cmd, "client|") || strings.HasPrefix(cmd, "cluster|") || strings.HasPrefix(cmd, "command|")
}

// ran returns the commands, noise left out, that after counts more often than before.
func ran(before, after map[string]int64) []string {
	var cmds []string
	for cmd, n := range after {
		if !noise(cmd) && n > before[cmd] {
			cmds = append(cmds, cmd+" ×"+strconv.FormatInt(n-before[cmd], 10))
		}
	}
	slices.Sort(cmds)
	return cmds
}

// TrySetCount, CountDown and Count keep Redisson's data: a string key holding the count,
// without expiry, deleted by the count down that reaches zero. A second TrySetCount on a
// live latch changes nothing and reports false; once open, the latch takes a new count.
// Counts are exact beyond 2^53 and a count Redisson wrote is read as it is.
//
// Guards against another layout (a hash, an expiry, a key left at "0"), a TrySetCount that
// overwrites a live count, a count down that does not delete the key at zero or creates
// one on an open latch ("-1"), a latch that cannot be set again after opening, and a count
// that passes through a Lua number (a double) on its way to or from Redis.
func TestDataLayout(t *testing.T) {
	redistest.EachWithCluster(t, func(t *testing.T, b *redistest.Backend) {
		c := relocktest.New(t, b)
		side := b.Client(t)
		ctx := context.Background()
		mustCount := func(t *testing.T, name string, want int64) {
			t.Helper()
			if got, err := c.CountDownLatch(name).Count(ctx); got != want || err != nil {
				t.Fatalf("Count = %d, %v; want %d", got, err, want)
			}
		}
		mustState := func(t *testing.T, name, want, after string) {
			t.Helper()
			if got := state(t, side, name); got != want {
				t.Fatalf("after %s the key is %q; want %q", after, got, want)
			}
		}
		mustCountDown := func(t *testing.T, name string) {
			t.Helper()
			if err := c.CountDownLatch(name).CountDown(ctx); err != nil {
				t.Fatalf("CountDown: %v", err)
			}
		}
		for _, name := range latchNames(t, b, "latch:data:") {
			t.Run(name, func(t *testing.T) {
				l := c.CountDownLatch(name)
				if l.Name() != name {
					t.Fatalf("Name() = %q; want %q", l.Name(), name)
				}
				mustCount(t, name, 0)
				if ok, err := l.TrySetCount(ctx, 3); !ok || err != nil {
					t.Fatalf("TrySetCount(3) on an open latch = %v, %v; want true", ok, err)
				}
				mustState(t, name, counted(3), "TrySetCount(3)")
				mustCount(t, name, 3)
				if ok, err := l.TrySetCount(ctx, 5); ok || err != nil {
					t.Fatalf("TrySetCount(5) on a live latch = %v, %v; want false", ok, err)
				}
				mustState(t, name, counted(3), "a second TrySetCount")
				mustCountDown(t, name)
				mustState(t, name, counted(2), "a count down from 3")
				mustCount(t, name, 2)
				mustCountDown(t, name)
				mustState(t, name, counted(1), "a count down from 2")
				mustCountDown(t, name)
				mustState(t, name, noKey, "the count down to zero")
				mustCount(t, name, 0)
				// An open latch stays open.
				mustCountDown(t, name)
				mustState(t, name, noKey, "a count down of an open latch")
				mustCount(t, name, 0)
				// And can be used again.
				if ok, err := l.TrySetCount(ctx, 2); !ok || err != nil {
					t.Fatalf("TrySetCount(2) after the latch opened = %v, %v; want true", ok, err)
				}
				mustState(t, name, counted(2), "TrySetCount(2) on the reopened latch")
				mustCount(t, name, 2)
			})
		}

		t.Run("beyond 2^53", func(t *testing.T) {
			const name = "latch:big"
			const big = int64(1)<<53 + 1 // no double holds it
			if ok, err := c.CountDownLatch(name).TrySetCount(ctx, big); !ok || err != nil {
				t.Fatalf("TrySetCount(%d) = %v, %v; want true", big, ok, err)
			}
			mustState(t, name, counted(big), "TrySetCount(2^53+1)")
			mustCount(t, name, big)
			mustCountDown(t, name)
			mustState(t, name, counted(big-1), "a count down from 2^53+1")
			mustCount(t, name, big-1)
			if ok, err := c.CountDownLatch("latch:max").TrySetCount(ctx, math.MaxInt64); !ok || err != nil {
				t.Fatalf("TrySetCount(MaxInt64) = %v, %v; want true", ok, err)
			}
			mustState(t, "latch:max", counted(math.MaxInt64), "TrySetCount(MaxInt64)")
			mustCount(t, "latch:max", math.MaxInt64)
		})

		t.Run("written by Redisson", func(t *testing.T) {
			const name = "latch:java"
			if ok, err := javaOn(b, side).TrySetCount(ctx, name, 7); !ok || err != nil {
				t.Fatalf("Redisson's trySetCount = %v, %v; want true", ok, err)
			}
			mustCount(t, name, 7)
			if ok, err := c.CountDownLatch(name).TrySetCount(ctx, 2); ok || err != nil {
				t.Fatalf("TrySetCount on Redisson's live latch = %v, %v; want false", ok, err)
			}
			mustCountDown(t, name)
			mustState(t, name, counted(6), "a count down of Redisson's latch")
			// And Redisson reads relock's count: its count down goes on from there.
			if left, err := javaOn(b, side).CountDown(ctx, name); left != 5 || err != nil {
				t.Fatalf("Redisson's countDown = %d, %v; want 5 left", left, err)
			}
			mustCount(t, name, 5)
		})
	})
}

// Await returns at once on an open latch; on a closed one it blocks, through count downs
// that leave a count, until the count down that opens it, made by another client, wakes
// every waiter: several in each of several clients. The watchdog timeout is a minute, so
// the once-per-timeout look cannot stand in for the wake-up.
//
// Guards against an Await that returns while the count is above zero, a wake-up on a count
// down that leaves a count, a wake-up that reaches one waiter (or one client) only, and
// one that reaches only the client that counted down.
func TestAwaitWokenByCountDownOfAnotherClient(t *testing.T) {
	const clients, perClient = 3, 2
	redistest.EachWithCluster(t, func(t *testing.T, b *redistest.Backend) {
		opt := relock.WithWatchdogTimeout(time.Minute)
		counter := relocktest.New(t, b, opt)
		var waiters []*relock.Client
		for range clients {
			waiters = append(waiters, relocktest.New(t, b, opt))
		}
		ctx := context.Background()
		for _, name := range latchNames(t, b, "latch:wake:") {
			t.Run(name, func(t *testing.T) {
				// Open: no key.
				if err := redistest.Recv(t, await(waiters[0], name, 10*time.Second), 15*time.Second, "Await on an open latch"); err != nil {
					t.Fatalf("Await on an open latch: %v", err)
				}
				if ok, err := counter.CountDownLatch(name).TrySetCount(ctx, 2); !ok || err != nil {
					t.Fatalf("TrySetCount(2) = %v, %v", ok, err)
				}
				done := make(chan error, clients*perClient)
				for _, w := range waiters {
					for range perClient {
						go func() { done <- <-await(w, name, 30*time.Second) }()
					}
				}
				parked(t, done, 2, func() bool { return relocktest.Waiting(waiters...) == clients*perClient })
				if err := counter.CountDownLatch(name).CountDown(ctx); err != nil {
					t.Fatal(err)
				}
				stillWaiting(t, done, "after a count down that left a count of 1")
				if err := counter.CountDownLatch(name).CountDown(ctx); err != nil {
					t.Fatal(err)
				}
				for range clients * perClient {
					if err := redistest.Recv(t, done, 15*time.Second, "a waiter's wake-up by the count down to zero"); err != nil {
						t.Fatalf("Await: %v", err)
					}
				}
				// Opened by a count down, the latch lets Await through at once again.
				if err := redistest.Recv(t, await(waiters[1], name, 10*time.Second), 15*time.Second, "Await on a latch counted down to zero"); err != nil {
					t.Fatalf("Await on an opened latch: %v", err)
				}
			})
		}
	})
}

// While it waits, Await sends nothing to Redis: no GET, no script, however long the wait
// (within the watchdog timeout, a minute here). It is woken by the message.
//
// Guards against an Await that polls the count instead of waiting for the message.
func TestAwaitSendsNothingWhileWaiting(t *testing.T) {
	redistest.EachWithCluster(t, func(t *testing.T, b *redistest.Backend) {
		const name = "latch:quiet"
		waiter, rec := recordedClient(t, b, relock.WithWatchdogTimeout(time.Minute))
		counter := relocktest.New(t, b)
		calls := serverCalls(t, b)
		ctx := context.Background()
		if ok, err := counter.CountDownLatch(name).TrySetCount(ctx, 1); !ok || err != nil {
			t.Fatalf("TrySetCount(1) = %v, %v", ok, err)
		}
		done := await(waiter, name, 30*time.Second)
		parked(t, done, 1, func() bool { return waiter.PubSubStats().Waiting == 1 })
		sentBefore := rec.Sent()
		var before map[string]int64
		if calls != nil {
			before = calls()
		}
		time.Sleep(1500 * time.Millisecond)
		if sent := rec.Sent(); len(sent) != len(sentBefore) {
			t.Errorf("the waiting client sent %q while it waited", sent[len(sentBefore):])
		}
		if calls != nil {
			if cmds := ran(before, calls()); len(cmds) > 0 {
				t.Errorf("the servers ran %q while the latch's waiter waited", cmds)
			}
		}
		if err := counter.CountDownLatch(name).CountDown(ctx); err != nil {
			t.Fatal(err)
		}
		if err := redistest.Recv(t, done, 15*time.Second, "the waiter's wake-up"); err != nil {
			t.Fatalf("Await: %v", err)
		}
	})
}

// A latch deleted without a message (a raw DEL, as an operator or an expiry would) is
// noticed by its waiters within about one watchdog timeout: they look again once per
// timeout. With a 1s timeout, the test allows ten.
//
// Guards against an Await that waits for the message alone, and so hangs when it never
// comes.
func TestAwaitNoticesLatchDeletedWithoutMessage(t *testing.T) {
	redistest.EachWithCluster(t, func(t *testing.T, b *redistest.Backend) {
		const name = "latch:deleted"
		setter := relocktest.New(t, b)
		waiter := relocktest.New(t, b, relock.WithWatchdogTimeout(time.Second))
		side := b.Client(t)
		ctx := context.Background()
		if ok, err := setter.CountDownLatch(name).TrySetCount(ctx, 5); !ok || err != nil {
			t.Fatalf("TrySetCount(5) = %v, %v", ok, err)
		}
		done := make(chan error, 2)
		for range 2 {
			go func() { done <- <-await(waiter, name, 30*time.Second) }()
		}
		parked(t, done, 5, func() bool { return waiter.PubSubStats().Waiting == 2 })
		redistest.MustDo(t, side, "DEL", name)
		for range 2 {
			if err := redistest.Recv(t, done, 10*time.Second, "a waiter noticing the deleted latch (watchdog timeout 1s)"); err != nil {
				t.Fatalf("Await: %v", err)
			}
		}
	})
}

// Await ends with ctx: a deadline or a cancellation while it waits returns an error for
// which errors.Is(err, ctx.Err()) holds, and the waiter is gone. A ctx that has already
// ended makes Await fail at once without a word to Redis, whether or not the latch is open.
// CountDown, on the other hand, works with an ended ctx.
//
// Guards against an Await that ignores ctx (it would hang to the test's bound), one that
// loses ctx's error, one that asks Redis with a dead ctx, and a CountDown that drops the
// count down when its caller's ctx has ended.
func TestAwaitContext(t *testing.T) {
	redistest.EachWithCluster(t, func(t *testing.T, b *redistest.Backend) {
		const closed, open = "latch:ctx:closed", "latch:ctx:open"
		c, rec := recordedClient(t, b, relock.WithWatchdogTimeout(time.Minute))
		side := b.Client(t)
		ctx := context.Background()
		if ok, err := c.CountDownLatch(closed).TrySetCount(ctx, 2); !ok || err != nil {
			t.Fatalf("TrySetCount(2) = %v, %v", ok, err)
		}

		t.Run("deadline while waiting", func(t *testing.T) {
			wctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
			defer cancel()
			done := make(chan error, 1)
			go func() { done <- c.CountDownLatch(closed).Await(wctx) }()
			err := redistest.Recv(t, done, 15*time.Second, "Await past its ctx's deadline")
			if err == nil || !errors.Is(err, wctx.Err()) || !errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("Await = %v; want errors.Is(err, %v)", err, wctx.Err())
			}
		})

		t.Run("cancel while waiting", func(t *testing.T) {
			wctx, cancel := context.WithCancel(ctx)
			defer cancel()
			done := make(chan error, 1)
			go func() { done <- c.CountDownLatch(closed).Await(wctx) }()
			parked(t, done, 2, func() bool { return c.PubSubStats().Waiting == 1 })
			cancel()
			err := redistest.Recv(t, done, 15*time.Second, "Await after its ctx was cancelled")
			if err == nil || !errors.Is(err, wctx.Err()) || !errors.Is(err, context.Canceled) {
				t.Fatalf("Await = %v; want errors.Is(err, %v)", err, wctx.Err())
			}
			redistest.Eventually(t, 10*time.Second, "the cancelled waiter stayed parked", func() bool { return c.PubSubStats().Waiting == 0 })
		})
		if got := state(t, side, closed); got != counted(2) {
			t.Fatalf("after the waits the latch is %q; want %q", got, counted(2))
		}

		t.Run("already ended", func(t *testing.T) {
			cancelled, cancel := context.WithCancel(ctx)
			cancel()
			expired, cancel2 := context.WithDeadline(ctx, time.Now().Add(-time.Second))
			defer cancel2()
			calls := serverCalls(t, b)
			var before map[string]int64
			if calls != nil {
				before = calls()
			}
			sentBefore := rec.Sent()
			statsBefore := c.PubSubStats()
			for _, name := range []string{closed, open} {
				for _, dead := range []context.Context{cancelled, expired} {
					err := c.CountDownLatch(name).Await(dead)
					if err == nil || !errors.Is(err, dead.Err()) {
						t.Errorf("Await(%s) with an ended ctx (%v) = %v; want errors.Is(err, ctx.Err())", name, dead.Err(), err)
					}
				}
			}
			if sent := rec.Sent(); len(sent) != len(sentBefore) {
				t.Errorf("Await with an ended ctx sent %q", sent[len(sentBefore):])
			}
			if st := c.PubSubStats(); st.Channels != statsBefore.Channels || st.Waiting != 0 {
				t.Errorf("Await with an ended ctx left pub/sub at %+v (before: %+v)", st, statsBefore)
			}
			if calls != nil {
				if cmds := ran(before, calls()); len(cmds) > 0 {
					t.Errorf("the servers ran %q for Awaits with an ended ctx", cmds)
				}
			}
		})

		t.Run("CountDown with an ended ctx", func(t *testing.T) {
			cancelled, cancel := context.WithCancel(ctx)
			cancel()
			if err := c.CountDownLatch(closed).CountDown(cancelled); err != nil {
				t.Fatalf("CountDown with a cancelled ctx: %v", err)
			}
			if got := state(t, side, closed); got != counted(1) {
				t.Fatalf("after CountDown with a cancelled ctx the latch is %q; want %q", got, counted(1))
			}
		})
	})
}

// A client's Close ends its waiters with ErrClosed, and every later call of its latches
// fails with ErrClosed; the latch's data stays as it was.
//
// Guards against waiters left hanging by Close, and a closed client still at work.
func TestClose(t *testing.T) {
	redistest.EachWithCluster(t, func(t *testing.T, b *redistest.Backend) {
		const name = "latch:close"
		setter := relocktest.New(t, b)
		c := relocktest.New(t, b, relock.WithWatchdogTimeout(time.Minute))
		side := b.Client(t)
		ctx := context.Background()
		if ok, err := setter.CountDownLatch(name).TrySetCount(ctx, 1); !ok || err != nil {
			t.Fatalf("TrySetCount(1) = %v, %v", ok, err)
		}
		done := await(c, name, 30*time.Second)
		parked(t, done, 1, func() bool { return c.PubSubStats().Waiting == 1 })
		if err := c.Close(); err != nil {
			t.Fatalf("Close: %v", err)
		}
		wantErr(t, redistest.Recv(t, done, 15*time.Second, "the waiter's end at Close"), relock.ErrClosed, name)
		l := c.CountDownLatch(name)
		_, err := l.TrySetCount(ctx, 3)
		wantErr(t, err, relock.ErrClosed, name)
		wantErr(t, l.CountDown(ctx), relock.ErrClosed, name)
		_, err = l.Count(ctx)
		wantErr(t, err, relock.ErrClosed, name)
		wantErr(t, l.Await(redistest.Context(t, 30*time.Second)), relock.ErrClosed, name)
		if got := state(t, side, name); got != counted(1) {
			t.Fatalf("after Close the latch is %q; want %q", got, counted(1))
		}
	})
}

// latchOps are the latch's methods, each returning its error only.
var latchOps = []struct {
	name string
	call func(ctx context.Context, c *relock.Client, name string) error
}{
	{"TrySetCount", func(ctx context.Context, c *relock.Client, n string) error {
		ok, err := c.CountDownLatch(n).TrySetCount(ctx, 2)
		if ok && err == nil {
			return errors.New("TrySetCount reported true")
		}
		return err
	}},
	{"CountDown", func(ctx context.Context, c *relock.Client, n string) error { return c.CountDownLatch(n).CountDown(ctx) }},
	{"Count", func(ctx context.Context, c *relock.Client, n string) error {
		_, err := c.CountDownLatch(n).Count(ctx)
		return err
	}},
	{"Await", func(ctx context.Context, c *relock.Client, n string) error { return c.CountDownLatch(n).Await(ctx) }},
}

// The latch refuses what it documents: a count below one (ErrInvalidCount), a key that
// holds anything but a whole number (ErrWrongType, for every method, Await included, which
// must not wait on it), a name with braces or no name (ErrInvalidName). Each error names the
// latch, nothing panics, and nothing is written: the foreign data keeps its type, value and
// expiry, a live count stays, an invalid name leaves no key behind.
//
// Guards against a count of 0 or less reaching Redis (a latch that never closes or counts
// from below zero), scripts that DECR or overwrite another application's data, an Await
// that blocks on such data until its ctx ends, and names whose channel would not be
// Redisson's (its hash tag around a name with braces) or share a slot with the key, and a
// count refused before the name, which hides the name's error.
func TestBadInput(t *testing.T) {
	redistest.EachWithCluster(t, func(t *testing.T, b *redistest.Backend) {
		c := relocktest.New(t, b, relock.WithWatchdogTimeout(time.Minute))
		side := b.Client(t)
		ctx := context.Background()
		t.Run("count", func(t *testing.T) {
			const live = "latch:bad-count:live"
			if ok, err := c.CountDownLatch(live).TrySetCount(ctx, 3); !ok || err != nil {
				t.Fatalf("TrySetCount(3) = %v, %v", ok, err)
			}
			for _, n := range []int64{0, -1, math.MinInt64} {
				for _, name := range []string{"latch:bad-count:open", live} {
					redistest.Unchanged(t, side, name, func() {
						ok, err := c.CountDownLatch(name).TrySetCount(ctx, n)
						if ok {
							t.Errorf("TrySetCount(%d) on %s reported true", n, name)
						}
						wantErr(t, err, relock.ErrInvalidCount, name)
					})
				}
			}
		})

		t.Run("wrong type", func(t *testing.T) {
			for i, data := range []struct {
				what  string
				write []string // the command that writes it, with the key second
			}{
				{"hash", []string{"HSET", "", "count", "3"}},
				{"list", []string{"RPUSH", "", "3", "2"}},
				{"set", []string{"SADD", "", "3"}},
				{"word", []string{"SET", "", "abc"}},
				{"fraction", []string{"SET", "", "1.5"}},
				{"empty string", []string{"SET", "", ""}},
			} {
				t.Run(data.what, func(t *testing.T) {
					key := "latch:foreign:" + strconv.Itoa(i)
					args := slices.Clone(data.write)
					args[1] = key
					redistest.MustDo(t, side, args...)
					redistest.MustDo(t, side, "PEXPIRE", key, "600000")
					for _, op := range latchOps {
						t.Run(op.name, func(t *testing.T) {
							redistest.Unchanged(t, side, key, func() {
								wantErr(t, op.call(redistest.Context(t, 10*time.Second), c, key), relock.ErrWrongType, key)
							})
						})
					}
				})
			}
		})

		t.Run("name", func(t *testing.T) {
			for _, name := range []string{"", "a{b}c", "{a}b", "{x}", "a{b", "a}b", "{}", "x{}"} {
				for _, op := range latchOps {
					err := op.call(redistest.Context(t, 10*time.Second), c, name)
					if err == nil {
						t.Fatalf("%s on %q: nil; want ErrInvalidName", op.name, name)
					}
					if !errors.Is(err, relock.ErrInvalidName) {
						t.Fatalf("%s on %q: %v; want ErrInvalidName", op.name, name, err)
					}
					var le *relock.Error
					if !errors.As(err, &le) || le.Name != name {
						t.Fatalf("%s on %q: %v (%T); want a *relock.Error naming it", op.name, name, err, err)
					}
				}
				if got := c.CountDownLatch(name).Name(); got != name {
					t.Fatalf("Name() = %q; want %q", got, name)
				}
				// Every method of a latch with an invalid name fails with ErrInvalidName,
				// whatever else is wrong with the call: a count below one too.
				_, err := c.CountDownLatch(name).TrySetCount(ctx, 0)
				if !errors.Is(err, relock.ErrInvalidName) {
					t.Fatalf("TrySetCount(0) on %q: %v; want ErrInvalidName", name, err)
				}
			}
			for _, k := range b.Keys(t, side, "*") {
				if !strings.HasPrefix(k, "latch:") {
					t.Errorf("key %q written for an invalid name", k)
				}
			}
		})
	})
}

// relock and Redisson share latches: Redisson's trySetCount closes a latch that relock
// sees closed, and Redisson's count down that reaches zero (its "0" on the latch's
// channel, SPUBLISH on a cluster) wakes relock's waiters, in several clients.
//
// Guards against relock listening on another channel than Redisson's, with another
// subscribe command than the publisher's, or for another message than "0".
func TestRedissonCountDownWakesRelockWaiters(t *testing.T) {
	redistest.EachWithCluster(t, func(t *testing.T, b *redistest.Backend) {
		opt := relock.WithWatchdogTimeout(time.Minute)
		waiters := []*relock.Client{relocktest.New(t, b, opt), relocktest.New(t, b, opt)}
		java := javaOn(b, b.Client(t))
		ctx := context.Background()
		for _, name := range latchNames(t, b, "latch:from-java:") {
			t.Run(name, func(t *testing.T) {
				if ok, err := java.TrySetCount(ctx, name, 2); !ok || err != nil {
					t.Fatalf("Redisson's trySetCount = %v, %v; want true", ok, err)
				}
				done := make(chan error, 4)
				for _, w := range waiters {
					for range 2 {
						go func() { done <- <-await(w, name, 30*time.Second) }()
					}
				}
				parked(t, done, 2, func() bool { return relocktest.Waiting(waiters...) == 4 })
				if left, err := java.CountDown(ctx, name); left != 1 || err != nil {
					t.Fatalf("Redisson's countDown = %d, %v; want 1 left", left, err)
				}
				stillWaiting(t, done, "after Redisson's count down left a count of 1")
				if left, err := java.CountDown(ctx, name); left != 0 || err != nil {
					t.Fatalf("Redisson's countDown = %d, %v; want 0 left", left, err)
				}
				for range 4 {
					if err := redistest.Recv(t, done, 15*time.Second, "a relock waiter's wake-up by Redisson's count down to zero"); err != nil {
						t.Fatalf("Await: %v", err)
					}
				}
			})
		}
	})
}

// relock's latch speaks to Redisson's subscribers as Redisson does: TrySetCount publishes
// "1" (NEW_COUNT_MESSAGE), the count down that reaches zero publishes "0"
// (ZERO_COUNT_MESSAGE), on redisson_countdownlatch__channel__{name}, with SPUBLISH on a
// cluster; a count down that leaves a count, a TrySetCount that finds a count, and a count
// down of an open latch publish nothing. A Redisson waiter that hears "0" finds no count.
//
// Guards against another channel or publish command, other messages (a Redisson client
// decodes each as a Java long), a message on each count down, a count down of an open
// latch that reports it opened again, and a "0" sent before the key is gone.
func TestRelockLatchPublishesRedissonMessages(t *testing.T) {
	redistest.EachWithCluster(t, func(t *testing.T, b *redistest.Backend) {
		c := relocktest.New(t, b)
		java := b.Client(t)
		ctx := context.Background()
		for _, name := range latchNames(t, b, "latch:to-java:") {
			t.Run(name, func(t *testing.T) {
				l := c.CountDownLatch(name)
				heard := b.Listen(t, channelOf(name))
				// Counted by the messages heard: each step that publishes is followed by
				// a wait for its message, so a later stray message cannot pass for it.
				wantHeard := func(t *testing.T, want []string, after string) {
					t.Helper()
					redistest.Eventually(t, 10*time.Second, "the message of "+after, func() bool { return len(heard.Messages()) >= len(want) })
					if got := heard.Messages(); !slices.Equal(got, want) {
						t.Fatalf("after %s Redisson's subscriber heard %q; want %q", after, got, want)
					}
				}
				if ok, err := l.TrySetCount(ctx, 2); !ok || err != nil {
					t.Fatalf("TrySetCount(2) = %v, %v", ok, err)
				}
				wantHeard(t, []string{"1"}, "TrySetCount")
				if ok, err := l.TrySetCount(ctx, 4); ok || err != nil {
					t.Fatalf("TrySetCount(4) on a live latch = %v, %v; want false", ok, err)
				}
				if err := l.CountDown(ctx); err != nil {
					t.Fatal(err)
				}
				if err := l.CountDown(ctx); err != nil {
					t.Fatal(err)
				}
				wantHeard(t, []string{"1", "0"}, "the count down to zero")
				// What a Redisson waiter does on "0": it reads the count, and must find none.
				if v, err := redistest.Do(t, java, "GET", name).ToString(); !rueidis.IsRedisNil(err) {
					t.Fatalf("GET after the \"0\": %q, %v; want no key", v, err)
				}
				if err := l.CountDown(ctx); err != nil {
					t.Fatal(err)
				}
				if ok, err := l.TrySetCount(ctx, 1); !ok || err != nil {
					t.Fatalf("TrySetCount(1) after opening = %v, %v", ok, err)
				}
				wantHeard(t, []string{"1", "0", "1"}, "a count down of the open latch and a new TrySetCount")
			})
		}
	})
}

// Count downs from many goroutines in several clients at once each count once: the latch
// opens after exactly its count of them, with one "0".
//
// Guards against a count down made of a read and a write in separate calls, which loses
// count downs (the latch never opens) or opens it twice.
func TestConcurrentCountDowns(t *testing.T) {
	const n = 30
	redistest.EachWithCluster(t, func(t *testing.T, b *redistest.Backend) {
		const name = "latch:concurrent"
		clients := []*relock.Client{relocktest.New(t, b), relocktest.New(t, b), relocktest.New(t, b)}
		side := b.Client(t)
		heard := b.Listen(t, channelOf(name))
		ctx := context.Background()
		if ok, err := clients[0].CountDownLatch(name).TrySetCount(ctx, n); !ok || err != nil {
			t.Fatalf("TrySetCount(%d) = %v, %v", n, ok, err)
		}
		errs := make(chan error, n)
		start := make(chan struct{})
		for i := range n {
			go func() {
				<-start
				errs <- clients[i%len(clients)].CountDownLatch(name).CountDown(ctx)
			}()
		}
		close(start)
		for range n {
			if err := redistest.Recv(t, errs, 15*time.Second, "a count down"); err != nil {
				t.Fatalf("CountDown: %v", err)
			}
		}
		if got := state(t, side, name); got != noKey {
			t.Fatalf("after %d count downs of a latch of %d the key is %q; want none", n, n, got)
		}
		// A marker after the count downs: everything they published is heard before it.
		if ok, err := clients[0].CountDownLatch(name).TrySetCount(ctx, 1); !ok || err != nil {
			t.Fatalf("TrySetCount(1) = %v, %v", ok, err)
		}
		redistest.Eventually(t, 10*time.Second, "the marker's \"1\"", func() bool { return len(heard.Messages()) >= 3 })
		if got := heard.Messages(); !slices.Equal(got, []string{"1", "0", "1"}) {
			t.Fatalf("heard %q; want \"1\", one \"0\", and the marker's \"1\"", got)
		}
	})
}

// A string that Redis's DECR, and so Redisson's countDown, cannot count is no count for
// any of the latch's methods: ErrWrongType from each, Await included (it must not wait on a
// latch nobody can count down), and the key untouched. Such are a count with a sign or
// leading zeros, which Redis refuses as integers, and one beyond int64.
//
// Guards against the methods disagreeing on what a count is: one reading "+5" as 5 (and
// Await waiting on it) while CountDown refuses it, or a script that takes an out-of-range
// count for a live latch (TrySetCount reporting a count, CountDown failing with a raw
// error instead of ErrWrongType).
func TestCountNotARedisInteger(t *testing.T) {
	redistest.EachWithCluster(t, func(t *testing.T, b *redistest.Backend) {
		c := relocktest.New(t, b, relock.WithWatchdogTimeout(time.Minute))
		side := b.Client(t)
		for i, v := range []string{"+5", "05", "99999999999999999999"} {
			t.Run(v, func(t *testing.T) {
				key := "latch:not-int:" + strconv.Itoa(i)
				redistest.MustDo(t, side, "SET", key, v)
				if err := redistest.Do(t, side, "DECR", key).Error(); err == nil && b.Mini == nil {
					t.Fatalf("Redis counted %q down; this case is a count after all", v)
				}
				redistest.MustDo(t, side, "SET", key, v)
				want := redistest.Snapshot(t, side, key)
				for _, op := range latchOps {
					ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
					err := op.call(ctx, c, key)
					cancel()
					if got := redistest.Snapshot(t, side, key); got != want {
						t.Fatalf("%s changed the key: %s; want %s", op.name, got, want)
					}
					if !errors.Is(err, relock.ErrWrongType) {
						t.Fatalf("%s on a key holding %q: %v; want ErrWrongType", op.name, v, err)
					}
				}
			})
		}
	})
}

// A latch whose key holds a count of zero or below (written so by another client) is
// open, and a CountDown on it deletes the key, as Redisson's countDown does: the latch
// then takes a new count.
func TestCountDownClearsCountAtOrBelowZero(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		c := relocktest.New(t, b)
		side := b.Client(t)
		ctx := context.Background()
		for _, v := range []string{"0", "-3"} {
			name := "latch:spent:" + v
			redistest.MustDo(t, side, "SET", name, v)
			if err := c.CountDownLatch(name).CountDown(ctx); err != nil {
				t.Fatalf("CountDown on a count of %s: %v", v, err)
			}
			if got := state(t, side, name); got != noKey {
				t.Fatalf("after CountDown on a count of %s the key is %q; want none", v, got)
			}
			if ok, err := c.CountDownLatch(name).TrySetCount(ctx, 2); !ok || err != nil {
				t.Fatalf("TrySetCount(2) after CountDown on a count of %s = %v, %v; want true, nil", v, ok, err)
			}
		}
	})
}

// A latch whose key holds a count below zero (written so by another client) is open to
// every reader: Count reports 0, as for any open latch, and Await returns at once. Guards
// against a Count that passes the stored number through, reporting an open latch's
// count as below zero.
func TestSpentLatchReadsAsOpen(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		c := relocktest.New(t, b, relock.WithWatchdogTimeout(time.Minute))
		side := b.Client(t)
		ctx := context.Background()
		for _, v := range []string{"0", "-3"} {
			name := "latch:spent-read:" + v
			redistest.MustDo(t, side, "SET", name, v)
			if n, err := c.CountDownLatch(name).Count(ctx); n != 0 || err != nil {
				t.Fatalf("Count of a latch holding %s = %d, %v; want 0 (open), nil", v, n, err)
			}
			if err := c.CountDownLatch(name).Await(redistest.Context(t, 15*time.Second)); err != nil {
				t.Fatalf("Await on a latch holding %s: %v; want nil at once (open)", v, err)
			}
		}
	})
}

// A latch whose key holds a count of zero or below (written so by another client) is
// open to every reader (TestSpentLatchReadsAsOpen), and TrySetCount closes an open latch
// with a new count: it sets the count over the spent one and answers true.
//
// Guards against a TrySetCount that looks at whether the key exists rather than at the
// count: it answered false on a latch that Count and Await call open, for as long as
// nobody counted it down.
func TestTrySetCountOverSpentCount(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		c := relocktest.New(t, b, relock.WithWatchdogTimeout(time.Minute))
		side := b.Client(t)
		ctx := context.Background()
		for _, v := range []string{"0", "-3"} {
			name := "latch:spent-set:" + v
			redistest.MustDo(t, side, "SET", name, v)
			l := c.CountDownLatch(name)
			if ok, err := l.TrySetCount(ctx, 2); !ok || err != nil {
				t.Fatalf("TrySetCount(2) on a latch holding %s (open) = %v, %v; want true, nil", v, ok, err)
			}
			if got := state(t, side, name); got != counted(2) {
				t.Fatalf("after TrySetCount(2) on a latch holding %s the key is %q; want %q", v, got, counted(2))
			}
			if n, err := l.Count(ctx); n != 2 || err != nil {
				t.Fatalf("Count = %d, %v; want 2, nil", n, err)
			}
		}
	})
}

// A latch counted down to its last count is still closed: TrySetCount leaves it alone and
// reports false, as on any latch that has a count (a count of 1 is not spent).
func TestTrySetCountRefusedAtTheLastCount(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		c := relocktest.New(t, b, relock.WithWatchdogTimeout(time.Minute))
		side := b.Client(t)
		ctx := redistest.Context(t, 10*time.Second)
		name := "latch:last-count"
		l := c.CountDownLatch(name)
		if ok, err := l.TrySetCount(ctx, 2); !ok || err != nil {
			t.Fatalf("TrySetCount(2) on an open latch = %v, %v; want true, nil", ok, err)
		}
		if err := l.CountDown(ctx); err != nil {
			t.Fatal(err)
		}
		if ok, err := l.TrySetCount(ctx, 5); ok || err != nil {
			t.Fatalf("TrySetCount(5) on a latch at its last count = %v, %v; want false, nil", ok, err)
		}
		if got := state(t, side, name); got != counted(1) {
			t.Fatalf("after TrySetCount(5) on a latch at its last count the key is %q; want %q", got, counted(1))
		}
	})
}

// racer is a rueidis client that runs hook once, right after the first GET of key has
// been answered and before its reply reaches the caller: the latch changes between a
// waiter's read of the count and its subscription.
type racer struct {
	rueidis.Client
	key  string
	once sync.Once
	hook func()
}

func (r *racer) Do(ctx context.Context, cmd rueidis.Completed) rueidis.RedisResult {
	// Read the command before sending it: rueidis recycles it once sent.
	args := cmd.Commands()
	read := len(args) == 2 && strings.EqualFold(args[0], "GET") && args[1] == r.key
	res := r.Client.Do(ctx, cmd)
	if read {
		r.once.Do(r.hook)
	}
	return res
}

// The count down that opens the latch after Await has read a count above zero, but
// before Await is subscribed to the channel (so that it cannot hear the message), still
// ends the wait at once: Await reads the count again once it is subscribed. Its client's
// watchdog timeout is a minute, so its look once per timeout cannot stand in within the
// 15s bound.
//
// Guards against an Await that trusts the read made before it subscribed, and so sleeps
// a whole watchdog timeout past the count down that opened the latch.
func TestAwaitHearsCountDownBeforeItSubscribed(t *testing.T) {
	redistest.EachWithCluster(t, func(t *testing.T, b *redistest.Backend) {
		const name = "latch:race"
		counter := relocktest.New(t, b)
		ctx := context.Background()
		if ok, err := counter.CountDownLatch(name).TrySetCount(ctx, 1); !ok || err != nil {
			t.Fatalf("TrySetCount(1) = %v, %v", ok, err)
		}
		hooked := make(chan error, 1)
		rc := &racer{Client: b.Client(t), key: name, hook: func() { hooked <- counter.CountDownLatch(name).CountDown(ctx) }}
		waiter := relocktest.On(t, rc, relock.WithWatchdogTimeout(time.Minute))
		done := await(waiter, name, 30*time.Second)
		if err := redistest.Recv(t, hooked, 15*time.Second, "the count down between the waiter's read and its subscription"); err != nil {
			t.Fatalf("CountDown: %v", err)
		}
		if err := redistest.Recv(t, done, 15*time.Second, "Await after the latch opened before it subscribed (its next look is a minute away)"); err != nil {
			t.Fatalf("Await: %v", err)
		}
	})
}

// A waiter that joins another waiter of its client, already parked on the latch (the
// channel subscribed, and quiet since), is woken by the count down that opens the latch,
// as the first one is. The watchdog timeout is a minute, so the once-per-timeout look
// cannot stand in for the wake-up within the 15s bound.
//
// Guards against a joining waiter that, once woken, goes back to sleep without reading
// the count again.
func TestAwaitJoiningParkedWaiterWokenByCountDown(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		const name = "latch:join:wake"
		counter := relocktest.New(t, b)
		waiter := relocktest.New(t, b, relock.WithWatchdogTimeout(time.Minute))
		ctx := context.Background()
		if ok, err := counter.CountDownLatch(name).TrySetCount(ctx, 1); !ok || err != nil {
			t.Fatalf("TrySetCount(1) = %v, %v", ok, err)
		}
		first := await(waiter, name, 30*time.Second)
		parked(t, first, 1, func() bool { return waiter.PubSubStats().Waiting == 1 })
		second := await(waiter, name, 30*time.Second)
		parked(t, second, 1, func() bool { return waiter.PubSubStats().Waiting == 2 })
		if err := counter.CountDownLatch(name).CountDown(ctx); err != nil {
			t.Fatal(err)
		}
		for _, done := range []<-chan error{first, second} {
			if err := redistest.Recv(t, done, 15*time.Second, "a waiter's wake-up by the count down to zero (its next look is a minute away)"); err != nil {
				t.Fatalf("Await: %v", err)
			}
		}
	})
}

// A latch whose count was written below zero, without a message, while a waiter of the
// client is parked on it, is open to a new Await of that client: it returns at once,
// though the channel it joins has heard nothing. The watchdog timeout is a minute, so the
// once-per-timeout look cannot stand in within the 15s bound.
//
// Guards against an Await that takes only a count of exactly zero for open on its first
// read, and so waits on a spent latch for the message that never comes.
func TestAwaitJoiningParkedWaiterOnSpentLatchReturns(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		const name = "latch:join:spent"
		waiter := relocktest.New(t, b, relock.WithWatchdogTimeout(time.Minute))
		side := b.Client(t)
		ctx := context.Background()
		if ok, err := waiter.CountDownLatch(name).TrySetCount(ctx, 5); !ok || err != nil {
			t.Fatalf("TrySetCount(5) = %v, %v", ok, err)
		}
		firstCtx, cancelFirst := context.WithTimeout(ctx, 30*time.Second)
		defer cancelFirst()
		first := make(chan error, 1)
		go func() { first <- waiter.CountDownLatch(name).Await(firstCtx) }()
		parked(t, first, 5, func() bool { return waiter.PubSubStats().Waiting == 1 })
		redistest.MustDo(t, side, "SET", name, "-3")
		if err := redistest.Recv(t, await(waiter, name, 30*time.Second), 15*time.Second, "Await on a latch holding -3 (open)"); err != nil {
			t.Fatalf("Await on a latch holding -3: %v; want nil (open)", err)
		}
		// The first waiter heard no message either; it is ended here, not by the latch.
		cancelFirst()
		if err := redistest.Recv(t, first, 15*time.Second, "the first waiter's end with its ctx"); err != nil && !errors.Is(err, context.Canceled) {
			t.Fatalf("first Await: %v; want nil or context.Canceled", err)
		}
	})
}

// An Await gives up its subscription when it ends, woken by the count down that opens the
// latch or ended by its ctx: once its channel's linger has passed (a second), the client
// holds no channel and Redis counts no subscriber of the latch's channel.
//
// Guards against an Await that keeps its subscription after it returns, so that every
// latch a client ever waited on stays subscribed.
func TestAwaitUnsubscribesWhenItEnds(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		const name = "latch:unsubscribe"
		counter := relocktest.New(t, b)
		waiter := relocktest.New(t, b, relock.WithWatchdogTimeout(time.Minute))
		side := b.Client(t)
		ctx := context.Background()
		unsubscribed := func(t *testing.T, after string) {
			t.Helper()
			redistest.Eventually(t, 10*time.Second, "the latch's channel still subscribed after "+after, func() bool {
				return waiter.PubSubStats().Channels == 0 && redistest.Subscribers(t, side, "NUMSUB", channelOf(name)) == 0
			})
		}

		t.Run("woken", func(t *testing.T) {
			if ok, err := counter.CountDownLatch(name).TrySetCount(ctx, 1); !ok || err != nil {
				t.Fatalf("TrySetCount(1) = %v, %v", ok, err)
			}
			done := await(waiter, name, 30*time.Second)
			parked(t, done, 1, func() bool { return waiter.PubSubStats().Waiting == 1 })
			if err := counter.CountDownLatch(name).CountDown(ctx); err != nil {
				t.Fatal(err)
			}
			if err := redistest.Recv(t, done, 15*time.Second, "the waiter's wake-up"); err != nil {
				t.Fatalf("Await: %v", err)
			}
			unsubscribed(t, "a wake-up")
		})

		t.Run("ctx ended", func(t *testing.T) {
			if ok, err := counter.CountDownLatch(name).TrySetCount(ctx, 1); !ok || err != nil {
				t.Fatalf("TrySetCount(1) = %v, %v", ok, err)
			}
			wctx, cancel := context.WithCancel(ctx)
			defer cancel()
			done := make(chan error, 1)
			go func() { done <- waiter.CountDownLatch(name).Await(wctx) }()
			parked(t, done, 1, func() bool { return waiter.PubSubStats().Waiting == 1 })
			cancel()
			if err := redistest.Recv(t, done, 15*time.Second, "the waiter's end with its ctx"); !errors.Is(err, context.Canceled) {
				t.Fatalf("Await = %v; want errors.Is(err, context.Canceled)", err)
			}
			unsubscribed(t, "a cancelled wait")
		})
	})
}

// A new count's message ("1", which TrySetCount publishes, as Redisson's trySetCount
// does) wakes no waiter: only the count down that opens the latch does. Here the latch is
// deleted without a message under a parked waiter and given a new count before the waiter's
// once-per-timeout look (a minute away): the waiter hears the "1", and sends nothing.
//
// Guards against a latch channel that takes any message for a wake-up, so that waiters
// read the count again on every new count.
func TestAwaitNotWokenByNewCountMessage(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		const name = "latch:new-count"
		waiter, rec := recordedClient(t, b, relock.WithWatchdogTimeout(time.Minute))
		counter := relocktest.New(t, b)
		side := b.Client(t)
		ctx := context.Background()
		if ok, err := counter.CountDownLatch(name).TrySetCount(ctx, 1); !ok || err != nil {
			t.Fatalf("TrySetCount(1) = %v, %v", ok, err)
		}
		done := await(waiter, name, 30*time.Second)
		parked(t, done, 1, func() bool { return waiter.PubSubStats().Waiting == 1 })
		redistest.MustDo(t, side, "DEL", name)
		before := waiter.PubSubStats()
		sentBefore := rec.Sent()
		if ok, err := counter.CountDownLatch(name).TrySetCount(ctx, 2); !ok || err != nil {
			t.Fatalf("TrySetCount(2) on the deleted latch = %v, %v", ok, err)
		}
		redistest.Eventually(t, 10*time.Second, "the waiter's client heard the new count's message", func() bool {
			return waiter.PubSubStats().Messages > before.Messages
		})
		stillWaiting(t, done, "after a new count's message")
		if st := waiter.PubSubStats(); st.Woken != before.Woken || st.Waiting != 1 {
			t.Errorf("after a new count's message the waiter's client is at %+v (before: %+v); want nobody woken", st, before)
		}
		if sent := rec.Sent(); len(sent) != len(sentBefore) {
			t.Errorf("the waiting client sent %q on a new count's message", sent[len(sentBefore):])
		}
		for range 2 {
			if err := counter.CountDownLatch(name).CountDown(ctx); err != nil {
				t.Fatal(err)
			}
		}
		if err := redistest.Recv(t, done, 15*time.Second, "the waiter's wake-up by the count down to zero"); err != nil {
			t.Fatalf("Await: %v", err)
		}
	})
}
