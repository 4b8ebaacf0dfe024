package hub

import (
	"context"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/relock-go/relock/internal/keys"
	"github.com/relock-go/relock/internal/redistest"
)

// The router's slot map, read from a real CLUSTER SLOTS reply, names the master a channel's
// slot is served by. A master whose endpoint the cluster does not know (nil, under
// cluster-preferred-endpoint-type unknown-endpoint; "?", under hostname with none set) is served, and routes as the client does. A slot the map leaves out is not known yet: mid-failover
// a node omits a shard whose old master it already counts as a replica, and a receiver
// that then subscribed through the client's own routing, which may still point at the
// demoted master, would keep a subscription that no unlock reaches and nothing checks. It
// must look again.
func TestSlotMapFind(t *testing.T) {
	// A lone node knows its address only when told to announce it.
	s := redistest.StartServer(t, "--cluster-enabled", "yes", "--cluster-announce-ip", "127.0.0.1")
	if err := s.Do(t, "CLUSTER", "ADDSLOTSRANGE", "0", "999", "5000", "5999").Error(); err != nil {
		t.Fatal(err)
	}
	read := func() []slotRange {
		t.Helper()
		reply, err := s.Do(t, "CLUSTER", "SLOTS").ToArray()
		if err != nil {
			t.Fatal(err)
		}
		ranges, err := parseSlots(reply)
		if err != nil {
			t.Fatal(err)
		}
		return ranges
	}
	check := func(ranges []slotRange, slot uint16, master string, found bool) {
		t.Helper()
		if got, ok := find(ranges, slot); got != master || ok != found {
			t.Errorf("slot %d: got (%q, %v), want (%q, %v)", slot, got, ok, master, found)
		}
	}
	ranges := read()
	for _, slot := range []uint16{0, 999, 5000, 5999} {
		check(ranges, slot, s.Addr(), true)
	}
	for _, slot := range []uint16{1000, 4999, 6000, 16383} {
		check(ranges, slot, "", false)
	}

	if err := s.Do(t, "CONFIG", "SET", "cluster-preferred-endpoint-type", "unknown-endpoint").Error(); err != nil {
		t.Fatal(err)
	}
	ranges = read()
	check(ranges, 0, "", true) // served: the client's routing
	check(ranges, 5999, "", true)
	check(ranges, 1000, "", false) // not served: look again

	// Asked for hostnames, a node that has none announces "?" as its endpoint: unknown too.
	if err := s.Do(t, "CONFIG", "SET", "cluster-preferred-endpoint-type", "hostname").Error(); err != nil {
		t.Fatal(err)
	}
	ranges = read()
	check(ranges, 0, "", true) // served: the client's routing, not an address "?:port"
	check(ranges, 5999, "", true)
	check(ranges, 1000, "", false)
	if _, ok := find(nil, 1); ok {
		t.Error("an empty map found a slot")
	}
}

// route sends a subscription to the node that the cluster's map names, checked; through the
// client's own routing, unchecked, for a master of unknown endpoint; and nowhere while the
// slot is missing from the map, so that the receiver looks again.
func TestRouteBySlotMap(t *testing.T) {
	cl := redistest.StartCluster(t)
	rc := cl.Client(t)
	r := newRouter(rc)
	if !r.cluster {
		t.Fatal("the router does not take the cluster client for a cluster")
	}
	const name = "redisson_lock__channel:{route}"
	slot := keys.Slot(name)
	master := cl.MasterOf(slot)
	id, err := master.Do(t, "CLUSTER", "MYID").ToString()
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	which := func(node rueidis.Client) string {
		switch node {
		case nil:
			return "no node"
		case rc:
			return "the client itself"
		}
		return "one node"
	}
	set := func(ranges ...slotRange) {
		r.mu.Lock()
		r.ranges = ranges
		r.mu.Unlock()
	}

	set(slotRange{start: slot, end: slot, master: master.Addr()})
	node, checked, _ := r.route(ctx, name)
	if node == nil || node == rc || !checked {
		t.Fatalf("named: got %s (checked %v); want the master's own node, checked", which(node), checked)
	}
	if got, err := node.Do(ctx, node.B().ClusterMyid().Build()).ToString(); err != nil || got != id {
		t.Errorf("named: routed to node %q (%v); want the master %s", got, err, id)
	}

	set(slotRange{start: slot, end: slot}) // a master of unknown endpoint
	if node, checked, _ := r.route(ctx, name); node != rc || checked {
		t.Errorf("unknown endpoint: got %s (checked %v); want the client itself, unchecked", which(node), checked)
	}

	set(slotRange{start: slot + 1, end: 16383, master: master.Addr()}) // the slot left out
	if node, checked, _ := r.route(ctx, name); node != nil || checked {
		t.Errorf("left out: got %s (checked %v); want no node, to look again", which(node), checked)
	}

	// A map that names a node the client knows, but which is a replica (the demoted master,
	// mid-failover): the replica accepts SSUBSCRIBE, and the attempt must end there
	// unconfirmed after its ROLE check, not stay where no unlock's message reaches. (A client
	// that refreshes its own map often knows the replicas too.)
	replica := cl.ReplicaOf(master).Addr()
	known := cl.ClientWith(t, func(o *rueidis.ClientOption) { o.ClusterOption.ShardsRefreshInterval = 100 * time.Millisecond })
	redistest.Eventually(t, 20*time.Second, "the client never connected to the replica", func() bool {
		_, ok := known.Nodes()[replica]
		return ok
	})
	r = newRouter(known)
	set(slotRange{start: slot, end: slot, master: replica})
	h := New(known, Config{Sharded: true})
	t.Cleanup(h.Close)
	c := &channel{ready: make(chan struct{})}
	sctx, scancel := context.WithCancel(ctx)
	defer scancel()
	done := make(chan struct{})
	go func() {
		defer close(done)
		h.subscribeOnce(sctx, name, c, r)
	}()
	select {
	case <-done:
	case <-time.After(2 * subscribeTimeout):
		h.mu.Lock()
		confirmed := c.confirmed
		h.mu.Unlock()
		t.Errorf("the attempt on a replica went on (confirmed %v): its ROLE check did not end it", confirmed)
		scancel()
		<-done
	}
}

