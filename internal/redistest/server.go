package redistest

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/rueidis"
)

// requireEnv names the environment variable that turns a missing
// redis-server from a skip into a failure, so that CI, which is expected to
// have it, cannot silently pass with only the miniredis half of the suite.
const requireEnv = "RELOCK_REQUIRE_REDIS"

const (
	// startTimeout bounds how long a freshly started server may take to
	// answer. A loopback server with no data to load is ready in
	// milliseconds; 5s leaves room for a loaded CI machine.
	startTimeout = 5 * time.Second
	// startAttempts bounds the retries when another process takes the port
	// between freePort closing it and redis-server binding it.
	startAttempts = 5
	// exitTimeout bounds the wait for a SIGKILLed server to be reaped.
	exitTimeout = 5 * time.Second
	// doTimeout bounds Server.Do. It is generous so that a deliberate
	// DEBUG SLEEP of a few seconds still completes.
	doTimeout = 10 * time.Second
	// probeTimeout bounds each readiness probe, so that a server that
	// accepts the connection but does not answer yet does not eat the
	// whole startTimeout in a single probe.
	probeTimeout = 500 * time.Millisecond
	// probeInterval is the pause between readiness probes.
	probeInterval = 10 * time.Millisecond
)

// errPortTaken reports that the chosen port turned out to be in use by some
// other process, which is worth retrying on another port.
var errPortTaken = errors.New("port already in use")

// Server is a dedicated redis-server process owned by one test.
//
// Its methods may be called from any goroutine, but since they report
// failures through the testing.TB they are given, that TB's rules apply
// (Fatal-style calls only from the test's own goroutine).
type Server struct {
	bin  string
	dir  string
	args []string // the extra arguments given to StartServer
	port int      // fixed at the first successful start; Restart reuses it
	addr string

	mu   sync.Mutex // serialises process changes: Kill, Restart, Pause...
	proc *process   // nil once killed, until the next Restart
}

// process is one run of redis-server.
type process struct {
	cmd  *exec.Cmd
	out  *lockedBuffer
	done chan struct{} // closed once the process has been reaped
	err  error         // cmd.Wait's result, valid after done is closed
}

// StartServer starts a dedicated redis-server on a free 127.0.0.1 port with
// args appended to the harness's own arguments, waits until it answers, and
// kills it at t's cleanup.
//
// The server keeps nothing on disk (no RDB snapshots, no AOF), so a Restart
// starts empty. DEBUG is enabled for local connections so tests can use
// DEBUG SLEEP to simulate a slow server.
//
// If redis-server is not on PATH the test is skipped, unless the environment
// variable RELOCK_REQUIRE_REDIS is 1, in which case it fails.
func StartServer(t testing.TB, args ...string) *Server {
	t.Helper()
	bin := lookupServer(t)
	s := &Server{
		bin:  bin,
		dir:  t.TempDir(),
		args: append([]string(nil), args...),
	}
	// Registered after t.TempDir so that it runs before the directory is
	// removed (cleanups are LIFO).
	t.Cleanup(func() { s.cleanup(t) })

	var err error
	for range startAttempts {
		port, perr := freePort()
		if perr != nil {
			t.Fatalf("redistest: find a free port: %v", perr)
		}
		var p *process
		p, err = s.launch(port)
		if err == nil {
			s.port = port
			s.addr = addrOf(port)
			s.proc = p
			return s
		}
		if !errors.Is(err, errPortTaken) {
			break
		}
	}
	t.Fatalf("redistest: start redis-server: %v", err)
	return nil // not reached
}

// lookupServer finds redis-server or ends the test.
func lookupServer(t testing.TB) string {
	t.Helper()
	bin, err := exec.LookPath("redis-server")
	if err == nil {
		return bin
	}
	if os.Getenv(requireEnv) == "1" {
		t.Fatal("redis-server not found on PATH and " + requireEnv + "=1")
	}
	t.Skip("redis-server not found on PATH; skipping the real-server test " +
		"(install redis-server, or set " + requireEnv + "=1 to make this a failure)")
	return "" // not reached
}

// freePort asks the kernel for a free loopback port. The port is released
// before redis-server binds it, so another process may take it in between;
// StartServer detects that and retries.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	port := l.Addr().(*net.TCPAddr).Port
	if err := l.Close(); err != nil {
		return 0, err
	}
	return port, nil
}

