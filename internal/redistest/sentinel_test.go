package redistest

import (
	"context"
	"slices"
	"testing"
	"time"
)

func TestSentinelComesUp(t *testing.T) {
	t.Parallel()
	start := time.Now()
	s := StartSentinel(t)
	t.Logf("sentinel setup ready after %v", time.Since(start))

	if s.MasterName() != "relock" {
		t.Fatalf("MasterName = %q, want relock", s.MasterName())
	}
	addrs := s.SentinelAddrs()
	if len(addrs) != 3 {
		t.Fatalf("SentinelAddrs = %v, want three", addrs)
	}
	slices.Sort(addrs)
	if len(slices.Compact(addrs)) != 3 {
		t.Fatalf("sentinel addresses are not distinct: %v", addrs)
	}
	m, r := s.Master(), s.Replica()
	if m == r {
		t.Fatalf("Master and Replica are both %s", m.Addr())
	}
	if role := mustRole(t, m); role != "master" {
		t.Fatalf("master %s reports role %q", m.Addr(), role)
	}
	if role := mustRole(t, r); role != "slave" {
		t.Fatalf("replica %s reports role %q", r.Addr(), role)
	}
}

func TestSentinelClientSurvivesFailover(t *testing.T) {
	t.Parallel()
	s := StartSentinel(t)
	c := s.Client(t)
	ctx := context.Background()

	if err := c.Do(ctx, c.B().Set().Key("k").Value("before").Build()).Error(); err != nil {
		t.Fatalf("SET: %v", err)
	}
	if got, err := c.Do(ctx, c.B().Get().Key("k").Build()).ToString(); err != nil || got != "before" {
		t.Fatalf("GET = %q, %v; want %q", got, err, "before")
	}
	old, replica := s.Master(), s.Replica()
	// The write must have reached the replica, or the promoted replica
	// could lack it and the check below would be meaningless.
	if n, err := old.Do(t, "WAIT", "1", "5000").AsInt64(); err != nil || n != 1 {
		t.Fatalf("WAIT 1 = %d, %v; want 1", n, err)
	}

	start := time.Now()
	old.Kill(t)
	s.WaitFailover(t, old, 30*time.Second)
	t.Logf("killed master %s; sentinels promoted %s after %v", old.Addr(), s.Master().Addr(), time.Since(start))
	if s.Master() != replica {
		t.Fatalf("new master is %s, want the old replica %s", s.Master().Addr(), replica.Addr())
	}

	start = time.Now()
	_, err := retryString(ctx, 15*time.Second, func(ctx context.Context) (string, error) {
		return "", c.Do(ctx, c.B().Set().Key("k").Value("after").Build()).Error()
	})
	if err != nil {
		t.Fatalf("SET after failover: %v", err)
	}
	t.Logf("client wrote to the new master %v after the failover was reported", time.Since(start))
	if got, err := replica.Do(t, "GET", "k").ToString(); err != nil || got != "after" {
		t.Fatalf("GET on the new master = %q, %v; want %q", got, err, "after")
	}
}
