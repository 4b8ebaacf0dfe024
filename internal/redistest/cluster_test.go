package redistest

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/redis/rueidis"
)

func TestClusterComesUpWithThreeShards(t *testing.T) {
	t.Parallel()
	start := time.Now()
	c := StartCluster(t)
	t.Logf("cluster ready after %v", time.Since(start))

	if n := len(c.Addrs()); n != 6 {
		t.Fatalf("Addrs has %d entries, want 6", n)
	}
	masters, replicas := c.Masters(), c.Replicas()
	if len(masters) != 3 || len(replicas) != 3 {
		t.Fatalf("%d masters and %d replicas, want 3 and 3", len(masters), len(replicas))
	}
	for _, m := range masters {
		if slices.Contains(replicas, m) {
			t.Fatalf("%s is listed as both master and replica", m.Addr())
		}
		r := c.ReplicaOf(m)
		if !slices.Contains(replicas, r) {
			t.Fatalf("ReplicaOf(%s) = %s, not one of the replicas", m.Addr(), r.Addr())
		}
		if role := mustRole(t, r); role != "slave" {
			t.Fatalf("replica %s reports role %q", r.Addr(), role)
		}
		if role := mustRole(t, m); role != "master" {
			t.Fatalf("master %s reports role %q", m.Addr(), role)
		}
	}
	// Every master owns some slots. Each MasterOf asks the cluster afresh,
	// so a sample of slots keeps this quick; the ranges are thousands of
	// slots wide.
	owners := map[*Server]int{}
	for slot := 0; slot < clusterSlots; slot += 256 {
		owners[c.MasterOf(uint16(slot))]++
	}
	owners[c.MasterOf(clusterSlots-1)]++
	if len(owners) != 3 {
		t.Fatalf("slots are served by %d masters, want 3", len(owners))
	}
	for _, s := range c.Addrs() {
		info, err := c.byAddr[s].Do(t, "CLUSTER", "INFO").ToString()
		if err != nil {
			t.Fatalf("CLUSTER INFO on %s: %v", s, err)
		}
		for _, want := range []string{"cluster_state:ok", "cluster_slots_assigned:16384", "cluster_known_nodes:6"} {
			if !strings.Contains(info, want) {
				t.Fatalf("CLUSTER INFO on %s lacks %q:\n%s", s, want, info)
			}
		}
	}
}

func TestClusterClientReachesEveryMaster(t *testing.T) {
	t.Parallel()
	c := StartCluster(t)
	cl := c.Client(t)
	ctx := context.Background()

	keys := keysOnEveryMaster(t, c)
	for m, key := range keys {
		if err := cl.Do(ctx, cl.B().Set().Key(key).Value("v-"+key).Build()).Error(); err != nil {
			t.Fatalf("SET %s: %v", key, err)
		}
		got, err := cl.Do(ctx, cl.B().Get().Key(key).Build()).ToString()
		if err != nil || got != "v-"+key {
			t.Fatalf("GET %s = %q, %v; want %q", key, got, err, "v-"+key)
		}
		// The key must have landed on the master that owns its slot, not
		// merely somewhere the client can read it back from.
		direct, err := m.Do(t, "GET", key).ToString()
		if err != nil || direct != "v-"+key {
			t.Fatalf("GET %s on its master %s = %q, %v", key, m.Addr(), direct, err)
		}
	}
	// Backend.Keys asks every master: the cluster client's KEYS reaches one only.
	var want []string
	for _, key := range keys {
		want = append(want, key)
	}
	b := &Backend{Name: nameCluster, Addr: c.nodes[0].Addr(), Cluster: c}
	got := b.Keys(t, cl, "key-*")
	slices.Sort(want)
	slices.Sort(got)
	if !slices.Equal(got, want) {
		t.Fatalf("Keys(key-*) = %q; want the key of every master %q", got, want)
	}
}

func TestClusterFailoverSwapsRoles(t *testing.T) {
	t.Parallel()
	c := StartCluster(t)
	m := c.Masters()[0]
	r := c.ReplicaOf(m)
	slot := c.Slot("{a}")
	owner := c.MasterOf(slot)

	start := time.Now()
	c.Failover(t, r)
	t.Logf("manual failover of %s to %s took %v", m.Addr(), r.Addr(), time.Since(start))

	if role := mustRole(t, r); role != "master" {
		t.Fatalf("after Failover the old replica reports role %q", role)
	}
	if slices.Contains(c.Masters(), m) {
		t.Fatalf("old master %s still serves slots", m.Addr())
	}
	// The old master is demoted to a replica of its old replica; that is
	// announced by gossip and may take a moment to show in every map.
	deadline := time.Now().Add(5 * time.Second)
	for c.ReplicaOf(r) != m || mustRole(t, m) != "slave" {
		if time.Now().After(deadline) {
			t.Fatalf("old master %s did not become replica of %s within 5s", m.Addr(), r.Addr())
		}
		time.Sleep(pollInterval)
	}
	// Slots of other shards are unaffected.
	if owner != m && c.MasterOf(slot) != owner {
		t.Fatalf("slot %d moved from %s to %s", slot, owner.Addr(), c.MasterOf(slot).Addr())
	}
}

