package redistest

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/rueidis"
)

const (
	// clusterSize is six nodes: three masters, each with one replica, the
	// smallest layout in which every shard can fail over.
	clusterSize = 6
	// clusterSlots is the number of hash slots of Redis Cluster.
	clusterSlots = 16384
	// clusterNodeTimeout is the cluster-node-timeout in milliseconds. One
	// second is the smallest value that is still stable on a loaded CI
	// machine, and it bounds how soon a killed master is declared failed,
	// so failovers complete within a few seconds.
	clusterNodeTimeout = 1000
	// clusterStartTimeout bounds StartCluster's wait for a healthy cluster,
	// counted after `redis-cli --cluster create` has returned.
	clusterStartTimeout = 30 * time.Second
	// clusterCreateTimeout bounds `redis-cli --cluster create`, which
	// itself polls once a second until the nodes agree on the config. On a
	// loaded two-core machine the agreement has taken over 30s.
	clusterCreateTimeout = 90 * time.Second
	// failoverTimeout bounds Failover. A manual failover takes well under a
	// second on loopback; the rest is room for a slow machine.
	failoverTimeout = 15 * time.Second
	// queryTimeout bounds each polling query of the cluster and sentinel
	// helpers, so that a paused node counts as unreachable instead of
	// stalling the wait that polls it.
	queryTimeout = time.Second
	// pollInterval is the pause between polls of cluster and sentinel
	// state.
	pollInterval = 50 * time.Millisecond
)

// Cluster is a six-node Redis Cluster (three masters, three replicas)
// owned by one test. Each node is a *Server, so Pause, Resume, Kill,
// Restart, Do and CommandStats work on single nodes.
//
// Which node is a master changes with failovers, so Masters, Replicas,
// MasterOf and ReplicaOf ask the cluster each time rather than
// remembering the layout of StartCluster.
//
// The topology queries (Masters, Replicas, MasterOf, ReplicaOf, Slot) take
// no testing.TB and report failures to the test that called StartCluster,
// so call them from that test's goroutine.
type Cluster struct {
	t      testing.TB // the test that started the cluster
	nodes  []*Server
	byAddr map[string]*Server
}

// StartCluster starts six cluster-enabled redis-servers on free 127.0.0.1
// ports, joins them with `redis-cli --cluster create --cluster-replicas 1`,
// waits until every node reports cluster_state:ok, sees all 16384 slots
// covered, and every replica is in sync, and kills them all at t's cleanup.
//
// The nodes use a cluster-node-timeout of one second and accept a replica
// as failover candidate however stale it is, so that killing a master
// leads to a promotion within a few seconds. Replica migration is off, so
// every master keeps exactly its own replica.
//
// If redis-server or redis-cli is not on PATH the test is skipped, unless
// RELOCK_REQUIRE_REDIS is 1, in which case it fails.
func StartCluster(t testing.TB) *Cluster {
	t.Helper()
	bin := lookupServer(t)
	cli := lookupCLI(t)
	c := startCluster(t, bin, cli)
	c.t = t
	return c
}

// tb is the part of testing.TB that starting a cluster needs. It lets the
// cluster shared by a whole test binary (see Main and EachWithCluster) be
// started by an owner that is not one test.
type tb interface {
	Helper()
	Fatalf(format string, args ...any)
	Errorf(format string, args ...any)
	Logf(format string, args ...any)
	TempDir() string
	Cleanup(func())
}

// startCluster is StartCluster once the binaries are found. The Cluster it
// returns has no test of its own (c.t is nil): the caller sets one.
func startCluster(t tb, bin, cli string) *Cluster {
	t.Helper()
	c := &Cluster{byAddr: make(map[string]*Server, clusterSize)}
	for range clusterSize {
		s := startClusterNode(t, bin)
		c.nodes = append(c.nodes, s)
		c.byAddr[s.addr] = s
	}

	ctx, cancel := context.WithTimeout(context.Background(), clusterCreateTimeout)
	defer cancel()
	args := append([]string{"--cluster", "create"}, c.Addrs()...)
	args = append(args, "--cluster-replicas", "1", "--cluster-yes")
	cmd := exec.CommandContext(ctx, cli, args...)
	setProcAttr(cmd)
	// redis-cli is only waited for, never left running, but a hung one must
	// not keep the output pipe (and so CombinedOutput) open forever.
	cmd.WaitDelay = time.Second
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("redistest: redis-cli --cluster create: %v; its output:\n%s", err, out)
	}

	if err := untilOK(clusterStartTimeout, c.startedErr); err != nil {
		t.Fatalf("redistest: cluster not ready within %v: %v", clusterStartTimeout, err)
	}
	return c
}

