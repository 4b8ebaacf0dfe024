package rlock_test

import (
	"context"
	"errors"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/relock-go/relock"
	"github.com/relock-go/relock/internal/redistest"
	"github.com/relock-go/relock/internal/redistest/relocktest"
	"github.com/relock-go/relock/internal/script"
	"github.com/relock-go/relock/rlock"
)

// throughProxy returns a relock client whose connections pass a fault-injecting proxy.
func throughProxy(t *testing.T, b *redistest.Backend) (*relock.Client, *redistest.Proxy) {
	t.Helper()
	p := redistest.StartProxy(t, b.Addr)
	c := relocktest.New(t, &redistest.Backend{Name: b.Name, Addr: p.Addr()})
	// Load the scripts first, so the fault hits the lock's own request, not a NOSCRIPT.
	if err := c.Lock("warm-up").Do(redistest.Context(t, time.Minute), func(context.Context) error { return nil }); err != nil {
		t.Fatal(err)
	}
	return c, p
}

// An acquisition whose reply is lost after Redis ran it is counted once: Lock finds out
// from the hold count that it ran, instead of sending it again.
func TestAcquireReplyLost(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		c, proxy := throughProxy(t, b)
		side := b.Client(t)
		mu := c.Lock("lost-acquire")

		proxy.LoseReplyTo("lost-acquire")
		held, err := mu.Lock(redistest.Context(t, time.Minute))
		if err != nil {
			t.Fatalf("Lock with its reply lost: %v", err)
		}
		if proxy.Armed() != 0 {
			t.Fatal("the fault never fired: the test proved nothing")
		}
		owner := mustOwner(t, side, "lost-acquire")
		if n, _ := redistest.Do(t, side, "HGET", "lost-acquire", owner).AsInt64(); n != 1 {
			t.Fatalf("hold count %d after one Lock; want 1", n)
		}

		proxy.LoseReplyTo("lost-acquire") // and a re-entry
		if held, err = mu.Lock(held); err != nil {
			t.Fatalf("re-entry with its reply lost: %v", err)
		}
		if n, _ := redistest.Do(t, side, "HGET", "lost-acquire", owner).AsInt64(); n != 2 {
			t.Fatalf("hold count %d after two Locks; want 2", n)
		}
		for i := 0; i < 2; i++ {
			if err := mu.Unlock(held); err != nil {
				t.Fatal(err)
			}
		}
		if n, _ := redistest.Do(t, side, "EXISTS", "lost-acquire").AsInt64(); n != 0 {
			t.Error("two unlocks did not free a lock taken twice: a hold was counted twice")
		}
	})
}

// An acquisition whose reply is lost, and then the reply of the read that asks Redis whether
// it ran, is still counted once: the read is safe to repeat, and is asked again until it is
// answered (docs/design.md, lost replies), so that Lock finds the hold it took rather than
// returning the connection's error over a hold that Redis counts and nobody renews.
func TestAcquireReplyLostAndItsReadToo(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		const name = "lost-acquire-read"
		c, proxy := throughProxy(t, b)
		side := b.Client(t)
		mu := c.Lock(name)

		proxy.LoseReplyTo(name) // the acquisition's
		proxy.LoseReplyTo(name) // and the read's that asks whether it ran
		held, err := mu.Lock(redistest.Context(t, time.Minute))
		if proxy.Armed() != 0 {
			t.Fatal("the faults never fired: the test proved nothing")
		}
		if err != nil {
			n, _ := redistest.Do(t, side, "EXISTS", name).AsInt64()
			t.Fatalf("Lock whose reply, and its read's, were lost: %v (the lock exists: %d)", err, n)
		}
		if n, _ := redistest.Do(t, side, "HGET", name, mustOwner(t, side, name)).AsInt64(); n != 1 {
			t.Fatalf("hold count %d after one Lock; want 1", n)
		}
		if err := mu.Unlock(held); err != nil {
			t.Fatal(err)
		}
		if n, _ := redistest.Do(t, side, "EXISTS", name).AsInt64(); n != 0 {
			t.Error("the lock is still there after its one hold was released")
		}
	})
}

