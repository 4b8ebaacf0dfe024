package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/rueidis"

	"github.com/relock-go/relock"
)

// --- S4: read-heavy, relock's read-write lock against its mutex

const (
	s4Workers   = 16
	s4ReadShare = 0.9
)

type s4Round struct {
	reads, writes int64
	elapsed       time.Duration
	errors        int64
	violations    int64 // a writer inside with anyone else, or a reader with a writer
}

// runS4 has s4Workers goroutines on one key do operations of which s4ReadShare are reads,
// each holding the lock for cs: on the read-write lock reads take a read hold; on the
// mutex (rw false) every operation takes the lock.
func runS4(addr string, rw bool, dur, cs time.Duration, round int) (s4Round, error) {
	rc, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{addr}})
	if err != nil {
		return s4Round{}, err
	}
	defer rc.Close()
	c, err := relock.New(rc)
	if err != nil {
		return s4Round{}, err
	}
	defer c.Close()
	key := fmt.Sprintf("s4:%d:%v:%v", round, cs, rw)
	rwl, mu := c.RWLock(key), c.Lock(key+":mutex")
	if err := warm(&relockInst{rc: rc, c: c}, key+":warm"); err != nil {
		return s4Round{}, err
	}
	var (
		wg                    sync.WaitGroup
		reads, writes, errs   atomic.Int64
		readers, writers, bad atomic.Int64
	)
	start := time.Now()
	ctx, cancel := context.WithDeadline(context.Background(), start.Add(dur))
	defer cancel()
	for w := range s4Workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rnd := rand.New(rand.NewPCG(uint64(round), uint64(w)))
			for n := 0; n < maxSamples && ctx.Err() == nil; n++ {
				read := rnd.Float64() < s4ReadShare
				var held context.Context
				var err error
				switch {
				case !rw:
					held, err = mu.Lock(ctx)
				case read:
					held, err = rwl.RLock(ctx)
				default:
					held, err = rwl.Lock(ctx)
				}
				if err != nil {
					if ctx.Err() == nil {
						errs.Add(1)
						pause(ctx, time.Millisecond)
					}
					continue
				}
				// Who is inside: a writer (or any mutex holder) must be alone.
				exclusive := !rw || !read
				if exclusive {
					if writers.Add(1) != 1 || readers.Load() != 0 {
						bad.Add(1)
					}
				} else if readers.Add(1); writers.Load() != 0 {
					bad.Add(1)
				}
				if cs > 0 {
					time.Sleep(cs)
				}
				if exclusive {
					writers.Add(-1)
				} else {
					readers.Add(-1)
				}
				switch {
				case !rw:
					err = mu.Unlock(held)
				case read:
					err = rwl.RUnlock(held)
				default:
					err = rwl.Unlock(held)
				}
				if err != nil {
					errs.Add(1)
					continue
				}
				if read {
					reads.Add(1)
				} else {
					writes.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	return s4Round{reads: reads.Load(), writes: writes.Load(), elapsed: time.Since(start),
		errors: errs.Load(), violations: bad.Load()}, nil
}
