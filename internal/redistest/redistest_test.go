package redistest

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/redis/rueidis"
)

func TestEachGivesTwoWorkingBackends(t *testing.T) {
	var mu sync.Mutex
	seen := map[string]string{} // backend name -> address
	Each(t, func(t *testing.T, b *Backend) {
		switch b.Name {
		case "redis":
			if b.Server == nil || b.Mini != nil {
				t.Fatalf("redis backend: Server=%v Mini=%v, want only Server", b.Server, b.Mini)
			}
			if b.Addr != b.Server.Addr() {
				t.Fatalf("Addr %q differs from Server.Addr %q", b.Addr, b.Server.Addr())
			}
		case "miniredis":
			if b.Mini == nil || b.Server != nil {
				t.Fatalf("miniredis backend: Server=%v Mini=%v, want only Mini", b.Server, b.Mini)
			}
		default:
			t.Fatalf("unexpected backend name %q", b.Name)
		}
		if want := t.Name(); want != "TestEachGivesTwoWorkingBackends/"+b.Name {
			t.Fatalf("backend %q runs in subtest %q", b.Name, want)
		}
		mu.Lock()
		seen[b.Name] = b.Addr
		mu.Unlock()

		ctx := context.Background()
		c := b.Client(t)
		if err := c.Do(ctx, c.B().Set().Key("k").Value(b.Name).Build()).Error(); err != nil {
			t.Fatalf("SET: %v", err)
		}
		got, err := c.Do(ctx, c.B().Get().Key("k").Build()).ToString()
		if err != nil || got != b.Name {
			t.Fatalf("GET = %q, %v; want %q", got, err, b.Name)
		}
	})
	if _, ok := seen["miniredis"]; !ok {
		t.Fatal("the miniredis subtest did not run")
	}
	if addr, ok := seen["redis"]; ok && addr == seen["miniredis"] {
		t.Fatalf("both backends share address %s", addr)
	}
}

// TestEachBackendsAreFresh guards against a backend being shared between
// tests: a key written by one test must not be visible in the next.
func TestEachBackendsAreFresh(t *testing.T) {
	for range 2 {
		Each(t, func(t *testing.T, b *Backend) {
			ctx := context.Background()
			c := b.Client(t)
			n, err := c.Do(ctx, c.B().Incr().Key("counter").Build()).AsInt64()
			if err != nil {
				t.Fatalf("INCR: %v", err)
			}
			if n != 1 {
				t.Fatalf("INCR on a fresh backend = %d, want 1", n)
			}
		})
	}
}

func TestKeysExpireInRealTime(t *testing.T) {
	const ttl = 200 * time.Millisecond
	Each(t, func(t *testing.T, b *Backend) {
		ctx := context.Background()
		c := b.Client(t)
		set := time.Now()
		if err := c.Do(ctx, c.B().Set().Key("k").Value("v").Px(ttl).Build()).Error(); err != nil {
			t.Fatalf("SET PX: %v", err)
		}
		deadline := set.Add(3 * time.Second)
		for {
			n, err := c.Do(ctx, c.B().Exists().Key("k").Build()).AsInt64()
			if err != nil {
				t.Fatalf("EXISTS: %v", err)
			}
			if n == 0 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("key set with PX %v still exists after 3s", ttl)
			}
			time.Sleep(5 * time.Millisecond)
		}
		// Early expiry would be as wrong as none. The slack covers clock
		// granularity.
		if elapsed := time.Since(set); elapsed < ttl-20*time.Millisecond {
			t.Fatalf("key expired after %v, before its %v TTL", elapsed, ttl)
		}
	})
}

func TestRestartEmptiesDataAndAnswers(t *testing.T) {
	t.Parallel()
	s := StartServer(t)
	addr := s.Addr()
	if err := s.Do(t, "SET", "k", "v").Error(); err != nil {
		t.Fatalf("SET: %v", err)
	}

	s.Restart(t)

	if s.Addr() != addr {
		t.Fatalf("Addr changed across Restart: %s -> %s", addr, s.Addr())
	}
	if err := s.Do(t, "GET", "k").Error(); !rueidis.IsRedisNil(err) {
		t.Fatalf("GET after Restart: err = %v, want a nil reply (data gone)", err)
	}
	if got, err := s.Do(t, "PING").ToString(); err != nil || got != "PONG" {
		t.Fatalf("PING after Restart = %q, %v", got, err)
	}
}

