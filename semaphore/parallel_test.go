package semaphore_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/relock-go/relock"
	"github.com/relock-go/relock/internal/redistest"
)

// inFlight is a rueidis client that counts the commands of one name in flight at once
// through it, and the most it saw.
type inFlight struct {
	rueidis.Client
	name      string
	now, most atomic.Int64
}

func (c *inFlight) Do(ctx context.Context, cmd rueidis.Completed) rueidis.RedisResult {
	if cs := cmd.Commands(); len(cs) > 0 && cs[0] == c.name {
		n := c.now.Add(1)
		for m := c.most.Load(); n > m && !c.most.CompareAndSwap(m, n); m = c.most.Load() {
		}
		defer c.now.Add(-1)
	}
	return c.Client.Do(ctx, cmd)
}

// Goroutines of one client that find permits free take them in parallel: while the server
// sleeps (DEBUG SLEEP), four Acquires of one permit each, with four free, all have their
// attempt in flight at once, and all get their permit. Guards against a client whose
// Acquires take turns in memory even when none of them waits, so that each one's round
// trip waits for the one before.
func TestAcquiresInParallel(t *testing.T) {
	t.Parallel()
	redistest.Real(t, func(t *testing.T, b *redistest.Backend) {
		const name, goroutines = "sem-parallel", 4
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		rc := &inFlight{Client: b.Client(t), name: "EVALSHA"}
		c, err := relock.New(rc, relock.WithTimeout(10*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		s := c.Semaphore(name)
		if ok, err := s.TrySetPermits(ctx, goroutines); !ok || err != nil {
			t.Fatalf("TrySetPermits: %v, %v", ok, err)
		}
		// The script is loaded now, so that the attempts below are one EVALSHA each.
		if ok, err := s.TryAcquire(ctx, 1); !ok || err != nil {
			t.Fatalf("TryAcquire: %v, %v", ok, err)
		}
		if err := s.Release(ctx, 1); err != nil {
			t.Fatal(err)
		}
		rc.most.Store(0)

		slept := make(chan error, 1)
		// The server is asleep for 1.5s after the Acquires start: less than the harness's
		// dial timeout (2s), since an attempt may go out on a connection that rueidis dials
		// only then, whose handshake fails the attempt if the server sleeps through it.
		go func() { slept <- b.Server.Do(t, "DEBUG", "SLEEP", "2").Error() }()
		time.Sleep(500 * time.Millisecond)
		var wg sync.WaitGroup
		errs := make(chan error, goroutines)
		for range goroutines {
			wg.Add(1)
			go func() {
				defer wg.Done()
				errs <- s.Acquire(ctx, 1)
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			if err != nil {
				t.Fatal(err)
			}
		}
		if err := redistest.Recv(t, slept, 10*time.Second, "DEBUG SLEEP's reply"); err != nil {
			t.Fatal(err)
		}
		if most := rc.most.Load(); most < 2 {
			t.Errorf("at most %d acquire attempt(s) of the client in flight at once; want the %d Acquires' attempts side by side", most, goroutines)
		}
		if n, err := s.AvailablePermits(ctx); err != nil || n != 0 {
			t.Errorf("AvailablePermits = %d, %v; want 0", n, err)
		}
		if err := s.Release(ctx, goroutines); err != nil {
			t.Fatal(err)
		}
	})
}
