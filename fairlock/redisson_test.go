package fairlock_test

import (
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/relock-go/relock"
	"github.com/relock-go/relock/fairlock"
	"github.com/relock-go/relock/internal/redistest"
	"github.com/relock-go/relock/internal/redistest/javaside"
	"github.com/relock-go/relock/internal/redistest/relocktest"
)

// The docs tell never to take one fair lock from both Java and Go: the two keep the queue
// differently. A migration that slips must still not let two owners in at once: both
// sides take the lock only when its hash is absent, so mutual exclusion holds whatever
// each makes of the other's queue entries, and every owner gets the lock in the end (each
// side's waiters come back by themselves at their lease or deadline, and each side's
// unlock publishes "0" to the owner at the head of the queue, on the channel that side's
// waiters listen on). What is lost is the order: a Redisson grant takes its thread wait
// time off every waiter's deadline, relock's included, and the next Redisson attempt drops
// them from the queue; a relock waiter then learns its turn only when it comes back to
// refresh its entry. Go and Java owners, two each, take turns on one fair lock: no two are
// ever inside at once, and all finish.
func TestSharedWithRedissonFairLockKeepsExclusion(t *testing.T) {
	t.Parallel()
	const (
		name     = "mixed-fair"
		sections = 6
		lease    = 8 * time.Second
	)
	for _, threadWait := range []time.Duration{5 * time.Second, 5 * time.Minute} { // 5 min: Redisson's default
		t.Run(fmt.Sprintf("threadWait=%v", threadWait), func(t *testing.T) {
			redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
				ctx := redistest.Context(t, 90*time.Second)
				c := relocktest.New(t, b, relock.WithWatchdogTimeout(lease))
				java := javaside.New(b.Client(t), false)
				var (
					inside, overlaps, done atomic.Int32
					longest                [2]atomic.Int64 // the longest wait for the lock: Go's, Java's
					wg                     sync.WaitGroup
					errs                   = make(chan error, 8)
				)
				section := func() {
					if inside.Add(1) != 1 {
						overlaps.Add(1)
					}
					time.Sleep(2 * time.Millisecond)
					inside.Add(-1)
				}
				mu := c.FairLock(name)
				for range 2 {
					wg.Add(1)
					go func() {
						defer wg.Done()
						for range sections {
							began := time.Now()
							held, err := mu.Lock(relock.NewOwner(ctx))
							longer(&longest[0], time.Since(began))
							if err != nil {
								errs <- fmt.Errorf("Go Lock: %w", err)
								return
							}
							section()
							if err := mu.Unlock(held); err != nil {
								errs <- fmt.Errorf("Go Unlock: %w", err)
								return
							}
							done.Add(1)
						}
					}()
				}
				for g := range 2 {
					owner := fmt.Sprintf("5df8512c-e096-4359-bc82-07efb0bc9d8e:%d", g+1)
					told := b.Listen(t, javaside.FairChannel(name, owner))
					wg.Add(1)
					go func() {
						defer wg.Done()
						for range sections {
							// Redisson's tryLock: an attempt, then a wait for a message on the
							// owner's channel or for the time the attempt gave, and again.
							began := time.Now()
							for {
								heard := len(told.Messages())
								ok, wait, err := java.FairLock(ctx, name, owner, lease, threadWait, time.Now())
								if err != nil {
									errs <- fmt.Errorf("Java FairLock: %w", err)
									return
								}
								if ok {
									break
								}
								if ctx.Err() != nil {
									errs <- fmt.Errorf("Java owner %s still waiting: %w", owner, ctx.Err())
									return
								}
								wait = max(min(wait, lease), 5*time.Millisecond)
								for end := time.Now().Add(wait); time.Now().Before(end) && len(told.Messages()) == heard; {
									time.Sleep(time.Millisecond)
								}
							}
							longer(&longest[1], time.Since(began))
							section()
							if u, err := java.FairUnlock(ctx, name, owner, time.Now()); err != nil || u != javaside.Released {
								errs <- fmt.Errorf("Java FairUnlock = %v, %v; want released", u, err)
								return
							}
							done.Add(1)
						}
					}()
				}
				finished := make(chan struct{})
				go func() { wg.Wait(); close(finished) }()
				redistest.Recv(t, finished, 100*time.Second, "every owner's sections")
				close(errs)
				for err := range errs {
					t.Error(err)
				}
				t.Logf("longest wait: Go %v, Java %v (lease %v, Go waiters' refresh period %v)", time.Duration(longest[0].Load()).Round(time.Millisecond),
					time.Duration(longest[1].Load()).Round(time.Millisecond), lease, fairlock.DefaultRefreshPeriod)
				if n := overlaps.Load(); n > 0 {
					t.Errorf("%d sections began while another owner was inside", n)
				}
				if n := done.Load(); n != 4*sections {
					t.Errorf("%d sections done; want %d", n, 4*sections)
				}
			})
		})
	}
}

// longer raises m to d if d is longer.
func longer(m *atomic.Int64, d time.Duration) {
	for {
		old := m.Load()
		if int64(d) <= old || m.CompareAndSwap(old, int64(d)) {
			return
		}
	}
}
