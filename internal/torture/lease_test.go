//go:build linux

package torture

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/relock-go/relock"
	"github.com/relock-go/relock/internal/redistest"
	"github.com/relock-go/relock/internal/redistest/relocktest"
)

// Leased permits under crashes: a process that holds leased permits is killed (SIGKILL:
// no release, no Close), and its permits must come back within one lease, with none lost.
// leaseKills processes in turn take leaseTaken of leasePermits permits and are killed; a
// waiter of the parent's asks for every permit each time, and gets them only once the dead
// process's permits are back. The summary line gives the longest time from the kill to the
// waiter's acquisition against the lease.
const (
	leaseKills   = 5
	leasePermits = 3
	leaseTaken   = 2
	leaseTimeout = time.Second // the children's watchdog timeout: their permits' lease
	// leaseBack bounds the wait for a dead process's permits: the lease, the refresh
	// period of the waiter's client's queue entry (never needed: the waiter tries again when
	// the next lease runs out), and room for a loaded machine.
	leaseBack = 10 * time.Second
)

// The environment of a child that holds leased permits until it is killed.
const (
	envLeaseAddr = "RELOCK_TORTURE_LEASE_ADDR"
	envLeaseName = "RELOCK_TORTURE_LEASE_NAME"
)

// leaseWorkerMain is the child: it takes leaseTaken permits as a lease, says "held" with
// their ids on stdout, and keeps them (renewed) until it is killed, or for a minute.
func leaseWorkerMain() int {
	rc, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{os.Getenv(envLeaseAddr)}, DisableCache: true})
	if err != nil {
		fmt.Fprintln(os.Stderr, "lease worker:", err)
		return 2
	}
	defer rc.Close()
	c, err := relock.New(rc, relock.WithWatchdogTimeout(leaseTimeout), relock.WithLogger(nil))
	if err != nil {
		fmt.Fprintln(os.Stderr, "lease worker:", err)
		return 2
	}
	defer c.Close()
	s := c.Semaphore(os.Getenv(envLeaseName))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	held, err := s.AcquireLease(ctx, leaseTaken)
	if err != nil {
		fmt.Fprintln(os.Stderr, "lease worker:", err)
		return 2
	}
	fmt.Printf("held %s\n", strings.Join(s.PermitIDs(held), ","))
	select {
	case <-held.Done():
		fmt.Fprintln(os.Stderr, "lease worker: lease ended:", context.Cause(held))
		return 3
	case <-time.After(time.Minute):
		return 0
	}
}

func TestLeasedPermitsAfterKill(t *testing.T) {
	redistest.Real(t, func(t *testing.T, b *redistest.Backend) {
		const name = "torture:leased"
		side := b.Client(t)
		c := relocktest.New(t, b, relock.WithWatchdogTimeout(30*time.Second))
		s := c.Semaphore(name)
		if ok, err := s.TrySetPermits(context.Background(), leasePermits); !ok || err != nil {
			t.Fatalf("TrySetPermits: %v %v", ok, err)
		}
		var longest time.Duration
		back := 0
		for k := range leaseKills {
			cmd := exec.Command(os.Args[0], "-test.run=^$")
			cmd.Env = append(os.Environ(), envLeaseAddr+"="+b.Addr, envLeaseName+"="+name)
			out, err := cmd.StdoutPipe()
			if err != nil {
				t.Fatal(err)
			}
			cmd.Stderr = os.Stderr
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			killed := false
			kill := func() {
				if !killed {
					killed = true
					_ = cmd.Process.Kill()
					_ = cmd.Wait()
				}
			}
			held := make(chan string, 1)
			go func() {
				line, _ := bufio.NewReader(out).ReadString('\n')
				held <- line
			}()
			select {
			case line := <-held:
				if !strings.HasPrefix(line, "held ") {
					kill()
					t.Fatalf("kill %d: the child said %q; want held <ids>", k, line)
				}
			case <-time.After(20 * time.Second):
				kill()
				t.Fatalf("kill %d: the child never held its lease", k)
			}
			// The waiter asks for every permit: it waits for the dead child's.
			ctx, cancel := context.WithTimeout(context.Background(), leaseBack+5*time.Second)
			done := make(chan error, 1)
			go func() { done <- s.Acquire(ctx, leasePermits) }()
			redistest.Eventually(t, 10*time.Second, "the waiter never queued", func() bool {
				n, err := redistest.Do(t, side, "EXISTS", "relock_semaphore_queue:{"+name+"}").AsInt64()
				return err == nil && n == 1
			})
			start := time.Now()
			kill()
			select {
			case err := <-done:
				took := time.Since(start)
				cancel()
				if err != nil {
					t.Fatalf("kill %d: the waiter for all %d permits: %v", k, leasePermits, err)
				}
				back++
				longest = max(longest, took)
				t.Logf("kill %d: the dead process's %d permits were back and taken %v after the kill", k, leaseTaken, took.Round(time.Millisecond))
			case <-time.After(leaseBack):
				cancel()
				t.Fatalf("kill %d: the dead process's permits were not back %v after the kill (lease %v)", k, leaseBack, leaseTimeout)
			}
			if err := s.Release(context.Background(), leasePermits); err != nil {
				t.Fatal(err)
			}
			if v, err := redistest.Do(t, side, "GET", name).ToString(); err != nil || v != strconv.Itoa(leasePermits) {
				t.Fatalf("kill %d: the count is %q (%v) after the waiter's release; want %d: a permit was lost", k, v, err, leasePermits)
			}
		}
		fmt.Printf("torture: leased permits: kills=%d permits-back=%d/%d lost=0 longest-back=%v lease=%v\n",
			leaseKills, back*leaseTaken, leaseKills*leaseTaken, longest.Round(time.Millisecond), leaseTimeout)
	})
}