// An acquisition run late behind its resend stays with the hold (docs/design.md, late
// requests) also for an Unlock that waits for another call of the owner to finish first:
// here an Extend, whose request is held up on the way while the Unlock comes. The Unlock
// then gives the late request's hold back before its own release, which succeeds, and the
// lock is free.
func TestUnlockBehindAnotherCallOfALateHold(t *testing.T) {
	redistest.Real(t, func(t *testing.T, b *redistest.Backend) {
		const name = "late-behind"
		side := b.Client(t)
		proxy := redistest.StartProxy(t, b.Addr)
		late := redistest.NewLateRequests((&redistest.Backend{Name: b.Name, Addr: proxy.Addr()}).Client(t))
		c := relocktest.On(t, late, relock.WithWatchdogTimeout(time.Minute))
		ctx := redistest.Context(t, time.Minute)
		mu := c.Lock(name)
		// A first hold loads the scripts, so that the late request is the acquisition itself.
		if err := mu.Do(ctx, func(context.Context) error { return nil }); err != nil {
			t.Fatal(err)
		}
		arrived, send := late.HoldBroken(script.RLockAcquire().SHA1, name)
		defer send()
		held, err := mu.Lock(ctx)
		redistest.Arrived(t, arrived, "Lock", err)
		if err != nil {
			t.Fatalf("Lock whose first request was held up: %v", err)
		}
		send()
		if n, _ := redistest.Do(t, side, "HGET", name, mustOwner(t, side, name)).AsInt64(); n != 2 {
			t.Fatalf("the late request left %d holds; want 2: the test proved nothing", n)
		}

		// The Extend's lease, in milliseconds, is in its request and in no other.
		extending, extend := proxy.HoldRequest(name, "123456")
		defer extend()
		extended := make(chan error, 1)
		go func() { extended <- mu.Extend(held, 123456*time.Millisecond) }()
		redistest.Recv(t, extending, 30*time.Second, "the Extend's request at the proxy")
		unlocked := make(chan error, 1)
		go func() { unlocked <- mu.Unlock(held) }()
		// The Unlock waits for the Extend to finish: for its turn on the owner's hold.
		redistest.Eventually(t, 30*time.Second, "the Unlock waiting for its turn", func() bool {
			buf := make([]byte, 1<<20)
			return strings.Contains(string(buf[:runtime.Stack(buf, true)]), "leases.(*Watchdog).Begin")
		})
		extend()
		if err := redistest.Recv(t, extended, 30*time.Second, "Extend"); err != nil {
			t.Fatalf("Extend: %v", err)
		}
		if err := redistest.Recv(t, unlocked, 30*time.Second, "Unlock"); err != nil {
			t.Errorf("Unlock of the one Lock, behind an Extend: %v", err)
		}
		if n, _ := redistest.Do(t, side, "EXISTS", name).AsInt64(); n != 0 {
			t.Errorf("the lock is still there after the owner's one unlock (PTTL %dms)", redistest.PTTL(t, side, name))
		}
	})
}

// A re-entry gives back only the surplus that late requests explain: a hold of the owner's
// that Redis counts and the client does not know of (one it stopped renewing; here made by
// hand) is the owner's own, and the re-entry keeps it, as Redisson's would (docs/design.md,
// lost replies). The hold's acquisition ran late behind its resend, so one surplus hold is
// explained and given back, and the other stays.
func TestReentryKeepsTheSurplusNoLateRequestExplains(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		const name = "late-and-own"
		side := b.Client(t)
		late := redistest.NewLateRequests(b.Client(t))
		c := relocktest.On(t, late, relock.WithWatchdogTimeout(time.Minute))
		ctx := redistest.Context(t, time.Minute)
		mu := c.Lock(name)
		// A first hold loads the scripts, so that the late request is the acquisition itself.
		if err := mu.Do(ctx, func(context.Context) error { return nil }); err != nil {
			t.Fatal(err)
		}
		arrived, send := late.HoldBroken(script.RLockAcquire().SHA1, name)
		defer send()
		held, err := mu.Lock(ctx)
		redistest.Arrived(t, arrived, "Lock", err)
		if err != nil {
			t.Fatalf("Lock whose first request was held up: %v", err)
		}
		owner := mustOwner(t, side, name)
		redistest.MustDo(t, side, "HINCRBY", name, owner, "1") // the owner's own, unknown to the client
		send()
		if n, _ := redistest.Do(t, side, "HGET", name, owner).AsInt64(); n != 3 {
			t.Fatalf("hold count %d with the late request and the owner's own hold; want 3: the test proved nothing", n)
		}
		if held, err = mu.Lock(held); err != nil {
			t.Fatalf("re-entry: %v", err)
		}
		if n, err := mu.HoldCount(held); n != 3 || err != nil {
			t.Errorf("hold count %d (%v) after the re-entry; want 3: the late request's hold given back, the owner's own kept", n, err)
		}
		redistest.MustDo(t, side, "DEL", name)
	})
}

// unlockMarker is in an unlock request of the lock named name and in no acquisition: its
// channel, to which the unlock publishes.
func unlockMarker(name string) string { return "redisson_lock__channel:{" + name + "}" }