func addrOf(port int) string {
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
}

// launch starts redis-server on port and waits until it is ready. On error
// the process has already been killed and reaped.
func (s *Server) launch(port int) (*process, error) {
	args := []string{
		"--port", strconv.Itoa(port),
		"--bind", "127.0.0.1",
		"--save", "",
		"--appendonly", "no",
		"--protected-mode", "yes",
	}
	if debugCommandFlagSupported(s.bin) {
		args = append(args, "--enable-debug-command", "local")
	}
	args = append(args,
		"--loglevel", "warning",
		"--dir", s.dir,
	)
	args = append(args, s.args...)

	cmd := exec.Command(s.bin, args...)
	out := &lockedBuffer{}
	cmd.Stdout = out
	cmd.Stderr = out
	// redis-server never forks with persistence off, but should anything
	// inherit the output pipe, Wait must still return promptly.
	cmd.WaitDelay = time.Second
	setProcAttr(cmd)
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	p := &process{cmd: cmd, out: out, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		close(p.done)
	}()

	if err := p.waitReady(addrOf(port)); err != nil {
		if kerr := p.kill(); kerr != nil {
			err = errors.Join(err, kerr)
		}
		return nil, err
	}
	return p, nil
}

// waitReady polls until the server on addr answers as this process.
//
// It asks for INFO server rather than sending PING so that it can compare
// the answering process_id with its own: when the port was taken by another
// Redis in the meantime (parallel tests of another package, say), a PONG
// would come from the wrong server while ours is about to fail to bind.
func (p *process) waitReady(addr string) error {
	deadline := time.Now().Add(startTimeout)
	var lastErr error
	for {
		select {
		case <-p.done:
			return p.exitedEarly()
		default:
		}
		pid, err := probePID(addr)
		if err == nil {
			if pid == p.cmd.Process.Pid {
				return nil
			}
			return fmt.Errorf("%w: %s is answered by process %d, not by the redis-server just started (pid %d)",
				errPortTaken, addr, pid, p.cmd.Process.Pid)
		}
		lastErr = err
		if time.Now().After(deadline) {
			return fmt.Errorf("redis-server on %s did not answer within %v (last probe: %v); its output:\n%s",
				addr, startTimeout, lastErr, p.out.String())
		}
		time.Sleep(probeInterval)
	}
}

// exitedEarly explains why the process exited before becoming ready.
func (p *process) exitedEarly() error {
	out := p.out.String()
	err := fmt.Errorf("redis-server exited during startup (%v); its output:\n%s", p.err, out)
	if strings.Contains(out, "Address already in use") {
		return fmt.Errorf("%w: %w", errPortTaken, err)
	}
	return err
}

// kill sends SIGKILL and waits, bounded, until the process is reaped.
func (p *process) kill() error {
	// The error is ignored because the process may have exited on its own
	// already; whether it is gone is decided by done below.
	_ = p.cmd.Process.Kill()
	select {
	case <-p.done:
		return nil
	case <-time.After(exitTimeout):
		return fmt.Errorf("redis-server (pid %d) not reaped within %v of SIGKILL", p.cmd.Process.Pid, exitTimeout)
	}
}

// exited reports whether the process has already exited.
func (p *process) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// probePID sends INFO server over a plain connection and returns the
// process_id it reports. A raw RESP exchange keeps each probe cheap and
// avoids depending on client behaviour (handshakes, retries) while the
// server is not up yet.
func probePID(addr string) (int, error) {
	conn, err := net.DialTimeout("tcp", addr, probeTimeout)
	if err != nil {
		return 0, err
	}
	defer conn.Close()
	if err := conn.SetDeadline(time.Now().Add(probeTimeout)); err != nil {
		return 0, err
	}
	if _, err := io.WriteString(conn, "*2\r\n$4\r\nINFO\r\n$6\r\nserver\r\n"); err != nil {
		return 0, err
	}
	r := bufio.NewReader(conn)
	header, err := r.ReadString('\n')
	if err != nil {
		return 0, err
	}
	header = strings.TrimRight(header, "\r\n")
	if !strings.HasPrefix(header, "$") {
		// Typically "-LOADING ..." while the server is still starting.
		return 0, fmt.Errorf("unexpected reply %q", header)
	}
	n, err := strconv.Atoi(header[1:])
	if err != nil || n < 0 || n > 1<<20 {
		return 0, fmt.Errorf("unexpected reply header %q", header)
	}
	body := make([]byte, n)
	if _, err := io.ReadFull(r, body); err != nil {
		return 0, err
	}
	for line := range strings.Lines(string(body)) {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "process_id:"); ok {
			return strconv.Atoi(v)
		}
	}
	return 0, errors.New("INFO server has no process_id")
}

