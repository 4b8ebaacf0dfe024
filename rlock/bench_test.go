package rlock_test

import (
	"context"
	"slices"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/relock-go/relock"
	"github.com/relock-go/relock/internal/keys"
	"github.com/relock-go/relock/internal/redistest"
	"github.com/relock-go/relock/internal/script"
)

// benchClient returns a relock client on a fresh real redis-server.
func benchClient(b *testing.B, srv *redistest.Server) (*relock.Client, rueidis.Client) {
	b.Helper()
	rc := srv.Client(b)
	c, err := relock.New(rc)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { c.Close() })
	return c, rc
}

// BenchmarkLockUnlock: uncontended lock+unlock cycles, each goroutine on its own key.
func BenchmarkLockUnlock(b *testing.B) {
	c, _ := benchClient(b, redistest.StartServer(b))
	var seq atomic.Int64
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		mu := c.Lock("bench:" + strconv.FormatInt(seq.Add(1), 10))
		ctx := context.Background()
		for pb.Next() {
			held, err := mu.Lock(ctx)
			if err != nil {
				b.Error(err)
				return
			}
			if err := mu.Unlock(held); err != nil {
				b.Error(err)
				return
			}
		}
	})
}

// BenchmarkRawScripts sends the same acquire and unlock scripts straight through rueidis,
// with no library around them: the ceiling for BenchmarkLockUnlock.
func BenchmarkRawScripts(b *testing.B) {
	_, rc := benchClient(b, redistest.StartServer(b))
	var seq atomic.Int64
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		id := strconv.FormatInt(seq.Add(1), 10)
		name := "bench:" + id
		owner := "raw:" + id
		channel, wake := keys.Of(name).Channel, keys.Of(name).Wake
		ctx := context.Background()
		for pb.Next() {
			if err := script.RLockAcquire().Exec(ctx, rc, []string{name, wake}, []string{"30000", owner, "", "", channel, "publish"}).Error(); err != nil {
				b.Error(err)
				return
			}
			if err := script.RLockUnlock().Exec(ctx, rc, []string{name, channel, wake}, []string{"0", owner, "1", "publish"}).Error(); err != nil {
				b.Error(err)
				return
			}
		}
	})
}

// BenchmarkHandoff: a waiter on a second client is parked behind the holder; the time from
// the holder's Unlock returning to the waiter holding the lock is one handoff. Reported in
// microseconds and in round trips (PING, measured on the same server).
func BenchmarkHandoff(b *testing.B) {
	srv := redistest.StartServer(b)
	holder, rc := benchClient(b, srv)
	waiter, _ := benchClient(b, srv)
	ctx := context.Background()
	hmu, wmu := holder.Lock("handoff"), waiter.Lock("handoff")
	handoffs := make([]time.Duration, 0, b.N)
	rtts := make([]time.Duration, 0, b.N)

	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		held, err := hmu.Lock(ctx)
		if err != nil {
			b.Fatal(err)
		}
		acquired := make(chan time.Time, 1)
		go func() {
			h, err := wmu.Lock(ctx)
			t := time.Now()
			if err != nil {
				b.Error(err)
			}
			acquired <- t
			_ = wmu.Unlock(h)
		}()
		for waiter.PubSubStats().Waiting == 0 {
			time.Sleep(20 * time.Microsecond)
		}
		if err := hmu.Unlock(held); err != nil {
			b.Fatal(err)
		}
		released := time.Now()
		handoffs = append(handoffs, (<-acquired).Sub(released))
		for ok, _ := hmu.IsLocked(ctx); ok; ok, _ = hmu.IsLocked(ctx) {
		}
		// A round trip measured in the same conditions as the handoff it is compared to.
		t := time.Now()
		if err := rc.Do(ctx, rc.B().Ping().Build()).Error(); err != nil {
			b.Fatal(err)
		}
		rtts = append(rtts, time.Since(t))
	}
	b.StopTimer()
	p50, p99, rtt := percentile(handoffs, 50), percentile(handoffs, 99), percentile(rtts, 50)
	b.ReportMetric(float64(p50.Microseconds()), "p50-µs")
	b.ReportMetric(float64(p99.Microseconds()), "p99-µs")
	b.ReportMetric(float64(rtt.Microseconds()), "rtt-µs")
	b.ReportMetric(float64(p50)/float64(rtt), "p50-RTTs")
}

// percentile returns the p-th percentile of ds, sorting ds.
func percentile(ds []time.Duration, p int) time.Duration {
	slices.Sort(ds)
	return ds[(len(ds)-1)*p/100]
}

// BenchmarkWatchdog10k: one client holds 10,000 locks; each op is one renewal round.
// Reported: script calls and pipelined sends (round trips, one node) per round, and the
// client CPU time of a round.
func BenchmarkWatchdog10k(b *testing.B) {
	srv := redistest.StartServer(b)
	c, err := relock.New(srv.Client(b), relock.WithWatchdogTimeout(300*time.Millisecond))
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	held := context.Background()
	for i := 0; i < 10000; i++ {
		if held, err = c.Lock("wd:" + strconv.Itoa(i)).Lock(held); err != nil {
			b.Fatal(err)
		}
	}
	waitTicks := func(n uint64) {
		for c.WatchdogStats().Ticks < n {
			time.Sleep(time.Millisecond)
		}
	}
	waitTicks(1) // the first round may pay for NOSCRIPT
	start := c.WatchdogStats()
	cpu0 := cpuTime()
	b.ResetTimer()
	waitTicks(start.Ticks + uint64(b.N))
	b.StopTimer()
	end := c.WatchdogStats()
	rounds := float64(end.Ticks - start.Ticks)
	b.ReportMetric(float64(end.Calls-start.Calls)/rounds, "calls/round")
	b.ReportMetric(float64(end.Batches-start.Batches)/rounds, "sends/round")
	b.ReportMetric(float64(end.Renewed-start.Renewed)/rounds, "renewed/round")
	// The process's CPU over the rounds; the loop is idle between them.
	b.ReportMetric(float64((cpuTime()-cpu0).Microseconds())/rounds, "cpu-µs/round")
	if held.Err() != nil {
		b.Fatalf("holds lost during the benchmark: %v", context.Cause(held))
	}
}
