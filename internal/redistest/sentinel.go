package redistest

import (
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/rueidis"
)

const (
	// sentinelMasterName is the name the sentinels monitor the master
	// under.
	sentinelMasterName = "relock"
	// sentinelCount is three sentinels with a quorum of two: the smallest
	// setup in which a failover needs agreement and survives the loss of
	// one sentinel.
	sentinelCount  = 3
	sentinelQuorum = 2
	// sentinelDownAfter is down-after-milliseconds: how long the master
	// may be silent before a sentinel considers it down. One second keeps
	// failovers within a few seconds.
	sentinelDownAfter = 1000
	// sentinelFailoverTimeout is the sentinels' failover-timeout in
	// milliseconds, which also spaces out retries of a failed failover.
	sentinelFailoverTimeout = 5000
	// sentinelStartTimeout bounds StartSentinel's wait for the replica to
	// sync and the sentinels to discover each other, which they do through
	// hello messages sent every two seconds.
	sentinelStartTimeout = 30 * time.Second
)

// Sentinel is a Redis Sentinel setup owned by one test: a master, one
// replica, and three sentinels monitoring them under the name "relock".
// The master and the replica are *Servers, so they can be paused, killed
// and restarted.
//
// Master, Replica and WaitFailover's bookkeeping ask the sentinels each
// time, since a failover swaps the two data nodes. Master and Replica take
// no testing.TB and report failures to the test that called
// StartSentinel, so call them from that test's goroutine.
type Sentinel struct {
	t         testing.TB // the test that started the setup
	data      [2]*Server // the master and replica as started
	sentinels []*sentinelProcess
}

// sentinelProcess is one `redis-server --sentinel`. Tests have no use for
// pausing or killing sentinels yet, so it has no Server-like methods.
type sentinelProcess struct {
	addr string

	mu   sync.Mutex
	proc *process // nil once cleaned up
}

// StartSentinel starts a master, a replica of it and three sentinels on
// free 127.0.0.1 ports, waits until the replica is in sync and every
// sentinel knows the master, the replica and the two other sentinels, and
// kills them all at t's cleanup.
//
// If redis-server is not on PATH the test is skipped, unless
// RELOCK_REQUIRE_REDIS is 1, in which case it fails.
func StartSentinel(t testing.TB) *Sentinel {
	t.Helper()
	bin := lookupServer(t)
	// The default 5s delay before a diskless full sync would dominate the
	// start time.
	master := StartServer(t, "--repl-diskless-sync-delay", "0")
	replica := StartServer(t, "--repl-diskless-sync-delay", "0",
		"--replicaof", "127.0.0.1", strconv.Itoa(master.port))
	s := &Sentinel{t: t, data: [2]*Server{master, replica}}
	for range sentinelCount {
		s.sentinels = append(s.sentinels, startSentinelProcess(t, bin, master.port))
	}

	if err := untilOK(sentinelStartTimeout, s.startedErr); err != nil {
		t.Fatalf("redistest: sentinel setup not ready within %v: %v", sentinelStartTimeout, err)
	}
	return s
}

// startSentinelProcess starts one sentinel monitoring the master on
// masterPort. The sentinel rewrites its config file as it learns the
// topology, so each gets a fresh one in a directory of its own.
func startSentinelProcess(t testing.TB, bin string, masterPort int) *sentinelProcess {
	t.Helper()
	dir := t.TempDir()
	sp := &sentinelProcess{}
	t.Cleanup(func() { sp.cleanup(t) })

	err := onFreePort(func(port int) error {
		conf := filepath.Join(dir, "sentinel.conf")
		text := strings.Join([]string{
			"port " + strconv.Itoa(port),
			"bind 127.0.0.1",
			"dir " + dir,
			"sentinel resolve-hostnames no",
			fmt.Sprintf("sentinel monitor %s 127.0.0.1 %d %d", sentinelMasterName, masterPort, sentinelQuorum),
			fmt.Sprintf("sentinel down-after-milliseconds %s %d", sentinelMasterName, sentinelDownAfter),
			fmt.Sprintf("sentinel failover-timeout %s %d", sentinelMasterName, sentinelFailoverTimeout),
			"",
		}, "\n")
		if err := os.WriteFile(conf, []byte(text), 0o600); err != nil {
			return fmt.Errorf("write sentinel config: %w", err)
		}
		// The config file must come first on the command line.
		p, err := startProcess(bin, []string{conf, "--sentinel"}, port)
		if err != nil {
			return err
		}
		sp.addr, sp.proc = addrOf(port), p
		return nil
	})
	if err != nil {
		t.Fatalf("redistest: start sentinel: %v", err)
	}
	return sp
}

