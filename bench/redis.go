package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
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

// cpu returns the server's CPU time so far, user and system, from INFO cpu.
func (a *admin) cpu(ctx context.Context) (time.Duration, error) {
	s, err := a.info(ctx, "cpu")
	if err != nil {
		return 0, err
	}
	var total float64
	for _, line := range strings.Split(s, "\n") {
		k, v, ok := strings.Cut(strings.TrimSpace(line), ":")
		if !ok || (k != "used_cpu_user" && k != "used_cpu_sys") {
			continue
		}
		f, err := strconv.ParseFloat(v, 64)
		if err != nil {
			return 0, fmt.Errorf("INFO cpu %s: %w", k, err)
		}
		total += f
	}
	return time.Duration(total * float64(time.Second)), nil
}