// Addr returns the server's address, 127.0.0.1:port. It does not change
// across Restart.
func (s *Server) Addr() string {
	return s.addr
}

// running returns the current process or fails the test if there is none.
// It must be called with s.mu held.
func (s *Server) running(t testing.TB, op string) *process {
	t.Helper()
	if s.proc == nil {
		t.Fatalf("redistest: %s: redis-server on %s is not running (killed and not restarted)", op, s.addr)
	}
	return s.proc
}

// Pause stops the server process with SIGSTOP: connections stay open but
// nothing is answered, as with a server stuck in a long command or a network
// partition. On Linux it returns only once the process has actually stopped,
// so a command sent afterwards cannot slip through.
func (s *Server) Pause(t testing.TB) {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	p := s.running(t, "Pause")
	if err := suspend(p.cmd.Process); err != nil {
		t.Fatalf("redistest: Pause redis-server on %s: %v", s.addr, err)
	}
}

// Resume continues a server stopped by Pause with SIGCONT.
func (s *Server) Resume(t testing.TB) {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	p := s.running(t, "Resume")
	if err := resume(p.cmd.Process); err != nil {
		t.Fatalf("redistest: Resume redis-server on %s: %v", s.addr, err)
	}
}

// Kill stops the server with SIGKILL, as in a crash, and waits until the
// process has exited. Restart brings it back on the same port.
func (s *Server) Kill(t testing.TB) {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	p := s.running(t, "Kill")
	s.proc = nil
	if err := p.kill(); err != nil {
		t.Fatalf("redistest: Kill: %v", err)
	}
}

// Restart kills the server with SIGKILL (if it is running) and starts it
// again on the same port with the same arguments, waiting until it answers.
// All data is lost, as nothing is persisted. Clients keep their address and
// can reconnect.
func (s *Server) Restart(t testing.TB) {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	if p := s.proc; p != nil {
		s.proc = nil
		if err := p.kill(); err != nil {
			t.Fatalf("redistest: Restart: %v", err)
		}
	}
	// The port cannot be changed, since clients are pointed at it, so a
	// clash can only be waited out; a few attempts bound that wait.
	var err error
	for attempt := range startAttempts {
		if attempt > 0 {
			time.Sleep(100 * time.Millisecond)
		}
		var p *process
		p, err = s.launch(s.port)
		if err == nil {
			s.proc = p
			return
		}
		if !errors.Is(err, errPortTaken) {
			break
		}
	}
	t.Fatalf("redistest: Restart redis-server on %s: %v", s.addr, err)
}

// cleanup kills the server at the end of the test. A server that exited by
// itself is logged, not failed, because a test may have shut it down on
// purpose (SHUTDOWN, DEBUG SEGFAULT); the log helps when it was not. t is a
// test, or the owner of the cluster a whole test binary shares.
func (s *Server) cleanup(t tb) {
	s.mu.Lock()
	defer s.mu.Unlock()
	p := s.proc
	if p == nil {
		return
	}
	s.proc = nil
	if p.exited() {
		t.Logf("redistest: redis-server on %s had exited before cleanup (%v); its output:\n%s",
			s.addr, p.err, p.out.String())
		return
	}
	if err := p.kill(); err != nil {
		t.Errorf("redistest: cleanup: %v", err)
	}
}