// cleanup kills the sentinel at the end of the test (see process.stop).
func (sp *sentinelProcess) cleanup(t testing.TB) {
	sp.mu.Lock()
	defer sp.mu.Unlock()
	if p := sp.proc; p != nil {
		sp.proc = nil
		p.stop(t, "sentinel on "+sp.addr)
	}
}

// MasterName returns the name the sentinels monitor the master under,
// "relock", for clients' MasterSet.
func (s *Sentinel) MasterName() string {
	return sentinelMasterName
}

// SentinelAddrs returns the addresses of the three sentinels.
func (s *Sentinel) SentinelAddrs() []string {
	addrs := make([]string, len(s.sentinels))
	for i, sp := range s.sentinels {
		addrs[i] = sp.addr
	}
	return addrs
}

// Master returns the current master as reported by the first sentinel
// that answers SENTINEL GET-MASTER-ADDR-BY-NAME.
func (s *Sentinel) Master() *Server {
	t := s.t
	t.Helper()
	var errs []error
	for _, sp := range s.sentinels {
		addr, err := sp.masterAddr()
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if srv := s.server(addr); srv != nil {
			return srv
		}
		t.Fatalf("redistest: sentinel %s reports master %s, which is not one of the setup's servers", sp.addr, addr)
	}
	t.Fatalf("redistest: no sentinel reports the master: %v", errors.Join(errs...))
	return nil // not reached
}

// Replica returns the data node that is not the current master: the
// replica as started, or after a failover the old master (which stays a
// replica only if it is running).
func (s *Sentinel) Replica() *Server {
	s.t.Helper()
	if s.Master() == s.data[0] {
		return s.data[1]
	}
	return s.data[0]
}

// Client returns a new rueidis client that finds the master through the
// sentinels, closed at t's cleanup. Client-side caching is off, as for
// Backend.Client.
func (s *Sentinel) Client(t testing.TB) rueidis.Client {
	t.Helper()
	return newClient(t, rueidis.ClientOption{
		InitAddress:  s.SentinelAddrs(),
		DisableCache: true,
		Dialer:       net.Dialer{Timeout: dialTimeout},
		Sentinel: rueidis.SentinelOption{
			MasterSet: sentinelMasterName,
			Dialer:    net.Dialer{Timeout: dialTimeout},
		},
	}, "the sentinels' master")
}

// WaitFailover waits up to timeout until every sentinel reports a master
// other than old, and that server answers ROLE as master. Requiring all
// three sentinels keeps a new client from being pointed at old by a
// sentinel that has not heard of the failover yet.
func (s *Sentinel) WaitFailover(t testing.TB, old *Server, timeout time.Duration) {
	t.Helper()
	if err := untilOK(timeout, func() error { return s.failedOverErr(old) }); err != nil {
		t.Fatalf("redistest: no failover away from %s within %v: %v", old.addr, timeout, err)
	}
}