func TestRestartAfterKill(t *testing.T) {
	t.Parallel()
	b := &Backend{Name: "redis", Server: StartServer(t)}
	b.Addr = b.Server.Addr()
	c := b.Client(t)
	ctx := context.Background()

	b.Server.Kill(t)
	pctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	if err := c.Do(pctx, c.B().Ping().Build()).Error(); err == nil {
		t.Fatal("PING succeeded against a killed server")
	}

	b.Server.Restart(t)
	// The client was connected to the old process; it must be able to
	// reconnect to the same address. Bounded retries cover the client
	// noticing the dead connection.
	deadline := time.Now().Add(5 * time.Second)
	for {
		pctx, cancel := context.WithTimeout(ctx, time.Second)
		err := c.Do(pctx, c.B().Ping().Build()).Error()
		cancel()
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("client did not reconnect after Restart: %v", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestPauseResume(t *testing.T) {
	t.Parallel()
	b := &Backend{Name: "redis", Server: StartServer(t)}
	b.Addr = b.Server.Addr()
	c := b.Client(t)
	ctx := context.Background()
	if err := c.Do(ctx, c.B().Ping().Build()).Error(); err != nil {
		t.Fatalf("PING before Pause: %v", err)
	}

	b.Server.Pause(t)
	pctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	start := time.Now()
	err := c.Do(pctx, c.B().Ping().Build()).Error()
	cancel()
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("PING to a paused server: err = %v after %v, want context.DeadlineExceeded", err, time.Since(start))
	}

	b.Server.Resume(t)
	pctx, cancel = context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	if err := c.Do(pctx, c.B().Ping().Build()).Error(); err != nil {
		t.Fatalf("PING after Resume: %v", err)
	}
}

func TestCommandStatsCountsCommands(t *testing.T) {
	t.Parallel()
	s := StartServer(t)
	b := &Backend{Name: "redis", Addr: s.Addr(), Server: s}
	c := b.Client(t)
	ctx := context.Background()

	if got := s.CommandStats(t)["echo"]; got != 0 {
		t.Fatalf("echo calls on a fresh server = %d, want 0", got)
	}
	for range 3 {
		if err := c.Do(ctx, c.B().Echo().Message("hi").Build()).Error(); err != nil {
			t.Fatalf("ECHO: %v", err)
		}
	}
	s.Do(t, "CLIENT", "LIST")

	stats := s.CommandStats(t)
	if got := stats["echo"]; got != 3 {
		t.Fatalf("echo calls = %d, want 3 (stats: %v)", got, stats)
	}
	if got := stats["client|list"]; got != 1 {
		t.Fatalf("client|list calls = %d, want 1 (stats: %v)", got, stats)
	}
}

func TestDebugCommandEnabled(t *testing.T) {
	t.Parallel()
	s := StartServer(t)
	if err := s.Do(t, "DEBUG", "SLEEP", "0").Error(); err != nil {
		t.Fatalf("DEBUG SLEEP 0: %v", err)
	}
}

func TestDoReturnsRedisErrors(t *testing.T) {
	t.Parallel()
	s := StartServer(t)
	err := s.Do(t, "NOSUCHCOMMAND").Error()
	if _, ok := rueidis.IsRedisErr(err); !ok {
		t.Fatalf("Do(NOSUCHCOMMAND) error = %v, want a Redis error reply", err)
	}
}

func TestStartServerExtraArgs(t *testing.T) {
	t.Parallel()
	s := StartServer(t, "--maxmemory", "12345678")
	got, err := s.Do(t, "CONFIG", "GET", "maxmemory").AsStrMap()
	if err != nil || got["maxmemory"] != "12345678" {
		t.Fatalf("CONFIG GET maxmemory = %q, %v; want the value given to StartServer", got, err)
	}
}

func TestParseCommandStats(t *testing.T) {
	text := "# Commandstats\r\n" +
		"cmdstat_get:calls=3,usec=12,usec_per_call=4.00,rejected_calls=0,failed_calls=0\r\n" +
		"cmdstat_client|kill:calls=1,usec=5,usec_per_call=5.00,rejected_calls=0,failed_calls=0\r\n" +
		"cmdstat_EVALSHA:calls=12,usec=5\r\n"
	got, err := parseCommandStats(text)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]int64{"get": 3, "client|kill": 1, "evalsha": 12}
	if len(got) != len(want) {
		t.Fatalf("got %v, want %v", got, want)
	}
	for k, v := range want {
		if got[k] != v {
			t.Fatalf("got %v, want %v", got, want)
		}
	}
	if _, err := parseCommandStats("cmdstat_get:usec=1\r\n"); err == nil {
		t.Fatal("a line without calls= was accepted")
	}
}

// recordingTB captures how StartServer ends a test when redis-server is
// missing, without ending the real test.
type recordingTB struct {
	testing.TB
	skipped, fatal string
}

func (r *recordingTB) Skip(args ...any)  { r.skipped = sprint(args); runtime.Goexit() }
func (r *recordingTB) Fatal(args ...any) { r.fatal = sprint(args); runtime.Goexit() }
func (r *recordingTB) Fatalf(format string, args ...any) {
	r.fatal = fmt.Sprintf(format, args...)
	runtime.Goexit()
}

func sprint(args []any) string {
	if len(args) == 1 {
		if s, ok := args[0].(string); ok {
			return s
		}
	}
	return "non-string message"
}

// runTB runs fn on its own goroutine so that Skip/Fatal's Goexit ends only
// that goroutine.
func runTB(t *testing.T, fn func(tb testing.TB)) *recordingTB {
	r := &recordingTB{TB: t}
	done := make(chan struct{})
	go func() {
		defer close(done)
		fn(r)
	}()
	<-done
	return r
}

func TestMissingRedisServer(t *testing.T) {
	t.Setenv("PATH", t.TempDir()) // a PATH with no redis-server on it

	t.Setenv(requireEnv, "")
	r := runTB(t, func(tb testing.TB) { StartServer(tb) })
	if r.skipped == "" || r.fatal != "" {
		t.Fatalf("without %s: skipped=%q fatal=%q, want a skip", requireEnv, r.skipped, r.fatal)
	}

	t.Setenv(requireEnv, "1")
	r = runTB(t, func(tb testing.TB) { StartServer(tb) })
	want := "redis-server not found on PATH and RELOCK_REQUIRE_REDIS=1"
	if r.fatal != want || r.skipped != "" {
		t.Fatalf("with %s=1: fatal=%q skipped=%q, want fatal %q", requireEnv, r.fatal, r.skipped, want)
	}
}

// HoldRequest keeps the marked request from the server until it is released, and holds
// nothing else: a test that relies on it to open a race window must find the window open.
func TestProxyHoldRequest(t *testing.T) {
	b := Mini(t)
	p := StartProxy(t, b.Addr)
	held, other := b.clientVia(t, p), b.clientVia(t, p)
	ctx := context.Background()

	arrived, release := p.HoldRequest("held-key")
	defer release()
	done := make(chan error, 1)
	go func() { done <- held.Do(ctx, held.B().Set().Key("held-key").Value("v").Build()).Error() }()
	select {
	case <-arrived:
	case <-time.After(10 * time.Second):
		t.Fatal("the marked request did not reach the proxy")
	}
	// Another connection goes through while the request is held.
	if err := other.Do(ctx, other.B().Set().Key("free-key").Value("v").Build()).Error(); err != nil {
		t.Fatalf("SET on another connection: %v", err)
	}
	if b.Mini.Exists("held-key") {
		t.Fatal("the held request reached the server before its release")
	}
	release()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("held SET: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the held request was not delivered after its release")
	}
	if !b.Mini.Exists("held-key") {
		t.Fatal("the released request did not reach the server")
	}
}

// clientVia returns a rueidis client for b whose connections pass p.
func (b *Backend) clientVia(t *testing.T, p *Proxy) rueidis.Client {
	t.Helper()
	return (&Backend{Name: b.Name, Addr: p.Addr()}).Client(t)
}