// An unlock whose reply is lost after Redis ran it is sent again and answered as done: the
// owner's other hold is not released with it, and the last hold's unlock reports success.
func TestUnlockReplyLost(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		c, proxy := throughProxy(t, b)
		side := b.Client(t)
		mu := c.Lock("lost-unlock")
		held, err := mu.Lock(redistest.Context(t, time.Minute))
		if err != nil {
			t.Fatal(err)
		}
		if held, err = mu.Lock(held); err != nil {
			t.Fatal(err)
		}
		proxy.LoseReplyTo(unlockMarker("lost-unlock"))
		if err := mu.Unlock(held); err != nil {
			t.Fatalf("Unlock with its reply lost: %v", err)
		}
		if proxy.Armed() != 0 {
			t.Fatal("the fault never fired: the test proved nothing")
		}
		if n, _ := redistest.Do(t, side, "HGET", "lost-unlock", mustOwner(t, side, "lost-unlock")).AsInt64(); n != 1 {
			t.Fatalf("hold count %d after one of two holds was released; want 1", n)
		}
		proxy.LoseReplyTo(unlockMarker("lost-unlock")) // and the last hold's
		if err := mu.Unlock(held); err != nil {
			t.Fatalf("last Unlock with its reply lost: %v; it ran", err)
		}
		if proxy.Armed() != 0 {
			t.Fatal("the second fault never fired")
		}
		if n, _ := redistest.Do(t, side, "EXISTS", "lost-unlock").AsInt64(); n != 0 {
			t.Fatal("the lock is still there after its last hold was released")
		}
		if err := mu.Unlock(held); !errors.Is(err, relock.ErrNotHeld) {
			t.Errorf("third unlock: %v; want ErrNotHeld", err)
		}
	})
}

// A retried unlock whose first reply was lost never releases a newer hold of the same
// owner: a re-entry that another goroutine of the owner asks for while the unlock waits to
// be sent again is taken after the unlock is done, not in between, where the resent
// unlock would find the count it expected and release the new hold.
func TestUnlockReplyLostKeepsNewerHold(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		c, proxy := throughProxy(t, b)
		side := b.Client(t)
		mu := c.Lock("lost-newer")
		held, err := mu.Lock(redistest.Context(t, time.Minute))
		if err != nil {
			t.Fatal(err)
		}
		owner := mustOwner(t, side, "lost-newer")
		proxy.LoseReplyTo(unlockMarker("lost-newer"))
		unlocked := make(chan error, 1)
		go func() { unlocked <- mu.Unlock(held) }()
		// As soon as the unlock's reply is lost, and before it is sent again (its backoff
		// is 10ms and the client must reconnect), the owner locks again.
		redistest.Eventually(t, 5*time.Second, "the unlock's reply was never lost", func() bool { return proxy.Armed() == 0 })
		// The owner's other goroutine: a context that carries the owner and does not end
		// with the hold.
		ctx, cancel := context.WithTimeout(context.WithoutCancel(held), 5*time.Second)
		defer cancel()
		again, err := mu.Lock(ctx)
		if err != nil {
			t.Fatalf("Lock by the same owner during the unlock: %v", err)
		}
		select {
		case err := <-unlocked:
			if err != nil {
				t.Fatalf("Unlock with its reply lost: %v", err)
			}
		case <-time.After(5 * time.Second):
			t.Fatal("Unlock did not return")
		}
		if n, _ := redistest.Do(t, side, "HGET", "lost-newer", owner).AsInt64(); n != 1 {
			t.Fatalf("the owner's hold count is %d after its newer Lock; want 1 (the resent unlock released it)", n)
		}
		if err := again.Err(); err != nil {
			t.Fatalf("the newer hold's context ended: %v (%v)", err, context.Cause(again))
		}
		if err := mu.Unlock(again); err != nil {
			t.Fatal(err)
		}
	})
}

// An unlock of holds the client does not know of (here: Redis counts holds of the owner
// that the client, having found the count not as it knew it, forgot) compares no count, so
// when its reply is lost it is not sent again: a second send would release a second hold.
// Whether the one send ran stays unknown, and Unlock says so with the connection's error
// rather than success or ErrNotHeld (the owner still holds the lock).
func TestUnlockOfNoKnownHoldReplyLostIsNotSentAgain(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		const name = "lost-unknown"
		c, proxy := throughProxy(t, b)
		side := b.Client(t)
		mu := c.Lock(name)
		held, err := mu.Lock(redistest.Context(t, time.Minute))
		if err != nil {
			t.Fatal(err)
		}
		owner := mustOwner(t, side, name)
		redistest.MustDo(t, side, "HINCRBY", name, owner, "2") // three holds in Redis, one known
		if err := mu.Unlock(held); !errors.Is(err, relock.ErrNotHeld) {
			t.Fatalf("Unlock of a hold whose count is not the one the client knows: %v; want ErrNotHeld", err)
		}
		proxy.LoseReplyTo(unlockMarker(name))
		err = mu.Unlock(held) // the client knows of no hold now
		if proxy.Armed() != 0 {
			t.Fatal("the fault never fired: the test proved nothing")
		}
		if n, _ := redistest.Do(t, side, "HGET", name, owner).AsInt64(); n != 2 {
			t.Fatalf("hold count %d after one Unlock of three holds, its reply lost; want 2 (sent once)", n)
		}
		if err == nil || errors.Is(err, relock.ErrNotHeld) {
			t.Errorf("Unlock whose reply was lost, of a hold it did not know: %v; want the connection's error (unknown whether it ran)", err)
		}
	})
}