// lookupCLI finds redis-cli or ends the test, with the same skip-or-fail
// rule as lookupServer.
func lookupCLI(t testing.TB) string {
	t.Helper()
	return lookupBinary(t, "redis-cli", "the Redis Cluster test", "install redis-cli, e.g. Debian's redis-tools")
}

// startClusterNode starts one cluster-enabled node. It does its own port
// selection instead of using StartServer because the node needs a second
// free port for the cluster bus: the default bus port, port+10000, lies
// beyond 65535 for much of the kernel's ephemeral range. Both ports go into
// s.args, so Restart brings the node back with the same ports and the same
// nodes-<port>.conf, and it rejoins the cluster as the same node.
func startClusterNode(t tb, bin string) *Server {
	t.Helper()
	s := &Server{bin: bin, dir: t.TempDir()}
	// Registered after t.TempDir so that it runs before the directory is
	// removed (cleanups are LIFO).
	t.Cleanup(func() { s.cleanup(t) })

	err := onFreePort(func(port int) error {
		bus, err := busPort(port)
		if err != nil {
			return fmt.Errorf("find a free cluster bus port: %w", err)
		}
		s.args = []string{
			"--cluster-enabled", "yes",
			"--cluster-config-file", filepath.Join(s.dir, "nodes-"+strconv.Itoa(port)+".conf"),
			"--cluster-port", strconv.Itoa(bus),
			"--cluster-node-timeout", strconv.Itoa(clusterNodeTimeout),
			"--cluster-allow-replica-migration", "no",
			// 0 lets a replica fail over however long ago it last heard
			// from its master, so a promotion never waits on data age.
			"--cluster-replica-validity-factor", "0",
			// The default 5s delay before a diskless full sync would
			// dominate the cluster's start time.
			"--repl-diskless-sync-delay", "0",
		}
		return s.startOn(port)
	})
	if err != nil {
		t.Fatalf("redistest: start cluster node: %v", err)
	}
	return s
}

// busPort returns a free loopback port other than port, for the cluster bus.
func busPort(port int) (int, error) {
	for range startAttempts {
		bus, err := freePort()
		if err != nil || bus != port {
			return bus, err
		}
	}
	return 0, errors.New("the kernel keeps handing out the same port")
}

// Addrs returns the addresses of all six nodes, in start order: the seed
// list for a cluster client.
func (c *Cluster) Addrs() []string {
	addrs := make([]string, len(c.nodes))
	for i, s := range c.nodes {
		addrs[i] = s.addr
	}
	return addrs
}

// Nodes returns all six nodes in start order, whatever their role.
func (c *Cluster) Nodes() []*Server {
	return slices.Clone(c.nodes)
}

// Masters returns the nodes that serve slots in the slot map of the first
// node that answers, ordered by their lowest slot. A master that was just
// killed is included until the cluster has promoted its replica.
func (c *Cluster) Masters() []*Server {
	t := c.t
	t.Helper()
	var masters []*Server
	for _, r := range c.view(t) {
		if s := c.server(t, r.master); !slices.Contains(masters, s) {
			masters = append(masters, s)
		}
	}
	return masters
}

// Replicas returns the replicas listed in the slot map of the first node
// that answers, in the order of their masters.
func (c *Cluster) Replicas() []*Server {
	t := c.t
	t.Helper()
	var replicas []*Server
	for _, r := range c.view(t) {
		for _, addr := range r.replicas {
			if s := c.server(t, addr); !slices.Contains(replicas, s) {
				replicas = append(replicas, s)
			}
		}
	}
	return replicas
}

// MasterOf returns the node that serves slot according to the first node
// that answers.
func (c *Cluster) MasterOf(slot uint16) *Server {
	t := c.t
	t.Helper()
	for _, r := range c.view(t) {
		if r.start <= slot && slot <= r.end {
			return c.server(t, r.master)
		}
	}
	t.Fatalf("redistest: no master serves slot %d", slot)
	return nil // not reached
}

// ReplicaOf returns the replica of master according to the first node that
// answers. It fails the test if master serves no slots or has no replica.
func (c *Cluster) ReplicaOf(master *Server) *Server {
	t := c.t
	t.Helper()
	for _, r := range c.view(t) {
		if r.master == master.addr && len(r.replicas) > 0 {
			return c.server(t, r.replicas[0])
		}
	}
	t.Fatalf("redistest: %s serves no slots or has no replica", master.addr)
	return nil // not reached
}

