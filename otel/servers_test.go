package relockotel_test

// The Redis servers the tests run against: miniredis (through package embedded) and a real
// redis-server that the test starts on a free loopback port and ends by its pid.

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/relock-go/relock"
	"github.com/relock-go/relock/embedded"
)

// backend makes relock clients (that log nowhere) on one Redis, and a rueidis client to look at and change
// its data.
type backend struct {
	rc        rueidis.Client
	newClient func(t *testing.T, opts ...relock.Option) *relock.Client
}

// backends runs f against miniredis and against a real redis-server.
func backends(t *testing.T, f func(t *testing.T, b backend)) {
	t.Run("miniredis", func(t *testing.T) {
		srv, err := embedded.Start()
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(srv.Close)
		f(t, backend{rc: srv.Redis(), newClient: func(t *testing.T, opts ...relock.Option) *relock.Client {
			c, err := srv.NewClient(append([]relock.Option{relock.WithLogger(nil)}, opts...)...) // closed with srv
			if err != nil {
				t.Fatal(err)
			}
			return c
		}})
	})
	t.Run("redis-server", func(t *testing.T) {
		addr := startRedis(t)
		rc := newRedisClient(t, addr)
		f(t, backend{rc: rc, newClient: func(t *testing.T, opts ...relock.Option) *relock.Client {
			c, err := relock.New(newRedisClient(t, addr), append([]relock.Option{relock.WithLogger(nil)}, opts...)...)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { c.Close() }) // before its rueidis client's cleanup
			return c
		}})
	})
}

func newRedisClient(t *testing.T, addr string) rueidis.Client {
	rc, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{addr}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(rc.Close)
	return rc
}

const (
	startTimeout = 10 * time.Second // a loaded machine; an idle one answers in milliseconds
	exitTimeout  = 5 * time.Second
)

var errPortTaken = errors.New("port taken")

// startRedis starts a redis-server on a free 127.0.0.1 port and returns its address; the
// test's cleanup kills it by its pid. Without the binary the test is skipped, or fails
// when RELOCK_REQUIRE_REDIS=1.
func startRedis(t *testing.T) string {
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		if os.Getenv("RELOCK_REQUIRE_REDIS") == "1" {
			t.Fatalf("redis-server is required (RELOCK_REQUIRE_REDIS=1): %v", err)
		}
		t.Skipf("redis-server not found: %v", err)
	}
	// The port is free when asked for, but another process may take it before the server
	// binds it: then try another.
	for range 5 {
		addr, err := tryRedis(t, bin)
		if errors.Is(err, errPortTaken) {
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		return addr
	}
	t.Fatal("no free port for redis-server in 5 tries")
	return ""
}

func tryRedis(t *testing.T, bin string) (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))

	cmd := exec.Command(bin, "--port", strconv.Itoa(port), "--bind", "127.0.0.1",
		"--save", "", "--appendonly", "no")
	var out lockedBuffer
	cmd.Stdout, cmd.Stderr = &out, &out
	cmd.WaitDelay = time.Second
	if err := cmd.Start(); err != nil {
		return "", err
	}
	done := make(chan struct{})
	go func() { cmd.Wait(); close(done) }()
	kill := func() error {
		_ = cmd.Process.Kill() // it may have exited by itself: done decides
		select {
		case <-done:
			return nil
		case <-time.After(exitTimeout):
			return fmt.Errorf("redis-server (pid %d) not reaped within %v", cmd.Process.Pid, exitTimeout)
		}
	}
	// Ready when the server that answers on addr is this process.
	for deadline := time.Now().Add(startTimeout); ; time.Sleep(10 * time.Millisecond) {
		select {
		case <-done:
			if strings.Contains(out.String(), "Address already in use") {
				return "", errPortTaken
			}
			return "", fmt.Errorf("redis-server exited at start:\n%s", out.String())
		default:
		}
		pid, err := serverPID(addr)
		if err == nil && pid == cmd.Process.Pid {
			break
		}
		if err == nil {
			kill()
			return "", errPortTaken // another server answers there
		}
		if time.Now().After(deadline) {
			return "", errors.Join(fmt.Errorf("redis-server on %s did not answer within %v: %v\n%s",
				addr, startTimeout, err, out.String()), kill())
		}
	}
	t.Cleanup(func() {
		if err := kill(); err != nil {
			t.Error(err)
		}
	})
	return addr, nil
}

// serverPID asks the server on addr for its process id, within a bounded time.
func serverPID(addr string) (int, error) {
	rc, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{addr}, DisableRetry: true,
		Dialer: net.Dialer{Timeout: 500 * time.Millisecond}})
	if err != nil {
		return 0, err
	}
	defer rc.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	info, err := rc.Do(ctx, rc.B().Info().Section("server").Build()).ToString()
	if err != nil {
		return 0, err
	}
	for line := range strings.Lines(info) {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "process_id:"); ok {
			return strconv.Atoi(v)
		}
	}
	return 0, errors.New("no process_id in INFO server")
}

type lockedBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}