// While the server refuses commands unrun until it is ready (LOADING after a restart,
// CLUSTERDOWN or TRYAGAIN in a failover), Lock and Unlock try again within the client's
// timeout instead of failing: the refusal says the script never ran.
func TestRetryWhileServerNotReady(t *testing.T) {
	redistest.EachRefusal(t, func(t *testing.T, b *redistest.Backend, refuse func()) {
		c := relocktest.New(t, b)
		side := b.Client(t)
		mu := c.Lock("not-ready")
		refuse()
		held, err := mu.Lock(redistest.Context(t, time.Minute))
		if err != nil {
			t.Fatalf("Lock while the server refused commands: %v", err)
		}
		if n, _ := redistest.Do(t, side, "HGET", "not-ready", mustOwner(t, side, "not-ready")).AsInt64(); n != 1 {
			t.Errorf("hold count %d after the retried acquisition; want 1", n)
		}
		refuse()
		if err := mu.Unlock(held); err != nil {
			t.Fatalf("Unlock while the server refused commands: %v", err)
		}
		if n, _ := redistest.Do(t, side, "EXISTS", "not-ready").AsInt64(); n != 0 {
			t.Errorf("the lock is still there after the retried unlock")
		}
	})
}

// WithTimeout bounds the calls that do not follow the caller's context: an Unlock, and the
// acquire attempt of a Lock whose context never ends, return with the timeout's error even
// when Redis never answers (here its server is stopped with SIGSTOP for the whole test).
// The client is busy first, as a busy client's connections are: rueidis then pipelines
// the calls, and only their contexts end their waits (a lone call on a connection that has
// never been busy waits under a connection deadline instead).
func TestTimeoutBoundsDetachedCalls(t *testing.T) {
	redistest.Real(t, func(t *testing.T, b *redistest.Backend) {
		const timeout, calls = 300 * time.Millisecond, 8
		c := relocktest.New(t, b, relock.WithTimeout(timeout))
		held := make([]context.Context, calls)
		for i := range held {
			var err error
			if held[i], err = c.Lock("stalled:" + strconv.Itoa(i)).Lock(redistest.Context(t, time.Minute)); err != nil {
				t.Fatal(err)
			}
		}
		// Concurrent traffic first: a connection that has had it pipelines from then on,
		// and its calls wait on their contexts rather than under a connection deadline.
		busy(t, c, 4*calls)
		b.Server.Pause(t)
		defer b.Server.Resume(t)
		type result struct {
			call string
			err  error
		}
		done := make(chan result, 2*calls)
		for i := range calls {
			name := "stalled:" + strconv.Itoa(i)
			go func() { done <- result{"Unlock of " + name, c.Lock(name).Unlock(held[i])} }()
			go func() {
				_, err := c.Lock(name + ":other").Lock(context.Background()) // a context that never ends: the point
				done <- result{"Lock of " + name + ":other", err}
			}()
		}
		deadline := time.Now().Add(5 * time.Second)
		for range 2 * calls {
			r := redistest.Recv(t, done, time.Until(deadline), "every call against a stopped server returning; the client's timeout is "+timeout.String())
			if !errors.Is(r.err, context.DeadlineExceeded) {
				t.Errorf("%s against a stopped server: %v; want the timeout's context.DeadlineExceeded", r.call, r.err)
			}
		}
	})
}

// busy runs n goroutines that each lock and unlock a lock of their own 20 times, at most 30s.
func busy(t *testing.T, c *relock.Client, n int) {
	t.Helper()
	errs := make(chan error, n)
	ctx := redistest.Context(t, time.Minute)
	for g := range n {
		go func() {
			mu := c.Lock("busy:" + strconv.Itoa(g))
			for range 20 {
				held, err := mu.Lock(ctx)
				if err == nil {
					err = mu.Unlock(held)
				}
				if err != nil {
					errs <- err
					return
				}
			}
			errs <- nil
		}()
	}
	for range n {
		if err := redistest.Recv(t, errs, 30*time.Second, "the busy goroutines' lock cycles"); err != nil {
			t.Fatal(err)
		}
	}
}

