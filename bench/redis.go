package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/redis/rueidis"
)

// server is a redis-server started by this program, or nil when -addr was given.
type server struct {
	cmd *exec.Cmd
	dir string
}

// startServer starts redis-server on a free loopback port and waits until it answers.
func startServer() (*server, string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, "", err
	}
	port := l.Addr().(*net.TCPAddr).Port
	_ = l.Close()
	dir, err := os.MkdirTemp("", "relock-bench-redis-")
	if err != nil {
		return nil, "", err
	}
	cmd := exec.Command("redis-server", "--port", strconv.Itoa(port), "--bind", "127.0.0.1",
		"--save", "", "--appendonly", "no", "--dir", dir)
	if err := cmd.Start(); err != nil {
		_ = os.RemoveAll(dir)
		return nil, "", fmt.Errorf("start redis-server: %w", err)
	}
	s := &server{cmd: cmd, dir: dir}
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	deadline := time.Now().Add(10 * time.Second)
	for {
		c, err := net.DialTimeout("tcp", addr, 200*time.Millisecond)
		if err == nil {
			_ = c.Close()
			return s, addr, nil
		}
		if time.Now().After(deadline) {
			s.stop()
			return nil, "", fmt.Errorf("redis-server on %s did not start: %w", addr, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// stop kills the server and removes its directory. Safe on nil and twice.
func (s *server) stop() {
	if s == nil || s.cmd == nil {
		return
	}
	_ = s.cmd.Process.Kill()
	_ = s.cmd.Wait()
	_ = os.RemoveAll(s.dir)
	s.cmd = nil
}

// admin is a plain client for INFO, FLUSHALL and the like.
type admin struct{ rc rueidis.Client }

func newAdmin(addr string) (*admin, error) {
	rc, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{addr}, DisableCache: true})
	if err != nil {
		return nil, err
	}
	return &admin{rc: rc}, nil
}

func (a *admin) close() { a.rc.Close() }

func (a *admin) info(ctx context.Context, section string) (string, error) {
	return a.rc.Do(ctx, a.rc.B().Info().Section(section).Build()).ToString()
}

// commands returns the number of calls of each command in INFO commandstats.
func (a *admin) commands(ctx context.Context) (map[string]int64, error) {
	s, err := a.info(ctx, "commandstats")
	if err != nil {
		return nil, err
	}
	calls := map[string]int64{}
	sc := bufio.NewScanner(strings.NewReader(s))
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, "cmdstat_") {
			continue
		}
		name, _, _ := strings.Cut(strings.TrimPrefix(line, "cmdstat_"), ":")
		i := strings.Index(line, "calls=")
		if i < 0 {
			continue
		}
		v := line[i+len("calls="):]
		if j := strings.IndexByte(v, ','); j >= 0 {
			v = v[:j]
		}
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return nil, err
		}
		calls[name] += n
	}
	return calls, sc.Err()
}

func (a *admin) version(ctx context.Context) (string, error) {
	s, err := a.info(ctx, "server")
	if err != nil {
		return "", err
	}
	for _, line := range strings.Split(s, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "redis_version:"); ok {
			return v, nil
		}
	}
	return "", errors.New("no redis_version in INFO server")
}

func (a *admin) flush(ctx context.Context) error {
	return a.rc.Do(ctx, a.rc.B().Flushall().Build()).Error()
}

// roundTrips times n PINGs sent one after the other on a warm connection, each after the
// client has slept idle (none: back to back). They are the unit in which the report counts
// handoff latencies. The handoffs they are compared with follow a critical section in
// which the process sleeps, and a process that has slept takes longer to answer than one
// in a hot loop (its threads are parked and must be woken), so both are measured.
func (a *admin) roundTrips(ctx context.Context, n int, idle time.Duration) ([]time.Duration, error) {
	ds := make([]time.Duration, 0, n)
	for range n {
		if idle > 0 {
			time.Sleep(idle)
		}
		t := time.Now()
		if err := a.rc.Do(ctx, a.rc.B().Ping().Build()).Error(); err != nil {
			return nil, err
		}
		ds = append(ds, time.Since(t))
	}
	return ds, nil
}

// infoSum returns the sum of the numeric fields names of INFO section.
func (a *admin) infoSum(ctx context.Context, section string, names ...string) (float64, error) {
	s, err := a.info(ctx, section)
	if err != nil {
		return 0, err
	}
	var total float64
	found := 0
	for _, line := range strings.Split(s, "\n") {
		k, v, ok := strings.Cut(strings.TrimSpace(line), ":")
		if !ok || !slices.Contains(names, k) {
			continue
		}
		f, err := strconv.ParseFloat(v, 64)
		if err != nil {
			return 0, fmt.Errorf("INFO %s %s: %w", section, k, err)
		}
		total += f
		found++
	}
	if found != len(names) {
		return 0, fmt.Errorf("INFO %s has not all of %v", section, names)
	}
	return total, nil
}

// cpu returns the server's CPU time so far, user and system, from INFO cpu.
func (a *admin) cpu(ctx context.Context) (time.Duration, error) {
	s, err := a.infoSum(ctx, "cpu", "used_cpu_user", "used_cpu_sys")
	return time.Duration(s * float64(time.Second)), err
}

// memory returns the bytes the server has allocated (INFO memory used_memory).
func (a *admin) memory(ctx context.Context) (int64, error) {
	m, err := a.infoSum(ctx, "memory", "used_memory")
	return int64(m), err
}

// memoryPeak samples the server's used_memory every 20 ms from now until the returned stop
// is called, and stop returns the highest sample above the first (at least 0). It measures
// what a run holds on the server at its fullest, which a delta from before to after misses
// when the run cleans up behind itself. A failed sample ends the sampling and stop returns
// its error.
func (a *admin) memoryPeak(ctx context.Context) (stop func() (int64, error)) {
	base, err := a.memory(ctx)
	if err != nil {
		return func() (int64, error) { return 0, err }
	}
	done := make(chan struct{})
	var peak int64
	var serr error
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		t := time.NewTicker(20 * time.Millisecond)
		defer t.Stop()
		// Bounded by count too: ten minutes of samples.
		for range 30000 {
			m, err := a.memory(ctx)
			if err != nil {
				serr = err
				return
			}
			peak = max(peak, m-base)
			select {
			case <-done:
				return
			case <-t.C:
			}
		}
	}()
	return func() (int64, error) {
		close(done)
		<-finished
		return peak, serr
	}
}