// Slot returns the hash slot of key, as computed by the cluster itself
// (CLUSTER KEYSLOT), so tests need no CRC16 of their own.
func (c *Cluster) Slot(key string) uint16 {
	t := c.t
	t.Helper()
	for _, s := range c.nodes {
		if !s.alive() {
			continue
		}
		m, err := tryDo(s.addr, "CLUSTER", "KEYSLOT", key)
		if err != nil {
			continue
		}
		n, err := m.AsInt64()
		if err != nil {
			t.Fatalf("redistest: CLUSTER KEYSLOT %q: %v", key, err)
		}
		return uint16(n)
	}
	t.Fatalf("redistest: CLUSTER KEYSLOT %q: no node answers", key)
	return 0 // not reached
}

// Client returns a new rueidis cluster client seeded with all six nodes,
// closed at t's cleanup. Client-side caching is off, as for Backend.Client.
func (c *Cluster) Client(t testing.TB) rueidis.Client {
	t.Helper()
	return c.ClientWith(t, func(*rueidis.ClientOption) {})
}

// ClientWith is Client with its options changed by adjust first: to log in as
// an ACL user, say.
func (c *Cluster) ClientWith(t testing.TB, adjust func(*rueidis.ClientOption)) rueidis.Client {
	t.Helper()
	opt := rueidis.ClientOption{
		InitAddress:  c.Addrs(),
		ShuffleInit:  true,
		DisableCache: true,
		Dialer:       net.Dialer{Timeout: dialTimeout},
	}
	adjust(&opt)
	return newClient(t, opt, "the cluster")
}

// Failover runs CLUSTER FAILOVER on replica, which swaps it with its
// master without losing writes, and waits until replica answers as master
// and the cluster is healthy again.
func (c *Cluster) Failover(t testing.TB, replica *Server) {
	t.Helper()
	if err := replica.Do(t, "CLUSTER", "FAILOVER").Error(); err != nil {
		t.Fatalf("redistest: CLUSTER FAILOVER on %s: %v", replica.addr, err)
	}
	err := untilOK(failoverTimeout, func() error {
		if err := c.healthErr(); err != nil {
			return err
		}
		role, err := roleOf(replica.addr)
		if err != nil {
			return err
		}
		if role != "master" {
			return fmt.Errorf("%s still reports role %s", replica.addr, role)
		}
		if !slices.ContainsFunc(c.mustView(), func(r slotRange) bool { return r.master == replica.addr }) {
			return fmt.Errorf("%s serves no slots yet", replica.addr)
		}
		return nil
	})
	if err != nil {
		t.Fatalf("redistest: failover to %s not done within %v: %v", replica.addr, failoverTimeout, err)
	}
}

// WaitHealthy waits up to timeout until every reachable node reports
// cluster_state:ok, every reachable node's slot map covers all 16384
// slots, the maps agree, and every master in them is reachable and
// answers ROLE as master. A node is reachable when it is running and
// answers within a second, so killed and paused nodes are left out.
func (c *Cluster) WaitHealthy(t testing.TB, timeout time.Duration) {
	t.Helper()
	if err := untilOK(timeout, c.healthErr); err != nil {
		t.Fatalf("redistest: cluster not healthy within %v: %v", timeout, err)
	}
}

// startedErr is healthErr plus what StartCluster promises beyond it: all
// six nodes take part, three masters with one in-sync replica each.
func (c *Cluster) startedErr() error {
	if err := c.healthErr(); err != nil {
		return err
	}
	view := c.mustView()
	masters := map[string]bool{}
	for _, r := range view {
		masters[r.master] = true
		if len(r.replicas) != 1 {
			return fmt.Errorf("master %s has replicas %v, want one", r.master, r.replicas)
		}
		info, err := tryString(r.replicas[0], "INFO", "replication")
		if err != nil {
			return fmt.Errorf("INFO replication on %s: %w", r.replicas[0], err)
		}
		if !strings.Contains(info, "master_link_status:up") {
			return fmt.Errorf("replica %s not in sync with %s yet", r.replicas[0], r.master)
		}
	}
	if len(masters) != clusterSize/2 {
		return fmt.Errorf("%d masters, want %d", len(masters), clusterSize/2)
	}
	return nil
}