// A call that times out on a deadline that is not its own is sent again while its own
// deadline (the client's timeout) has time left. Here the connection is cut and the new
// one's handshake held at the proxy: rueidis gives a handshake its dial timeout (1s here)
// and fails the call with context.DeadlineExceeded, though neither the caller's context
// (30s) nor the client's timeout (20s) has ended. Lock and Unlock still succeed, on the
// next connection, and count the hold once. The client pipelines on one connection, so
// that the held handshake is the one the lock's calls wait for.
func TestRetryAfterFailedHandshake(t *testing.T) {
	t.Parallel()
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		p := redistest.StartProxy(t, b.Addr)
		via := &redistest.Backend{Name: b.Name, Addr: p.Addr()}
		rc := via.ClientWith(t, func(o *rueidis.ClientOption) {
			o.PipelineMultiplex = -1
			o.Dialer.Timeout = time.Second
		})
		failing := &failures{Client: rc}
		c, err := relock.New(failing, relock.WithTimeout(20*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		side := b.Client(t)
		mu := c.Lock("handshake")
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := mu.Do(ctx, func(context.Context) error { return nil }); err != nil { // the scripts loaded
			t.Fatal(err)
		}
		for _, step := range []string{"Lock", "Unlock"} {
			arrived, release := p.HoldRequest("HELLO")
			defer release()
			p.Cut()
			failed := failing.n.Load()
			var err error
			if step == "Lock" {
				ctx, err = mu.Lock(ctx)
			} else {
				err = mu.Unlock(ctx)
			}
			if err != nil {
				t.Fatalf("%s after a failed handshake: %v", step, err)
			}
			select {
			case <-arrived:
			default:
				t.Fatalf("%s: no handshake was held: the test proved nothing", step)
			}
			if failing.n.Load() == failed {
				t.Fatalf("%s: none of its calls failed: the test proved nothing", step)
			}
		}
		if n, _ := redistest.Do(t, side, "EXISTS", "handshake").AsInt64(); n != 0 {
			t.Error("the lock is still there after one Lock and one Unlock: the hold was counted twice")
		}
	})
}

// An unlock whose first send went out within the hold's lease and ran, its reply lost, has
// released the hold, however many sends after it also go unanswered: here the next
// connection's handshake is held at the proxy until the send behind it fails on the dial
// timeout, past the lease, and the reply of the send after that is lost too. When a later
// send finds the hold gone, the first lost send (the one that ran) is the one to compare
// with the lease's end, not the last: Unlock succeeds, rather than reporting ErrNotHeld for
// a hold it released in time.
func TestUnlockRepliesLostAcrossTheLease(t *testing.T) {
	t.Parallel()
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		const name = "lost-across"
		const lease = 2 * time.Second // room for the first send to run within it on a loaded machine
		p := redistest.StartProxy(t, b.Addr)
		via := &redistest.Backend{Name: b.Name, Addr: p.Addr()}
		rc := via.ClientWith(t, func(o *rueidis.ClientOption) {
			o.PipelineMultiplex = -1 // one connection: the held handshake is the unlock's
			o.Dialer.Timeout = 2 * lease
		})
		c, err := relock.New(rc, relock.WithTimeout(20*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		side := b.Client(t)
		mu := c.Lock(name)
		ctx := redistest.Context(t, time.Minute)
		if err := mu.Do(ctx, func(context.Context) error { return nil }); err != nil { // the scripts loaded
			t.Fatal(err)
		}
		held, err := mu.Lock(ctx, rlock.WithLease(lease))
		if err != nil {
			t.Fatal(err)
		}
		p.LoseReplyTo(unlockMarker(name)) // the first send: it runs, and its reply is lost
		arrived, release := p.HoldRequest("HELLO")
		defer release()
		p.LoseReplyTo(unlockMarker(name)) // the send after the failed handshake, past the lease
		err = mu.Unlock(held)
		select {
		case <-arrived:
		default:
			t.Fatal("no handshake was held: the test proved nothing")
		}
		if p.Armed() != 0 {
			t.Fatal("the faults never fired: the test proved nothing")
		}
		if err != nil {
			t.Errorf("Unlock whose first send ran within the lease, its later sends unanswered: %v; want success", err)
		}
		if n, _ := redistest.Do(t, side, "EXISTS", name).AsInt64(); n != 0 {
			t.Error("the lock is still there after its Unlock")
		}
	})
}

// failures is a rueidis client that counts the calls that got no answer from Redis.
type failures struct {
	rueidis.Client
	n atomic.Int64
}

