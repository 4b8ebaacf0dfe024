package relock_test

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/relock-go/relock"
	"github.com/relock-go/relock/internal/redistest"
	"github.com/relock-go/relock/rlock"
)

// spreadNames returns one lock name per master of the cluster, so a test covers them all.
func spreadNames(t *testing.T, cl *redistest.Cluster, prefix string) []string {
	t.Helper()
	byMaster := map[string]string{}
	for i := 0; len(byMaster) < 3 && i < 1000; i++ {
		name := prefix + strconv.Itoa(i)
		m := cl.MasterOf(cl.Slot(name)).Addr()
		if _, ok := byMaster[m]; !ok {
			byMaster[m] = name
		}
	}
	if len(byMaster) != 3 {
		t.Fatalf("names cover %d masters; want 3", len(byMaster))
	}
	var names []string
	for _, n := range byMaster {
		names = append(names, n)
	}
	return names
}

func clusterClient(t *testing.T, cl *redistest.Cluster, opts ...relock.Option) *relock.Client {
	t.Helper()
	c, err := relock.New(cl.Client(t), opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// The lock kinds on a 3-master cluster, with names on every master: mutual exclusion,
// re-entry, waiters woken by sharded messages, renewal, lease loss, fair order and shared
// reads. Wake-ups travel by SPUBLISH; no classic PUBLISH is sent.
func TestCluster(t *testing.T) {
	cl := redistest.StartCluster(t)
	c1 := clusterClient(t, cl, relock.WithWatchdogTimeout(900*time.Millisecond))
	c2 := clusterClient(t, cl, relock.WithWatchdogTimeout(900*time.Millisecond))
	side := cl.Client(t)
	ctx := context.Background()

	for _, name := range spreadNames(t, cl, "cluster-lock-") {
		t.Run(name, func(t *testing.T) {
			// Mutual exclusion across two clients, with re-entry inside.
			var counter int
			var wg sync.WaitGroup
			for g := 0; g < 8; g++ {
				mu := []*relock.Client{c1, c2}[g%2].Lock(name)
				wg.Add(1)
				go func() {
					defer wg.Done()
					for s := 0; s < 20; s++ {
						held, err := mu.Lock(ctx)
						if err != nil {
							t.Error(err)
							return
						}
						if held, err = mu.Lock(held); err != nil {
							t.Error(err)
							return
						}
						v := counter
						counter = v + 1
						_ = mu.Unlock(held)
						if err := mu.Unlock(held); err != nil {
							t.Error(err)
							return
						}
					}
				}()
			}
			wg.Wait()
			if counter != 160 {
				t.Errorf("counter %d; want 160", counter)
			}

			// A waiter parked on the shard is subscribed there and woken by the unlock.
			held, err := c1.Lock(name).Lock(ctx, rlock.WithLease(time.Minute))
			if err != nil {
				t.Fatal(err)
			}
			timedOut := c2.Stats().TimedOut
			got := make(chan error, 1)
			go func() {
				h, err := c2.Lock(name).Lock(ctx)
				if err == nil {
					err = c2.Lock(name).Unlock(h)
				}
				got <- err
			}()
			channel := "redisson_lock__channel:{" + name + "}"
			owner := cl.MasterOf(cl.Slot(name))
			waitUntil(t, "no shard subscription for the waiter", func() bool {
				v, err := owner.Do(t, "PUBSUB", "SHARDNUMSUB", channel).ToArray()
				if err != nil || len(v) != 2 {
					return false
				}
				n, _ := v[1].AsInt64()
				return n >= 1
			})
			if err := c1.Lock(name).Unlock(held); err != nil {
				t.Fatal(err)
			}
			if err := <-got; err != nil {
				t.Fatal(err)
			}
			if c2.Stats().TimedOut != timedOut {
				t.Error("the waiter was woken by its time bound, not by the sharded message")
			}

			// Renewal keeps a hold past its lease; deleting the key is noticed.
			hold, err := c1.Lock(name).Lock(ctx)
			if err != nil {
				t.Fatal(err)
			}
			time.Sleep(1500 * time.Millisecond)
			if hold.Err() != nil {
				t.Fatalf("hold lost while renewed: %v", context.Cause(hold))
			}
			if err := side.Do(ctx, side.B().Del().Key(name).Build()).Error(); err != nil {
				t.Fatal(err)
			}
			select {
			case <-hold.Done():
			case <-time.After(5 * time.Second):
				t.Fatal("lease loss not signalled")
			}

			// Fair order and shared reads on the same shard.
			fair, rwName := "{"+name+"}:fair", "{"+name+"}:rw" // the same shard
			fl := c1.FairLock(fair)
			first, err := fl.Lock(ctx)
			if err != nil {
				t.Fatal(err)
			}
			order := make(chan int, 3)
			for i := 0; i < 3; i++ {
				go func() {
					h, err := c2.FairLock(fair).Lock(ctx)
					if err == nil {
						order <- i
						err = c2.FairLock(fair).Unlock(h)
					}
					if err != nil {
						t.Error(err)
					}
				}()
				waitUntil(t, "fair waiter not queued", func() bool {
					n, _ := side.Do(ctx, side.B().Llen().Key("redisson_lock_queue:"+fair).Build()).AsInt64()
					return n == int64(i+1)
				})
			}
			if err := fl.Unlock(first); err != nil {
				t.Fatal(err)
			}
			for i := 0; i < 3; i++ {
				if got := <-order; got != i {
					t.Errorf("fair grant %d went to waiter %d", i, got)
				}
			}
			rw := c1.RWLock(rwName)
			r1, err := rw.RLock(relock.NewOwner(ctx))
			if err != nil {
				t.Fatal(err)
			}
			r2, err := c2.RWLock(rwName).RLock(ctx)
			if err != nil {
				t.Fatalf("second reader on the cluster: %v", err)
			}
			_ = rw.RUnlock(r1)
			_ = c2.RWLock(rwName).RUnlock(r2)
		})
	}

	var publish, spublish int64
	for _, n := range cl.Nodes() {
		st := n.CommandStats(t)
		publish += st["publish"]
		spublish += st["spublish"]
	}
	t.Logf("commands over the cluster: %d PUBLISH, %d SPUBLISH", publish, spublish)
	if publish != 0 || spublish == 0 {
		t.Errorf("%d classic PUBLISH and %d SPUBLISH; want wake-ups by sharded pub/sub only", publish, spublish)
	}
}

func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(15 * time.Second); !cond(); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal(what)
		}
	}
}

