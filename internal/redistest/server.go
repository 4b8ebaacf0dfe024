package redistest

import (
	"context"
	"fmt"
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

// doTimeout bounds Server.Do. It is generous so that a deliberate DEBUG
// SLEEP of a few seconds still completes.
const doTimeout = 10 * time.Second

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
	if err := onFreePort(s.startOn); err != nil {
		t.Fatalf("redistest: start redis-server: %v", err)
	}
	return s
}

// lookupServer finds redis-server or ends the test.
func lookupServer(t testing.TB) string {
	t.Helper()
	return lookupBinary(t, "redis-server", "the real-server test", "install redis-server")
}

// lookupBinary finds the program name on PATH, or ends the test: it skips
// test, saying how to install the program, unless RELOCK_REQUIRE_REDIS is 1,
// in which case it fails.
func lookupBinary(t testing.TB, name, test, install string) string {
	t.Helper()
	bin, err := exec.LookPath(name)
	if err == nil {
		return bin
	}
	if os.Getenv(requireEnv) == "1" {
		t.Fatal(name + " not found on PATH and " + requireEnv + "=1")
	}
	t.Skip(name + " not found on PATH; skipping " + test +
		" (" + install + ", or set " + requireEnv + "=1 to make this a failure)")
	return "" // not reached
}

// startOn starts the server's first process on port and fixes its address;
// it is called before s is shared.
func (s *Server) startOn(port int) error {
	p, err := s.launch(port)
	if err != nil {
		return err
	}
	s.port, s.addr, s.proc = port, addrOf(port), p
	return nil
}

// launch starts redis-server on port with the server's arguments and waits
// until it is ready. On error the process has already been killed and
// reaped.
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
	return startProcess(s.bin, args, port)
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
	s.signal(t, "Pause", suspend)
}

// Resume continues a server stopped by Pause with SIGCONT.
func (s *Server) Resume(t testing.TB) {
	t.Helper()
	s.signal(t, "Resume", resume)
}

// signal runs send (suspend or resume) on the running process, failing the
// test, with op's name, if there is none or send fails.
func (s *Server) signal(t testing.TB, op string, send func(*os.Process) error) {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	p := s.running(t, op)
	if err := send(p.cmd.Process); err != nil {
		t.Fatalf("redistest: %s redis-server on %s: %v", op, s.addr, err)
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
	err := retryPortTaken(100*time.Millisecond, func() error {
		p, err := s.launch(s.port)
		if err == nil {
			s.proc = p
		}
		return err
	})
	if err != nil {
		t.Fatalf("redistest: Restart redis-server on %s: %v", s.addr, err)
	}
}

// cleanup kills the server at the end of the test (see process.stop). t is
// a test, or the owner of the cluster a whole test binary shares.
func (s *Server) cleanup(t tb) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if p := s.proc; p != nil {
		s.proc = nil
		p.stop(t, "redis-server on "+s.addr)
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