func TestClusterKillMasterPromotesReplica(t *testing.T) {
	t.Parallel()
	c := StartCluster(t)
	cl := c.Client(t)
	ctx := context.Background()

	keys := keysOnEveryMaster(t, c)
	m := c.Masters()[0]
	r := c.ReplicaOf(m)
	key := keys[m]
	if err := cl.Do(ctx, cl.B().Set().Key(key).Value("before").Build()).Error(); err != nil {
		t.Fatalf("SET %s: %v", key, err)
	}
	// Make sure the write reached the replica, so that the promoted
	// replica must have it.
	if n, err := m.Do(t, "WAIT", "1", "5000").AsInt64(); err != nil || n != 1 {
		t.Fatalf("WAIT 1 = %d, %v; want 1", n, err)
	}

	start := time.Now()
	m.Kill(t)
	c.WaitHealthy(t, 20*time.Second)
	t.Logf("killed master %s; cluster healthy again with %s promoted after %v", m.Addr(), r.Addr(), time.Since(start))

	if got := c.MasterOf(c.Slot(key)); got != r {
		t.Fatalf("slot of %s is served by %s, want the promoted replica %s", key, got.Addr(), r.Addr())
	}
	if role := mustRole(t, r); role != "master" {
		t.Fatalf("promoted replica reports role %q", role)
	}

	// The client still points at the dead master until it refreshes its
	// slot map, which a failed command triggers; retry for a bounded time.
	start = time.Now()
	got, err := retryString(ctx, 10*time.Second, func(ctx context.Context) (string, error) {
		return cl.Do(ctx, cl.B().Get().Key(key).Build()).ToString()
	})
	if err != nil || got != "before" {
		t.Fatalf("GET %s after failover = %q, %v; want %q", key, got, err, "before")
	}
	t.Logf("client read from the new master after %v", time.Since(start))
	if err := cl.Do(ctx, cl.B().Set().Key(key).Value("after").Build()).Error(); err != nil {
		t.Fatalf("SET %s after failover: %v", key, err)
	}
	if got, err := r.Do(t, "GET", key).ToString(); err != nil || got != "after" {
		t.Fatalf("GET %s on the new master = %q, %v; want %q", key, got, err, "after")
	}
}

// keysOnEveryMaster returns one key per master, by the master that owns it.
func keysOnEveryMaster(t *testing.T, c *Cluster) map[*Server]string {
	t.Helper()
	keys := map[*Server]string{}
	for _, key := range c.NamesOnEveryMaster(t, "key-") {
		keys[c.MasterOf(c.Slot(key))] = key
	}
	if len(keys) != len(c.Masters()) {
		t.Fatalf("NamesOnEveryMaster: keys %v on %d masters; want one on each of %d", keys, len(keys), len(c.Masters()))
	}
	return keys
}

// mustRole returns s's ROLE, failing the test if s does not answer.
func mustRole(t *testing.T, s *Server) string {
	t.Helper()
	reply, err := s.Do(t, "ROLE").ToArray()
	if err != nil || len(reply) == 0 {
		t.Fatalf("ROLE on %s: %v", s.Addr(), err)
	}
	role, err := reply[0].ToString()
	if err != nil {
		t.Fatalf("ROLE on %s: %v", s.Addr(), err)
	}
	return role
}

// retryString calls fn, each call bounded by a second, until it succeeds
// or timeout passes, and returns the last result.
func retryString(ctx context.Context, timeout time.Duration, fn func(context.Context) (string, error)) (string, error) {
	deadline := time.Now().Add(timeout)
	for {
		cctx, cancel := context.WithTimeout(ctx, time.Second)
		v, err := fn(cctx)
		cancel()
		if err == nil || rueidis.IsRedisNil(err) || time.Now().After(deadline) {
			return v, err
		}
		time.Sleep(pollInterval)
	}
}

// TestClusterWaitHealthySkipsPausedReplica checks that a node that does not
// answer is left out of WaitHealthy's checks instead of stalling it, and
// that a paused master is not: its slots have no reachable server.
func TestClusterWaitHealthySkipsPausedReplica(t *testing.T) {
	t.Parallel()
	c := StartCluster(t)
	m := c.Masters()[0]
	r := c.ReplicaOf(m)

	r.Pause(t)
	start := time.Now()
	c.WaitHealthy(t, 10*time.Second)
	t.Logf("WaitHealthy with a paused replica returned after %v", time.Since(start))
	r.Resume(t)

	// healthErr takes its reference slot map from the first node that
	// answers. Pausing a master other than the first node makes that map
	// come from before the cluster could fail the master over (which takes
	// over a second), so the check cannot race with a failover.
	m = c.Masters()[0]
	if m == c.nodes[0] {
		m = c.Masters()[1]
	}
	m.Pause(t)
	defer m.Resume(t)
	if err := c.healthErr(); err == nil {
		t.Fatal("cluster reported healthy while a master is paused")
	}
}