func (c *failures) Do(ctx context.Context, cmd rueidis.Completed) rueidis.RedisResult {
	r := c.Client.Do(ctx, cmd)
	if err := r.Error(); err != nil && !rueidis.IsRedisNil(err) {
		if _, answer := rueidis.IsRedisErr(err); !answer {
			c.n.Add(1)
		}
	}
	return r
}

// An unlock sent after its hold's lease ran out, whose reply is lost, finds the hold gone
// when it is sent again; that is not its own first send's doing, since that went out after
// the lease's end: Unlock reports ErrNotHeld and the hold's context ends as lost, not
// released (the critical section did not end under the lock).
func TestUnlockReplyLostAfterTheLease(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		c, proxy := throughProxy(t, b)
		mu := c.Lock("lost-late-unlock")
		held, err := mu.Lock(redistest.Context(t, time.Minute), rlock.WithLease(100*time.Millisecond))
		if err != nil {
			t.Fatal(err)
		}
		side := b.Client(t)
		redistest.Eventually(t, 10*time.Second, "the lease never ran out in Redis", func() bool {
			n, _ := redistest.Do(t, side, "EXISTS", "lost-late-unlock").AsInt64()
			return n == 0
		})
		proxy.LoseReplyTo(unlockMarker("lost-late-unlock"))
		if err := mu.Unlock(held); !errors.Is(err, relock.ErrNotHeld) {
			t.Errorf("Unlock after the lease ran out, its reply lost: %v; want ErrNotHeld", err)
		}
		if proxy.Armed() != 0 {
			t.Fatal("the fault never fired: the test proved nothing")
		}
		if cause := context.Cause(held); !errors.Is(cause, relock.ErrLeaseLost) {
			t.Errorf("the hold's context: %v; want ErrLeaseLost", cause)
		}
	})
}

// An Unlock that began while the client still counted the hold, but whose first send that
// Redis could have run went out only after the hold's lease (its earlier sends were refused
// unrun), and whose reply was then lost, cannot tell that it released anything: the hold
// may have run out first. When the send again finds the hold gone, the answer is
// ErrNotHeld and the hold's context ends as lost; only a lost send made before the lease's
// end is known to have found the hold there.
func TestUnlockReplyLostAfterRefusalsPastTheLease(t *testing.T) {
	const lease = 200 * time.Millisecond
	b := redistest.Mini(t) // a server that refuses commands unrun on demand
	c, proxy := throughProxy(t, b)
	mu := c.Lock("refused-then-lost")
	held, err := mu.Lock(redistest.Context(t, time.Minute), rlock.WithLease(lease))
	if err != nil {
		t.Fatal(err)
	}
	b.Mini.SetError("LOADING Redis is loading the dataset in memory")
	defer b.Mini.SetError("")
	unlocked := make(chan error, 1)
	go func() { unlocked <- mu.Unlock(held) }() // in its turn at once, then refused
	time.Sleep(3 * lease)                       // past the lease, locally and in Redis
	proxy.LoseReplyTo(unlockMarker("refused-then-lost"))
	b.Mini.SetError("")
	err = redistest.Recv(t, unlocked, 10*time.Second, "Unlock did not return")
	if proxy.Armed() != 0 {
		t.Fatal("the fault never fired: the test proved nothing")
	}
	if !errors.Is(err, relock.ErrNotHeld) {
		t.Errorf("Unlock whose first send that could run went out after the lease, its reply lost: %v; want ErrNotHeld", err)
	}
	if cause := context.Cause(held); !errors.Is(cause, relock.ErrLeaseLost) {
		t.Errorf("the hold's context: %v; want ErrLeaseLost", cause)
	}
}

// A Lock whose context ends while its attempt is in flight, the attempt taking the lock in
// Redis, returns the context's error and releases that hold again: nobody knows of it, and
// kept it would hold the lock for a lease.
func TestLockContextEndsInFlight(t *testing.T) {
	t.Parallel()
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		const name = "inflight"
		side := b.Client(t)
		c := relocktest.On(t, redistest.LateReply(b.Client(t), name, 3*time.Second))
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		held, err := c.Lock(name).Lock(ctx)
		if !errors.Is(err, context.DeadlineExceeded) || held != ctx {
			t.Fatalf("Lock whose context ended in flight = %v; want ctx and errors.Is DeadlineExceeded", err)
		}
		if n, _ := redistest.Do(t, side, "EXISTS", name).AsInt64(); n != 0 {
			t.Fatalf("the lock exists after a Lock that gave up (PTTL %dms); want it released", redistest.PTTL(t, side, name))
		}
		other := relocktest.New(t, b)
		h, err := other.Lock(name).TryLock(redistest.Context(t, 10*time.Second))
		if err != nil {
			t.Fatalf("another client's TryLock after the Lock gave up: %v", err)
		}
		_ = other.Lock(name).Unlock(h)
	})
}