// failoverLoad runs a contended workload on names spread over the masters until stop is
// closed: each worker locks, checks nobody else is inside, and unlocks. It records errors
// with their times.
type failoverLoad struct {
	wg     sync.WaitGroup
	stop   chan struct{}
	ops    atomic.Int64
	inside map[string]*atomic.Int32
	mu     sync.Mutex
	errs   []time.Time
	msgs   []string // the errors, with their times since start
	start  time.Time
	overl  atomic.Int64
}

func startLoad(t *testing.T, clients []*relock.Client, names []string) *failoverLoad {
	l := &failoverLoad{stop: make(chan struct{}), inside: map[string]*atomic.Int32{}, start: time.Now()}
	for _, n := range names {
		l.inside[n] = new(atomic.Int32)
	}
	for w := 0; w < 12; w++ {
		name := names[w%len(names)]
		mu := clients[w%len(clients)].Lock(name)
		l.wg.Add(1)
		go func() {
			defer l.wg.Done()
			for {
				select {
				case <-l.stop:
					return
				default:
				}
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				held, err := mu.Lock(ctx)
				if err == nil {
					if l.inside[name].Add(1) != 1 && held.Err() == nil {
						l.overl.Add(1)
					}
					time.Sleep(time.Millisecond)
					l.inside[name].Add(-1)
					err = mu.Unlock(held)
				}
				cancel()
				if err != nil && !errors.Is(err, relock.ErrNotHeld) {
					l.mu.Lock()
					l.errs = append(l.errs, time.Now())
					l.msgs = append(l.msgs, fmt.Sprintf("%v: %v", time.Since(l.start).Round(time.Millisecond), err))
					l.mu.Unlock()
					time.Sleep(20 * time.Millisecond)
					continue
				}
				l.ops.Add(1)
			}
		}()
	}
	return l
}

