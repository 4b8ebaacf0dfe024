package redistest

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"sync"
	"testing"

	"go.uber.org/goleak"
)

// The cluster shared by the tests of one test binary: starting a cluster
// takes seconds, too long to pay for every subtest of EachWithCluster. It
// is started on first use and stopped by Main.
var shared struct {
	mu      sync.Mutex
	inMain  bool // Main is running the tests, so it will stop the cluster
	started bool // a start was tried; err or c holds its outcome
	c       *Cluster
	err     error
	owner   *binaryOwner
	// use is held by the one test that is using the shared cluster, from
	// its start to its cleanup: tests flush the cluster when they begin,
	// so two must not use it at once, even when they run in parallel.
	use sync.Mutex
}

// Main runs the tests of a package whose tests use EachWithCluster; call it
// from TestMain as os.Exit(redistest.Main(m)). After the tests it checks that
// the "cluster" subtests ran lock scripts on every master (their names cover
// all three shards), stops the shared cluster, and then, if everything
// passed, checks that no goroutine is left over. It returns the exit code.
//
// The coverage check is skipped when -test.run selects some tests only: a
// single test may well use one name.
func Main(m *testing.M) int {
	shared.mu.Lock()
	shared.inMain = true
	shared.mu.Unlock()

	code := m.Run()

	shared.mu.Lock()
	o, c := shared.owner, shared.c
	shared.owner, shared.c, shared.inMain = nil, nil, false
	shared.mu.Unlock()
	if c != nil && code == 0 && !filtered() {
		if err := coverageOfMasters(c); err != nil {
			fmt.Fprintf(os.Stderr, "redistest: %v\n", err)
			code = 1
		}
	}
	if o != nil {
		if err := o.stop(); err != nil {
			fmt.Fprintf(os.Stderr, "redistest: stopping the shared cluster: %v\n", err)
			if code == 0 {
				code = 1
			}
		}
	}
	if code == 0 {
		// A rueidis cluster client runs two kinds of goroutine that Close
		// does not wait for and that end by themselves: a topology refresh
		// after a random delay (started when a connection of a closing client
		// breaks), and the closing, five seconds on, of the connections a
		// refresh replaced. Not ours to stop.
		err := goleak.Find(
			goleak.IgnoreAnyFunction("github.com/redis/rueidis.(*clusterClient)._refresh.func2"),
			goleak.IgnoreAnyFunction("github.com/redis/rueidis.(*call).DelayDo.func1"),
		)
		if err != nil {
			fmt.Fprintf(os.Stderr, "redistest: goroutines left after the tests: %v\n", err)
			code = 1
		}
	}
	return code
}

// filtered reports whether -test.run or -test.skip narrowed the tests run.
func filtered() bool {
	for _, name := range []string{"test.run", "test.skip"} {
		if f := flag.Lookup(name); f != nil && f.Value.String() != "" {
			return true
		}
	}
	return false
}

// coverageOfMasters returns an error naming the masters of c on which no
// script ran: the lock names of the cluster subtests missed their shards.
func coverageOfMasters(c *Cluster) error {
	var errs []error
	for _, n := range c.nodes {
		if role, err := roleOf(n.Addr()); err != nil || role != "master" {
			continue
		}
		text, err := tryString(n.Addr(), "INFO", "commandstats")
		if err != nil {
			errs = append(errs, fmt.Errorf("INFO commandstats on %s: %w", n.Addr(), err))
			continue
		}
		stats, err := parseCommandStats(text)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if stats["evalsha"]+stats["eval"] == 0 {
			errs = append(errs, fmt.Errorf("no lock script ran on the cluster master %s: the lock names of the cluster subtests do not cover every shard", n.Addr()))
		}
	}
	return errors.Join(errs...)
}

// sharedCluster returns the binary's shared cluster, started on the first
// call, as a Cluster whose topology queries report to t. It gives t the
// cluster to itself until t's cleanup and flushes every master first, so
// that t sees no key of an earlier test (or of an earlier run of itself,
// with -count). It skips or fails t as StartCluster does when redis-server
// or redis-cli is missing, and fails it if the cluster cannot be started
// or TestMain does not call Main.
func sharedCluster(t testing.TB) *Cluster {
	t.Helper()
	bin := lookupServer(t)
	cli := lookupCLI(t)

	shared.mu.Lock()
	if !shared.inMain {
		shared.mu.Unlock()
		t.Fatal("redistest: the shared cluster needs the package's TestMain to run the tests with redistest.Main")
	}
	if !shared.started {
		shared.started = true
		shared.c, shared.err = startShared(bin, cli)
	}
	c, err := shared.c, shared.err
	shared.mu.Unlock()
	if err != nil {
		t.Fatalf("redistest: start the shared cluster: %v", err)
	}

	shared.use.Lock()
	t.Cleanup(shared.use.Unlock)
	view := &Cluster{t: t, nodes: c.nodes, byAddr: c.byAddr}
	// A cluster left unhealthy by an earlier test would make this one fail
	// for reasons of its own; say so up front.
	view.WaitHealthy(t, clusterStartTimeout)
	for _, m := range view.Masters() {
		if err := m.Do(t, "FLUSHALL").Error(); err != nil {
			t.Fatalf("redistest: FLUSHALL on %s: %v", m.Addr(), err)
		}
	}
	return view
}

// startShared starts the shared cluster, owned by a new binaryOwner that
// it records in shared.owner. Called with shared.mu held.
func startShared(bin, cli string) (c *Cluster, err error) {
	o := &binaryOwner{}
	defer func() {
		r := recover()
		if r == nil {
			shared.owner = o
			return
		}
		f, ok := r.(ownerFatal)
		if !ok {
			panic(r)
		}
		c, err = nil, errors.Join(f.err, o.stop())
	}()
	return startCluster(o, bin, cli), nil
}

// binaryOwner owns the shared cluster on behalf of the whole test binary:
// the tb that startCluster reports to when no one test owns the cluster.
// Fatalf ends the start with a panic that startShared recovers; cleanups
// run at stop, last registered first, as a test's do.
type binaryOwner struct {
	mu       sync.Mutex
	cleanups []func()
	errs     []error
}

// ownerFatal is the panic value of binaryOwner.Fatalf.
type ownerFatal struct{ err error }

func (o *binaryOwner) Helper() {}

func (o *binaryOwner) Fatalf(format string, args ...any) {
	panic(ownerFatal{fmt.Errorf(format, args...)})
}

func (o *binaryOwner) Errorf(format string, args ...any) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.errs = append(o.errs, fmt.Errorf(format, args...))
}

func (o *binaryOwner) Logf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, format+"\n", args...)
}

func (o *binaryOwner) TempDir() string {
	dir, err := os.MkdirTemp("", "redistest-cluster-")
	if err != nil {
		o.Fatalf("redistest: make a temporary directory: %v", err)
	}
	o.Cleanup(func() {
		if err := os.RemoveAll(dir); err != nil {
			o.Errorf("redistest: remove %s: %v", dir, err)
		}
	})
	return dir
}

func (o *binaryOwner) Cleanup(f func()) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.cleanups = append(o.cleanups, f)
}

// stop runs the cleanups, which kill the nodes and remove their
// directories, and returns the errors reported meanwhile or before.
func (o *binaryOwner) stop() error {
	for {
		o.mu.Lock()
		n := len(o.cleanups)
		if n == 0 {
			errs := o.errs
			o.errs = nil
			o.mu.Unlock()
			return errors.Join(errs...)
		}
		f := o.cleanups[n-1]
		o.cleanups = o.cleanups[:n-1]
		o.mu.Unlock()
		f()
	}
}