// healthErr returns nil when the cluster is healthy in WaitHealthy's
// sense, and otherwise what is still wrong.
func (c *Cluster) healthErr() error {
	var first []slotRange
	var firstAddr string
	reachable := map[string]bool{}
	for _, s := range c.nodes {
		if !s.alive() {
			continue
		}
		info, err := tryString(s.addr, "CLUSTER", "INFO")
		if err != nil {
			continue // unreachable (paused, say): not asked for its view
		}
		reachable[s.addr] = true
		if !strings.Contains(info, "cluster_state:ok") {
			return fmt.Errorf("%s does not report cluster_state:ok", s.addr)
		}
		view, err := slotsOf(s.addr)
		if err != nil {
			return fmt.Errorf("CLUSTER SLOTS on %s: %w", s.addr, err)
		}
		if err := coverageErr(view); err != nil {
			return fmt.Errorf("slot map of %s: %w", s.addr, err)
		}
		if first == nil {
			first, firstAddr = view, s.addr
		} else if !sameOwners(first, view) {
			return fmt.Errorf("slot maps of %s and %s differ", firstAddr, s.addr)
		}
	}
	if first == nil {
		return errors.New("no node is reachable")
	}
	for _, r := range first {
		if !reachable[r.master] {
			return fmt.Errorf("slots %d-%d are served by unreachable %s", r.start, r.end, r.master)
		}
		role, err := roleOf(r.master)
		if err != nil {
			return fmt.Errorf("ROLE on %s: %w", r.master, err)
		}
		if role != "master" {
			return fmt.Errorf("%s serves slots %d-%d but reports role %s", r.master, r.start, r.end, role)
		}
	}
	return nil
}

// slotRange is one entry of CLUSTER SLOTS.
type slotRange struct {
	start, end uint16
	master     string   // address
	replicas   []string // addresses
}

// view returns the slot map of the first node that answers, or fails the
// test if none does.
func (c *Cluster) view(t testing.TB) []slotRange {
	t.Helper()
	var errs []error
	for _, s := range c.nodes {
		if !s.alive() {
			continue
		}
		v, err := slotsOf(s.addr)
		if err == nil {
			return v
		}
		errs = append(errs, err)
	}
	t.Fatalf("redistest: no cluster node answers CLUSTER SLOTS: %v", errors.Join(errs...))
	return nil // not reached
}

// mustView is view for callers that have just seen a healthy cluster and
// so only need the answer, not a test to fail; it returns nil if no node
// answers, which the caller's next poll turns into an error.
func (c *Cluster) mustView() []slotRange {
	for _, s := range c.nodes {
		if !s.alive() {
			continue
		}
		if v, err := slotsOf(s.addr); err == nil {
			return v
		}
	}
	return nil
}

// server maps a node address from CLUSTER SLOTS to its Server.
func (c *Cluster) server(t testing.TB, addr string) *Server {
	t.Helper()
	s, ok := c.byAddr[addr]
	if !ok {
		t.Fatalf("redistest: the cluster reports node %s, which is not one of its own", addr)
	}
	return s
}

// slotsOf returns addr's slot map, sorted by first slot.
//
// Masters come from CLUSTER SLOTS, which is what cluster clients route by.
// Replicas come from CLUSTER NODES instead: Redis 7.0 caches its CLUSTER
// SLOTS reply, and a replica that joined through gossip was seen to stay
// missing from it for several seconds after every node already listed it
// in CLUSTER NODES.
func slotsOf(addr string) ([]slotRange, error) {
	entries, err := tryArray(addr, "CLUSTER", "SLOTS")
	if err != nil {
		return nil, err
	}
	nodesText, err := tryString(addr, "CLUSTER", "NODES")
	if err != nil {
		return nil, err
	}
	replicas := replicasByMaster(nodesText)
	view := make([]slotRange, 0, len(entries))
	for _, e := range entries {
		fields, err := e.ToArray()
		if err != nil || len(fields) < 3 {
			return nil, fmt.Errorf("malformed CLUSTER SLOTS entry: %v", err)
		}
		start, err1 := fields[0].AsInt64()
		end, err2 := fields[1].AsInt64()
		if err := errors.Join(err1, err2); err != nil {
			return nil, fmt.Errorf("malformed CLUSTER SLOTS range: %w", err)
		}
		master, id, err := slotsNode(fields[2])
		if err != nil {
			return nil, err
		}
		view = append(view, slotRange{
			start:    uint16(start),
			end:      uint16(end),
			master:   master,
			replicas: replicas[id],
		})
	}
	slices.SortFunc(view, func(a, b slotRange) int { return int(a.start) - int(b.start) })
	return view, nil
}