// check confirms a subscription made on a node that answers ROLE as a master, and ends the
// attempt, unconfirmed, on one that answers as a replica: mid-failover the cluster's map may
// still name the demoted master, which accepts SSUBSCRIBE as a replica while the shard's
// messages are published on the new master, so waiters would sleep until their bound.
func TestRoleCheck(t *testing.T) {
	master := redistest.StartServer(t)
	replica := redistest.StartServer(t)
	host, port, err := net.SplitHostPort(master.Addr())
	if err != nil {
		t.Fatal(err)
	}
	if err := replica.Do(t, "REPLICAOF", host, port).Error(); err != nil {
		t.Fatal(err)
	}
	h := New(master.Client(t), Config{Sharded: true})
	t.Cleanup(h.Close)
	for _, tc := range []struct {
		name string
		node *redistest.Server
		want bool
	}{{"master", master, true}, {"replica", replica, false}} {
		c := &channel{ready: make(chan struct{})}
		ctx, cancel := context.WithCancel(context.Background())
		bound := time.AfterFunc(time.Hour, cancel)
		h.check(ctx, cancel, tc.node.Client(t), c, bound)
		bound.Stop()
		h.mu.Lock()
		confirmed := c.confirmed
		h.mu.Unlock()
		if confirmed != tc.want || (ctx.Err() == nil) != tc.want {
			t.Errorf("%s: confirmed %v, attempt ended %v; want confirmed %v, ended %v", tc.name, confirmed, ctx.Err() != nil, tc.want, !tc.want)
		}
		cancel()
	}
}

// A slot-map query that the client holds up past its context (rueidis sends it to any
// node, and a call to a node whose connection is being dialled waits for the dial) costs
// the router routeTimeout, not the dial: the route is not known yet, and the next asks
// again. Guards against a router that waits for the query's return while it holds the
// lock every channel's route takes, so that no channel subscribes for as long as the dial
// takes.
func TestRouteQueryHeldUpEndsByItsBound(t *testing.T) {
	rc := redistest.Mini(t).Client(t)
	held := &heldSlots{Client: rc, release: make(chan struct{})}
	defer held.free()
	r := &router{rc: held, cluster: true}
	done := make(chan bool, 1)
	go func() {
		_, known, _ := r.master(context.Background(), 0)
		done <- known
	}()
	select {
	case known := <-done:
		if known {
			t.Error("a route whose slot map never came is known")
		}
	case <-time.After(10 * routeTimeout):
		t.Fatalf("the route still waits %v after its query was sent (its bound is %v)", 10*routeTimeout, routeTimeout)
	}
	held.free()
	// The query left behind returns once freed, and changes nothing: the map is asked
	// for again, and read, by the next route (miniredis answers CLUSTER SLOTS with itself
	// for every slot).
	if addr, known, _ := r.master(redistest.Context(t, time.Minute), 0); !known || addr == "" {
		t.Errorf("the route once the query is answered: %q, known %v; want the server's address", addr, known)
	}
}

// heldSlots is a client whose CLUSTER SLOTS queries wait until free, whatever their
// context says, as rueidis's calls wait for a dial.
type heldSlots struct {
	rueidis.Client
	release chan struct{}
	once    sync.Once
}

func (h *heldSlots) free() { h.once.Do(func() { close(h.release) }) }

func (h *heldSlots) Do(ctx context.Context, cmd rueidis.Completed) rueidis.RedisResult {
	if c := cmd.Commands(); len(c) > 1 && c[0] == "CLUSTER" && c[1] == "SLOTS" {
		<-h.release
	}
	return h.Client.Do(ctx, cmd)
}