// failedOverErr returns nil once WaitFailover may return.
func (s *Sentinel) failedOverErr(old *Server) error {
	var current string
	for _, sp := range s.sentinels {
		addr, err := sp.masterAddr()
		if err != nil {
			return err
		}
		if addr == old.addr {
			return fmt.Errorf("sentinel %s still reports %s", sp.addr, addr)
		}
		if current != "" && addr != current {
			return fmt.Errorf("sentinels disagree: %s and %s", current, addr)
		}
		current = addr
	}
	role, err := roleOf(current)
	if err != nil {
		return fmt.Errorf("ROLE on %s: %w", current, err)
	}
	if role != "master" {
		return fmt.Errorf("new master %s reports role %s", current, role)
	}
	return nil
}

// startedErr returns nil once StartSentinel may return.
func (s *Sentinel) startedErr() error {
	master, replica := s.data[0], s.data[1]
	info, err := tryString(replica.addr, "INFO", "replication")
	if err != nil {
		return fmt.Errorf("INFO replication on %s: %w", replica.addr, err)
	}
	if !strings.Contains(info, "master_link_status:up") {
		return fmt.Errorf("replica %s not in sync yet", replica.addr)
	}
	for _, sp := range s.sentinels {
		addr, err := sp.masterAddr()
		if err != nil {
			return err
		}
		if addr != master.addr {
			return fmt.Errorf("sentinel %s reports master %s, want %s", sp.addr, addr, master.addr)
		}
		replicas, err := sp.instances("REPLICAS")
		if err != nil {
			return err
		}
		if len(replicas) != 1 || replicas[0] != replica.addr {
			return fmt.Errorf("sentinel %s knows replicas %v, want [%s]", sp.addr, replicas, replica.addr)
		}
		others, err := sp.instances("SENTINELS")
		if err != nil {
			return err
		}
		if len(others) != sentinelCount-1 {
			return fmt.Errorf("sentinel %s knows %d other sentinels, want %d", sp.addr, len(others), sentinelCount-1)
		}
	}
	return nil
}

// masterAddr asks the sentinel for the current master's address.
func (sp *sentinelProcess) masterAddr() (string, error) {
	reply, err := tryArray(sp.addr, "SENTINEL", "GET-MASTER-ADDR-BY-NAME", sentinelMasterName)
	if err != nil {
		return "", fmt.Errorf("SENTINEL GET-MASTER-ADDR-BY-NAME on %s: %w", sp.addr, err)
	}
	if len(reply) != 2 {
		return "", fmt.Errorf("SENTINEL GET-MASTER-ADDR-BY-NAME on %s: %d elements", sp.addr, len(reply))
	}
	ip, err1 := reply[0].ToString()
	port, err2 := reply[1].ToString()
	if err := errors.Join(err1, err2); err != nil {
		return "", fmt.Errorf("SENTINEL GET-MASTER-ADDR-BY-NAME on %s: %w", sp.addr, err)
	}
	return net.JoinHostPort(ip, port), nil
}

// instances runs SENTINEL REPLICAS or SENTINEL SENTINELS and returns the
// addresses of the instances that are not flagged down or disconnected.
func (sp *sentinelProcess) instances(kind string) ([]string, error) {
	reply, err := tryArray(sp.addr, "SENTINEL", kind, sentinelMasterName)
	if err != nil {
		return nil, fmt.Errorf("SENTINEL %s on %s: %w", kind, sp.addr, err)
	}
	var addrs []string
	for _, m := range reply {
		fields, err := m.AsStrMap()
		if err != nil {
			return nil, fmt.Errorf("SENTINEL %s on %s: %w", kind, sp.addr, err)
		}
		if flags := fields["flags"]; strings.Contains(flags, "down") || strings.Contains(flags, "disconnected") {
			continue
		}
		addrs = append(addrs, net.JoinHostPort(fields["ip"], fields["port"]))
	}
	return addrs, nil
}

// server maps an address reported by a sentinel to the data node, or nil.
func (s *Sentinel) server(addr string) *Server {
	for _, srv := range s.data {
		if srv.addr == addr {
			return srv
		}
	}
	return nil
}