// slotsNode turns a CLUSTER SLOTS node entry [ip, port, id, ...] into an
// address and node ID.
func slotsNode(m rueidis.RedisMessage) (addr, id string, err error) {
	f, err := m.ToArray()
	if err != nil || len(f) < 3 {
		return "", "", fmt.Errorf("malformed CLUSTER SLOTS node: %v", err)
	}
	ip, err1 := f[0].ToString()
	port, err2 := f[1].AsInt64()
	id, err3 := f[2].ToString()
	if err := errors.Join(err1, err2, err3); err != nil {
		return "", "", fmt.Errorf("malformed CLUSTER SLOTS node: %w", err)
	}
	return net.JoinHostPort(ip, strconv.FormatInt(port, 10)), id, nil
}

// replicasByMaster parses CLUSTER NODES into the addresses of the healthy
// replicas of each master, keyed by the master's node ID. A line reads
// "<id> <ip:port@busport[,hostname]> <flags> <master-id> ...".
func replicasByMaster(text string) map[string][]string {
	replicas := map[string][]string{}
	for line := range strings.Lines(text) {
		f := strings.Fields(line)
		if len(f) < 4 {
			continue
		}
		flags := strings.Split(f[2], ",")
		if !slices.Contains(flags, "slave") || slices.ContainsFunc(flags, func(fl string) bool {
			return fl == "fail" || fl == "fail?" || fl == "handshake" || fl == "noaddr"
		}) {
			continue
		}
		addr, _, _ := strings.Cut(f[1], "@")
		replicas[f[3]] = append(replicas[f[3]], addr)
	}
	for _, r := range replicas {
		slices.Sort(r)
	}
	return replicas
}

// coverageErr reports a slot map that leaves slots unserved. The ranges
// are sorted, so coverage means each starts right after the previous one.
func coverageErr(view []slotRange) error {
	next := 0
	for _, r := range view {
		if int(r.start) != next {
			return fmt.Errorf("slots %d-%d are not served", next, int(r.start)-1)
		}
		next = int(r.end) + 1
	}
	if next != clusterSlots {
		return fmt.Errorf("slots %d-%d are not served", next, clusterSlots-1)
	}
	return nil
}

// sameOwners reports whether two slot maps give every range the same
// master. Replica lists are not compared: a replica that just lost its
// master may drop out of one node's map a moment before another's, and
// that does not affect where commands go.
func sameOwners(a, b []slotRange) bool {
	return slices.EqualFunc(a, b, func(x, y slotRange) bool {
		return x.start == y.start && x.end == y.end && x.master == y.master
	})
}

// roleOf returns the first element of ROLE on addr: "master", "slave" or
// "sentinel".
func roleOf(addr string) (string, error) {
	reply, err := tryArray(addr, "ROLE")
	if err != nil {
		return "", err
	}
	if len(reply) == 0 {
		return "", errors.New("empty ROLE reply")
	}
	return reply[0].ToString()
}

// alive reports whether the server has a process that has not exited. It
// lets the pollers skip killed nodes without a connection attempt.
func (s *Server) alive() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.proc != nil && !s.proc.exited()
}

// tryDo runs one command on addr like Server.Do, but returns connection
// errors and timeouts instead of failing the test, and gives up after
// queryTimeout: the pollers treat a node that does not answer promptly
// (killed, paused) as unreachable and poll again.
func tryDo(addr string, args ...string) (rueidis.RedisMessage, error) {
	opt := clientOption(addr)
	opt.DisableRetry = true
	opt.ClientName = "redistest-side"
	opt.Dialer.Timeout = queryTimeout
	// Bounds the handshake of a connection to a paused server, which the
	// kernel accepts but nobody answers.
	opt.ConnWriteTimeout = queryTimeout
	c, err := rueidis.NewClient(opt)
	if err != nil {
		return rueidis.RedisMessage{}, err
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), queryTimeout)
	defer cancel()
	return c.Do(ctx, c.B().Arbitrary(args...).Build()).ToMessage()
}

// tryString is tryDo for commands that reply with a string.
func tryString(addr string, args ...string) (string, error) {
	m, err := tryDo(addr, args...)
	if err != nil {
		return "", err
	}
	return m.ToString()
}

// tryArray is tryDo for commands that reply with an array.
func tryArray(addr string, args ...string) ([]rueidis.RedisMessage, error) {
	m, err := tryDo(addr, args...)
	if err != nil {
		return nil, err
	}
	return m.ToArray()
}
