// Package redistest is the Redis test harness of the library.
//
// Lock semantics depend on server behaviour that is easy to get subtly wrong
// in a fake (script atomicity, PX expiry, error replies), while a real server
// cannot be used for everything either (it is slower to start and is not
// always installed). Tests therefore run each scenario against both a real
// redis-server, started per test on a free loopback port, and miniredis, whose
// TTLs are made to follow real time (miniredis's ClockTTL).
//
// Every backend is private to the test that asked for it and is torn down at
// that test's cleanup, so tests cannot observe each other's keys and may run
// in parallel.
package redistest

import (
	"net"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/rueidis"
)

const (
	nameRedis     = "redis"
	nameMiniredis = "miniredis"
	nameCluster   = "cluster"
)

// dialTimeout is short because every server is on loopback: a connect that
// takes longer than this means the server is gone or stopped, and tests
// should find that out quickly instead of waiting for the rueidis default.
const dialTimeout = 2 * time.Second

// Backend is one Redis server a test runs against.
type Backend struct {
	Name    string               // "redis", "miniredis" or "cluster"
	Addr    string               // 127.0.0.1:port; for a cluster, its first node
	Server  *Server              // non-nil for a real redis-server
	Mini    *miniredis.Miniredis // non-nil for miniredis
	Cluster *Cluster             // non-nil for a Redis Cluster
}

// Client returns a new rueidis client for b, closed at t.Cleanup.
// It fails the test if the client cannot be created.
//
// Client-side caching is disabled because miniredis has no CLIENT TRACKING,
// and the single-node client is forced because rueidis would otherwise probe
// with CLUSTER SLOTS, which miniredis answers, turning the client into a
// cluster client. Both servers then get the same client configuration.
//
// For a cluster backend it returns a cluster client (see Cluster.Client).
func (b *Backend) Client(t testing.TB) rueidis.Client {
	t.Helper()
	if b.Cluster != nil {
		return b.Cluster.Client(t)
	}
	return newClient(t, clientOption(b.Addr), b.Name+" at "+b.Addr)
}

// ClientWith is Client for a single server, with tune applied to its options first: for
// a test that needs a connection setting of its own (a dial timeout, one pipelined
// connection). It fails the test for a cluster backend.
func (b *Backend) ClientWith(t testing.TB, tune func(*rueidis.ClientOption)) rueidis.Client {
	t.Helper()
	if b.Cluster != nil {
		t.Fatal("redistest: ClientWith is for a single server, not a cluster")
	}
	opt := clientOption(b.Addr)
	tune(&opt)
	return newClient(t, opt, b.Name+" at "+b.Addr)
}

// Client returns a new rueidis client for s, closed at t.Cleanup, configured as
// Backend.Client configures it for a real server. It fails the test if the client
// cannot be created.
func (s *Server) Client(t testing.TB) rueidis.Client {
	t.Helper()
	return newClient(t, clientOption(s.Addr()), "the server at "+s.Addr())
}

// newClient returns a new rueidis client made with opt, closed at t's cleanup; it fails
// the test, naming what the client is for, if the client cannot be made.
func newClient(t testing.TB, opt rueidis.ClientOption, what string) rueidis.Client {
	t.Helper()
	c, err := rueidis.NewClient(opt)
	if err != nil {
		t.Fatalf("redistest: new rueidis client for %s: %v", what, err)
	}
	t.Cleanup(c.Close)
	return c
}

func clientOption(addr string) rueidis.ClientOption {
	return rueidis.ClientOption{
		InitAddress:       []string{addr},
		DisableCache:      true,
		ForceSingleClient: true,
		Dialer:            net.Dialer{Timeout: dialTimeout},
	}
}

// Each runs fn as two subtests, "redis" and "miniredis", each with a fresh
// backend of its own that is torn down at the subtest's cleanup.
//
// When redis-server is not installed the "redis" subtest is skipped (see
// StartServer) and the "miniredis" subtest still runs.
func Each(t *testing.T, fn func(t *testing.T, b *Backend)) {
	t.Helper()
	Real(t, fn)
	run(t, nameMiniredis, Mini, fn)
}

// run runs fn as the subtest name against the backend that backend makes for it.
func run(t *testing.T, name string, backend func(t testing.TB) *Backend, fn func(t *testing.T, b *Backend)) {
	t.Helper()
	t.Run(name, func(t *testing.T) { fn(t, backend(t)) })
}

// EachWithCluster runs fn as the two subtests of Each and a third,
// "cluster", against a 3-master Redis Cluster (with a replica each).
//
// The cluster is shared by all the tests of the test binary, which must
// therefore run them through Main in TestMain. Each "cluster" subtest has
// it to itself (subtests of parallel tests take turns) and starts with
// every master flushed, so it finds no key of an earlier test. The cluster
// must be left as it was found: no node paused, killed or failed over.
// Tests that need a single node (a proxy in front of b.Addr, a classic
// SUBSCRIBE or PSUBSCRIBE to watch wake-ups, KEYS or FLUSHALL through a
// client, multi-key commands across slots) use Each instead.
//
// When redis-server or redis-cli is not installed the "cluster" subtest is
// skipped, or fails with RELOCK_REQUIRE_REDIS=1, as for StartCluster.
func EachWithCluster(t *testing.T, fn func(t *testing.T, b *Backend)) {
	t.Helper()
	Each(t, fn)
	onCluster(t, fn)
}

// onCluster runs fn as the subtest "cluster" against the shared cluster.
func onCluster(t *testing.T, fn func(t *testing.T, b *Backend)) {
	t.Helper()
	run(t, nameCluster, func(t testing.TB) *Backend {
		c := sharedCluster(t)
		return &Backend{Name: nameCluster, Addr: c.nodes[0].Addr(), Cluster: c}
	}, fn)
}

// Real runs fn only against a fresh real redis-server, for tests that need
// server features miniredis lacks (INFO commandstats, CLIENT KILL,
// DEBUG SLEEP, restarts).
//
// fn runs as a subtest named "redis", like the real-server half of Each, so
// that a -run pattern selecting one backend selects it in both kinds of test.
func Real(t *testing.T, fn func(t *testing.T, b *Backend)) {
	t.Helper()
	run(t, nameRedis, realBackend, fn)
}

// RealWithCluster runs fn as the "redis" subtest of Real and the "cluster"
// subtest of EachWithCluster: for tests that need INFO commandstats and can
// read it on a cluster too (see Backend.Commands).
func RealWithCluster(t *testing.T, fn func(t *testing.T, b *Backend)) {
	t.Helper()
	Real(t, fn)
	onCluster(t, fn)
}

func realBackend(t testing.TB) *Backend {
	t.Helper()
	s := StartServer(t)
	return &Backend{Name: nameRedis, Addr: s.Addr(), Server: s}
}

// Mini returns a fresh miniredis Backend whose TTLs follow real time, torn down
// at t's cleanup.
func Mini(t testing.TB) *Backend {
	t.Helper()
	m := miniredis.NewMiniRedis()
	// Leases must run out by themselves, as on a real server; by default
	// miniredis only moves TTLs when told to.
	m.ClockTTL(true)
	if err := m.Start(); err != nil {
		t.Fatalf("redistest: start miniredis: %v", err)
	}
	t.Cleanup(m.Close)
	return &Backend{Name: nameMiniredis, Addr: m.Addr(), Mini: m}
}