// Do runs one command on a short-lived connection of its own and returns
// the reply, which may be a Redis error reply (check it with Error). Any
// other error, such as a timeout or a refused connection, fails the test.
//
// The separate connection keeps Do independent of the state of the
// clients under test, which may be blocked, killed or mid-transaction.
// Do gives up after 10s.
func (s *Server) Do(t testing.TB, args ...string) rueidis.RedisResult {
	t.Helper()
	if len(args) == 0 {
		t.Fatalf("redistest: Do: no command given")
	}
	opt := clientOption(s.addr)
	// A side command must run exactly once: retrying e.g. CLIENT KILL after
	// a lost reply would act twice.
	opt.DisableRetry = true
	// Named so that tests inspecting CLIENT LIST can tell it apart.
	opt.ClientName = "redistest-side"
	c, err := rueidis.NewClient(opt)
	if err != nil {
		t.Fatalf("redistest: Do %q on %s: connect: %v", args, s.addr, err)
	}
	defer c.Close()

	ctx, cancel := context.WithTimeout(context.Background(), doTimeout)
	defer cancel()
	res := c.Do(ctx, c.B().Arbitrary(args...).Build())
	if err := res.NonRedisError(); err != nil {
		t.Fatalf("redistest: Do %q on %s: %v", args, s.addr, err)
	}
	return res
}

// CommandStats returns the call counts of INFO commandstats, keyed by the
// lowercased command name as Redis reports it (subcommands as
// "client|kill"). Counts include the harness's own traffic: the readiness
// probe's INFO and each Do's connection handshake (HELLO).
func (s *Server) CommandStats(t testing.TB) map[string]int64 {
	t.Helper()
	text, err := s.Do(t, "INFO", "commandstats").ToString()
	if err != nil {
		t.Fatalf("redistest: INFO commandstats on %s: %v", s.addr, err)
	}
	stats, err := parseCommandStats(text)
	if err != nil {
		t.Fatalf("redistest: INFO commandstats on %s: %v", s.addr, err)
	}
	return stats
}

// parseCommandStats parses lines of the form
// "cmdstat_get:calls=3,usec=12,usec_per_call=4.00,rejected_calls=0,failed_calls=0".
func parseCommandStats(text string) (map[string]int64, error) {
	stats := make(map[string]int64)
	for line := range strings.Lines(text) {
		line = strings.TrimSpace(line)
		rest, ok := strings.CutPrefix(line, "cmdstat_")
		if !ok {
			continue
		}
		name, fields, ok := strings.Cut(rest, ":")
		if !ok {
			return nil, fmt.Errorf("malformed line %q", line)
		}
		found := false
		for field := range strings.SplitSeq(fields, ",") {
			v, ok := strings.CutPrefix(field, "calls=")
			if !ok {
				continue
			}
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				return nil, fmt.Errorf("malformed calls in %q: %w", line, err)
			}
			stats[strings.ToLower(name)] = n
			found = true
			break
		}
		if !found {
			return nil, fmt.Errorf("no calls field in %q", line)
		}
	}
	return stats, nil
}

// versionRE matches the version in `redis-server --version` output, e.g.
// "Redis server v=7.0.15 sha=...".
var versionRE = regexp.MustCompile(`\bv=(\d+)\.`)

var debugFlag struct {
	mu        sync.Mutex
	supported map[string]bool // by redis-server path
}

// debugCommandFlagSupported reports whether bin accepts
// --enable-debug-command, which appeared in Redis 7.0 (older servers reject
// the unknown option, and have DEBUG enabled anyway). The answer is cached
// per binary so that `--version` runs once, not once per server. When the
// version cannot be determined the flag is assumed supported: a server that
// then rejects it fails to start with its own clear message.
func debugCommandFlagSupported(bin string) bool {
	debugFlag.mu.Lock()
	defer debugFlag.mu.Unlock()
	if v, ok := debugFlag.supported[bin]; ok {
		return v
	}
	supported := true
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	if out, err := exec.CommandContext(ctx, bin, "--version").Output(); err == nil {
		if m := versionRE.FindSubmatch(out); m != nil {
			if major, err := strconv.Atoi(string(m[1])); err == nil {
				supported = major >= 7
			}
		}
	}
	if debugFlag.supported == nil {
		debugFlag.supported = make(map[string]bool)
	}
	debugFlag.supported[bin] = supported
	return supported
}

// lockedBuffer collects a server's output. exec copies stdout and stderr
// from separate goroutines, and the test may read it while they run.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