// An attempt on a lock that another owner holds, whose reply is lost, took nothing: the
// hold count Redis has is the one the owner had before it, so the attempt did not run or
// failed, and TryLock answers ErrLocked. Taking it for run would have two owners hold the
// lock.
func TestFailedAttemptReplyLost(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		c, proxy := throughProxy(t, b)
		other := relocktest.New(t, b) // not through the proxy
		held, err := other.Lock("lost-busy").Lock(redistest.Context(t, time.Minute))
		if err != nil {
			t.Fatal(err)
		}
		mu := c.Lock("lost-busy")
		proxy.LoseReplyTo("lost-busy")
		got, err := mu.TryLock(redistest.Context(t, time.Minute))
		if proxy.Armed() != 0 {
			t.Fatal("the fault never fired: the test proved nothing")
		}
		if !errors.Is(err, relock.ErrLocked) {
			t.Fatalf("TryLock of a held lock with its reply lost: %v (context live: %v); want ErrLocked", err, got.Err() == nil)
		}
		if n, err := mu.HoldCount(got); err != nil || n != 0 {
			t.Errorf("HoldCount after the failed TryLock: %d %v; want 0", n, err)
		}
		if err := other.Lock("lost-busy").Unlock(held); err != nil {
			t.Fatal(err)
		}
	})
}

// A first-level acquisition WithFencing whose reply is lost after Redis ran it keeps the
// token it took: Token answers the counter's value, the next token after the previous
// holder's.
func TestFencedAcquireReplyLost(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		c, proxy := throughProxy(t, b)
		side := b.Client(t)
		mu := c.Lock("lost-fenced")
		ctx := redistest.Context(t, time.Minute)
		first, err := mu.Lock(ctx, rlock.WithFencing())
		if err != nil {
			t.Fatal(err)
		}
		if err := mu.Unlock(first); err != nil {
			t.Fatal(err)
		}
		proxy.LoseReplyTo("lost-fenced")
		held, err := mu.Lock(ctx, rlock.WithFencing())
		if err != nil {
			t.Fatalf("Lock WithFencing with its reply lost: %v", err)
		}
		if proxy.Armed() != 0 {
			t.Fatal("the fault never fired: the test proved nothing")
		}
		counter, err := redistest.Do(t, side, "GET", "redisson_lock_token:{lost-fenced}").AsInt64()
		if err != nil {
			t.Fatal(err)
		}
		if tok, ok := mu.Token(held); !ok || tok != counter || tok != 2 {
			t.Errorf("Token of the hold whose reply was lost: %d %v; want the counter's %d, the second token", tok, ok, counter)
		}
		if err := mu.Unlock(held); err != nil {
			t.Fatal(err)
		}
	})
}

// A failed TryLock whose request Redis runs after the call gave up leaves no hold that the
// owner's unlocks cannot release (docs/design.md, lost replies): the attempt of an owner
// that holds another lock is held back on its way until the call's time is up, so that
// whether it ran is unknown; TryLock fails, and the attempt then reaches Redis,
// which counts a hold the client never granted. The owner's next Lock re-enters it and
// must give that hold back, so that its one Unlock frees the lock. Guards against a failed
// attempt that forgets its lost request: the owner's Lock and Unlock would count that
// hold as its own and leave one behind.
func TestFailedTryLockRunLateCountsOnce(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		const name = "tl-late"
		side := b.Client(t)
		late := redistest.NewLateRequests(b.Client(t))
		c := relocktest.On(t, late, relock.WithTimeout(300*time.Millisecond))
		ctx := redistest.Context(t, time.Minute)
		mu := c.Lock(name)
		// An owner that the context carries: one that holds another lock.
		held, err := c.Lock("elsewhere").Lock(ctx)
		if err != nil {
			t.Fatal(err)
		}
		// Load the scripts, so that the requests held back are the attempt's own.
		if err := mu.Do(held, func(h context.Context) error { _, err := mu.HoldCount(h); return err }); err != nil {
			t.Fatal(err)
		}

		arrived, send := late.Hold(script.RLockAcquire().SHA1, name)
		defer send()
		_, err = mu.TryLock(held)
		redistest.Arrived(t, arrived, "TryLock", err)
		if err == nil {
			t.Fatal("TryLock whose request was held back succeeded: the test proved nothing")
		}
		send()
		if n, _ := redistest.Do(t, side, "HGET", name, mustOwner(t, side, name)).AsInt64(); n != 1 {
			t.Fatalf("the late attempt left %d holds; want 1: the test proved nothing", n)
		}

		again, err := mu.Lock(held)
		if err != nil {
			t.Fatalf("Lock after the failed TryLock: %v", err)
		}
		if n, err := mu.HoldCount(again); err != nil || n != 1 {
			t.Errorf("hold count %d, %v after the owner's one Lock; want 1", n, err)
		}
		if err := mu.Unlock(again); err != nil {
			t.Fatal(err)
		}
		if n, _ := redistest.Do(t, side, "EXISTS", name).AsInt64(); n != 0 {
			t.Errorf("the lock is still there after the owner's one Unlock (PTTL %dms): the late attempt's hold was kept", redistest.PTTL(t, side, name))
		}
	})
}