// Manual failover (CLUSTER FAILOVER on a replica) under a contended workload: waiters
// finish, nobody overlaps, and no operation fails after a bounded retry window.
func TestClusterManualFailover(t *testing.T) {
	cl := redistest.StartCluster(t)
	// A manual failover pauses writes on the old master until the replica has caught up,
	// which on a loaded machine can take seconds: each call may take that long, and a
	// lock whose unlock failed all the same frees itself within its 3s lease.
	opts := []relock.Option{relock.WithTimeout(10 * time.Second), relock.WithWatchdogTimeout(3 * time.Second)}
	clients := []*relock.Client{clusterClient(t, cl, opts...), clusterClient(t, cl, opts...)}
	names := spreadNames(t, cl, "failover-")
	held, err := clients[0].Lock("held-through-failover").Lock(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	load := startLoad(t, clients, names)
	time.Sleep(500 * time.Millisecond)
	before := load.ops.Load()
	master := cl.MasterOf(cl.Slot(names[0]))
	start := time.Now()
	cl.Failover(t, cl.ReplicaOf(master))
	time.Sleep(2 * time.Second)
	window := time.Since(start)
	during := load.ops.Load()
	time.Sleep(2 * time.Second)
	close(load.stop)
	load.wg.Wait()

	late := 0
	for _, at := range load.errs {
		if at.After(start.Add(window)) {
			late++
		}
	}
	t.Logf("%d ops before, %d during, %d after the failover (at %v); %d errors, %d after the %v window; %d overlaps",
		before, during-before, load.ops.Load()-during, start.Sub(load.start).Round(time.Millisecond), len(load.errs), late, window.Round(time.Millisecond), load.overl.Load())
	for _, m := range load.msgs {
		t.Log(m)
	}
	if late != 0 {
		t.Errorf("%d operations failed after the %v retry window", late, window)
	}
	if load.ops.Load() <= during {
		t.Error("no lock operation succeeded after the failover")
	}
	if load.overl.Load() != 0 {
		t.Errorf("%d overlapping holds", load.overl.Load())
	}
	if held.Err() != nil {
		t.Errorf("a lock held through the manual failover was lost: %v", context.Cause(held))
	}
}

// A master killed with SIGKILL: lock service on its slots resumes once the cluster has
// failed over. The test records how long that took and whether a just-granted lock was lost.
func TestClusterMasterKilled(t *testing.T) {
	cl := redistest.StartCluster(t)
	c := clusterClient(t, cl, relock.WithWatchdogTimeout(1500*time.Millisecond))
	name := spreadNames(t, cl, "killed-")[0]
	master := cl.MasterOf(cl.Slot(name))
	probe := "{" + name + "}:after" // the killed master's slot
	if cl.Slot(probe) != cl.Slot(name) {
		t.Fatal("the probe is not in the lock's slot")
	}
	held, err := c.Lock(name).Lock(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	killed := time.Now()
	master.Kill(t)
	var resumed time.Duration
	for deadline := time.Now().Add(30 * time.Second); ; {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		h, err := c.Lock(probe).Lock(ctx)
		cancel()
		if err == nil {
			resumed = time.Since(killed)
			_ = c.Lock(probe).Unlock(h)
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("lock service did not resume within 30s of the kill: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	// Whether the grant survived depends on whether the replica had it: replication is
	// asynchronous. Either way the holder must not be left believing it holds a lost lock.
	lost := false
	select {
	case <-held.Done():
		lost = true
	case <-time.After(2 * time.Second):
	}
	still, _ := c.Lock(name).IsHeld(held)
	t.Logf("lock service resumed %v after the master was killed; the hold taken before the kill was %s",
		resumed.Round(time.Millisecond), map[bool]string{true: "lost (its context ended: " + fmt.Sprint(context.Cause(held)) + ")", false: "kept"}[lost])
	if !lost && !still {
		t.Error("the hold is gone in Redis but its context did not end")
	}
}

// Sentinel: the master killed with SIGKILL; the client follows the new master and locks
// work, waiters included.
func TestSentinelFailover(t *testing.T) {
	s := redistest.StartSentinel(t)
	rc := s.Client(t)
	c, err := relock.New(rc)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx := context.Background()
	if err := c.Lock("before").Do(ctx, func(context.Context) error { return nil }); err != nil {
		t.Fatal(err)
	}
	old := s.Master()
	old.Kill(t)
	s.WaitFailover(t, old, 30*time.Second)
	var held context.Context
	waitUntil(t, "no lock on the new master", func() bool {
		lctx, cancel := context.WithTimeout(ctx, time.Second)
		defer cancel()
		held, err = c.Lock("after").Lock(lctx)
		return err == nil
	})
	got := make(chan error, 1)
	go func() {
		wctx, cancel := context.WithTimeout(ctx, 20*time.Second)
		defer cancel()
		h, err := c.Lock("after").Lock(relock.NewOwner(wctx))
		if err == nil {
			err = c.Lock("after").Unlock(h)
		}
		got <- err
	}()
	waitUntil(t, "waiter not parked", func() bool { return c.Stats().Waiting == 1 })
	if err := c.Lock("after").Unlock(held); err != nil {
		t.Fatal(err)
	}
	if err := <-got; err != nil {
		t.Fatalf("waiter on the new master: %v", err)
	}
	role, _ := s.Master().Do(t, "ROLE").ToArray()
	if len(role) == 0 || !strings.EqualFold(mustString(role[0]), "master") || s.Master().Addr() == old.Addr() {
		t.Errorf("the sentinels' master %s is not a new master", s.Master().Addr())
	}
}

func mustString(m rueidis.RedisMessage) string {
	s, _ := m.ToString()
	return s
}