// A re-entry that finds its owner's hold gone, and whose acquisitions then fail twice,
// counts one hold (docs/design.md, lost replies): the first request breaks before it is
// sent, and the read that asks whether it ran finds no hold, fewer than the client knew of;
// the second runs and its reply is lost, and the read must then take the hold it finds for
// that request's, measured against what Redis counted before it, not against the count
// the client knew before the hold was lost. Guards against an attempt that keeps
// comparing with the stale count: it sends a third time, re-enters its own new hold, and
// counts it twice, and the owner's one Unlock leaves the lock held.
func TestReentryAfterALostHoldWithTwoFailedSendsCountsOnce(t *testing.T) {
	redistest.Real(t, func(t *testing.T, b *redistest.Backend) {
		const name = "lost-hold-reentry"
		side := b.Client(t)
		proxy := redistest.StartProxy(t, b.Addr)
		late := redistest.NewLateRequests((&redistest.Backend{Name: b.Name, Addr: proxy.Addr()}).Client(t))
		c := relocktest.On(t, late, relock.WithWatchdogTimeout(time.Minute))
		ctx := redistest.Context(t, time.Minute)
		mu := c.Lock(name)
		held, err := mu.Lock(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := mu.HoldCount(held); err != nil { // loads the state script
			t.Fatal(err)
		}
		redistest.MustDo(t, side, "DEL", name) // the hold is lost; the client does not know yet

		arrived, _ := late.HoldBroken(script.RLockAcquire().SHA1, name)
		proxy.LoseReplyTo(script.RLockAcquire().SHA1)
		again, err := mu.Lock(held)
		redistest.Arrived(t, arrived, "Lock", err)
		if proxy.Armed() != 0 {
			t.Fatal("the lost reply never happened: the test proved nothing")
		}
		if err != nil {
			t.Fatalf("re-entry after the hold was lost, with two failed sends: %v", err)
		}
		if n, _ := redistest.Do(t, side, "HGET", name, mustOwner(t, side, name)).AsInt64(); n != 1 {
			t.Errorf("hold count %d in Redis after the owner's one Lock since its hold was lost; want 1", n)
		}
		if err := mu.Unlock(again); err != nil {
			t.Fatal(err)
		}
		if n, _ := redistest.Do(t, side, "EXISTS", name).AsInt64(); n != 0 {
			t.Errorf("the lock is still there after the owner's Unlock of its one hold (PTTL %dms)", redistest.PTTL(t, side, name))
		}
	})
}

// While the server refuses commands unrun (here TRYAGAIN, as a cluster answers for the
// whole of a slot move), Lock and TryLock try again only while their context lives: a
// refused attempt is not in flight, so nothing is left to finish past the caller's
// context. Each returns an error for which errors.Is(err, ctx.Err()) holds, naming the
// lock, and leaves nothing held. (Lock once went on asking whether the refused attempt
// had run until the client's timeout, then returned the refusal.)
func TestRefusedAttemptEndsWithTheContext(t *testing.T) {
	b := redistest.Mini(t) // a server that refuses commands unrun on demand
	c := relocktest.New(t, b, relock.WithTimeout(time.Minute))
	mu := c.Lock("refused-past-ctx")
	b.Mini.SetError("TRYAGAIN Multiple keys request during rehashing of slot")
	for _, try := range []bool{false, true} {
		ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
		done := make(chan error, 1)
		go func() {
			var err error
			if try {
				_, err = mu.TryLock(ctx)
			} else {
				_, err = mu.Lock(ctx)
			}
			done <- err
		}()
		// The client's timeout is a minute: an attempt kept going past the caller's
		// context would still be asking.
		err := redistest.Recv(t, done, 20*time.Second, "the refused call after its context ended")
		cancel()
		var le *relock.Error
		if !errors.Is(err, context.DeadlineExceeded) || !errors.As(err, &le) || le.Name != "refused-past-ctx" {
			t.Errorf("TryLock %t while refused, its context ended: %v; want the context's error naming the lock", try, err)
		}
	}
	b.Mini.SetError("")
	if n, err := redistest.Do(t, b.Client(t), "EXISTS", "refused-past-ctx").AsInt64(); err != nil || n != 0 {
		t.Errorf("EXISTS after the refused calls: %d, %v; want nothing held", n, err)
	}
}
