package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/relock-go/relock/internal/redistest"
	"github.com/relock-go/relock/internal/redistest/relocktest"
)

// The command line as people type it, run as the built binary against a real redis-server:
// flags after the lock name, help that exits 0, and a force unlock that ends with status 1
// when it could not ask.
func TestCommandLineAsTyped(t *testing.T) {
	redistest.Real(t, func(t *testing.T, b *redistest.Backend) {
		c := relocktest.New(t, b)
		if _, err := c.Lock("op:orders").Lock(redistest.Context(t, time.Minute)); err != nil {
			t.Fatal(err)
		}

		// Flags before or after the name.
		for _, args := range [][]string{
			{"inspect", "op:orders", "--redis", b.Addr},
			{"inspect", "--redis", b.Addr, "op:orders"},
			{"watch", "op:orders", "--count", "1", "--redis", b.Addr, "--interval", "10ms"},
		} {
			stdout, stderr, status := runBinary(t, nil, args...)
			if _, view, ok := strings.Cut(stdout, "\n\n"); ok && args[0] == "watch" {
				stdout = view // after the view's header
			}
			if status != 0 || !holderRE(c, "op:orders").MatchString(stdout) {
				t.Errorf("relock %s: status %d\n%s%s", strings.Join(args, " "), status, stdout, stderr)
			}
		}

		// -h and --help on every command: the flags on stdout, status 0; an operator
		// command's usage names its argument and the environment that can stand in for the
		// connection flags.
		for _, cmd := range []string{"demo", "inspect", "watch", "unlock"} {
			for _, h := range []string{"-h", "--help"} {
				stdout, stderr, status := runBinary(t, nil, cmd, h)
				if status != 0 || !strings.Contains(stdout, "-") || stderr != "" {
					t.Errorf("relock %s %s: status %d, stdout %q, stderr %q; want the flags on stdout and status 0", cmd, h, status, stdout, stderr)
				}
				if cmd != "demo" && (!strings.Contains(stdout, "Usage: relock "+cmd+" [flags] NAME") ||
					!strings.Contains(stdout, "REDIS_URL") || !strings.Contains(stdout, "REDIS_PASSWORD")) {
					t.Errorf("relock %s %s: %q; want the usage line, NAME, REDIS_URL and REDIS_PASSWORD", cmd, h, stdout)
				}
			}
		}

		// Two deployments named at once is a usage error, not one of them picked.
		if stdout, stderr, status := runBinary(t, nil, "inspect", "--cluster", "--sentinel-master", "m", "--redis", b.Addr, "op:orders"); status != 2 ||
			!strings.Contains(stderr, "--cluster") {
			t.Errorf("relock inspect --cluster --sentinel-master: status %d\n%s%s; want status 2 saying why", status, stdout, stderr)
		}

		// A force unlock with no terminal to ask on, and without -y, changes nothing and
		// fails.
		stdout, stderr, status := runBinary(t, nil, "unlock", "--force", "op:orders", "--redis", b.Addr)
		if status != 1 || !strings.Contains(stderr, "no terminal") {
			t.Errorf("relock unlock --force with no terminal: status %d\n%s%s; want status 1 saying why", status, stdout, stderr)
		}
		if locked, err := c.Lock("op:orders").IsLocked(context.Background()); err != nil || !locked {
			t.Errorf("the lock after an unlock that could not ask: locked %v (%v); want still held", locked, err)
		}

		// Into a pipe, watch writes no screen-control codes.
		stdout, stderr, status = runBinary(t, nil, "watch", "--count", "2", "--interval", "10ms", "--redis", b.Addr, "op:orders")
		if status != 0 || strings.ContainsAny(stdout, "\x1b") || strings.Count(stdout, "holds ×1") != 2 {
			t.Errorf("relock watch into a pipe: status %d, %q%s; want two views and no escape codes", status, stdout, stderr)
		}

		// Field names from Redis are printed escaped: an ESC or CR in one cannot drive the
		// operator's terminal.
		b.Server.Do(t, "HSET", "op:app", "color\x1b[2J", "blue", "size\rhidden", "9")
		stdout, stderr, status = runBinary(t, nil, "inspect", "--redis", b.Addr, "op:app")
		if status != 0 || strings.ContainsAny(stdout, "\x1b\r") || !strings.Contains(stdout, `"color\x1b[2J"`) || !strings.Contains(stdout, `"size\rhidden"`) {
			t.Errorf("relock inspect of a hash with control characters in its fields: status %d, %q%s; want them escaped", status, stdout, stderr)
		}

		// A name with no key says so.
		stdout, stderr, status = runBinary(t, nil, "inspect", "op:nothing", "--redis", b.Addr)
		if status != 0 || stdout != "op:nothing: free: no such key\n" {
			t.Errorf("relock inspect of a missing key: status %d, %q%s", status, stdout, stderr)
		}
	})
}

// The demo names its embedded Redis, and Ctrl-C ends it quietly with status 130.
func TestDemoInterrupted(t *testing.T) {
	status, stderr := endBySignal(t, []string{"PATH=" + t.TempDir()}, "miniredis", os.Interrupt, "demo", "--rounds", "100000")
	if status != 130 || stderr != "" {
		t.Errorf("the demo after Ctrl-C: status %d, stderr %q; want status 130 and nothing on stderr", status, stderr)
	}
}

// A signal ends watch as Ctrl-C does, quietly, with the shell's status for it: a
// supervisor stops the command with SIGTERM (143), a terminal with SIGINT (130).
func TestWatchEndedBySignal(t *testing.T) {
	s := redistest.StartServer(t)
	for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGINT} {
		status, stderr := endBySignal(t, nil, "every 50ms", sig, "watch", "--redis", s.Addr(), "--interval", "50ms", "nightly")
		if want := 128 + int(sig); status != want || stderr != "" {
			t.Errorf("watch after %v: status %d, stderr %q; want status %d and nothing on stderr", sig, status, stderr, want)
		}
	}
}

// endBySignal starts the built command with env as its whole environment, waits for its
// first line, which must contain first, sends it sig, and returns its exit status (-1 if
// the signal killed it) and what it wrote to stderr.
func endBySignal(t *testing.T, env []string, first string, sig os.Signal, args ...string) (int, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, relockBinary(t), args...)
	cmd.Env = append([]string{}, env...)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	lines := bufio.NewReader(out)
	if line, err := lines.ReadString('\n'); err != nil || !strings.Contains(line, first) {
		t.Errorf("relock %q: first line %q (%v); want it to contain %q", args, line, err, first)
	}
	if err := cmd.Process.Signal(sig); err != nil {
		t.Fatal(err)
	}
	go io.Copy(io.Discard, lines)
	err = cmd.Wait()
	var exit *exec.ExitError
	if err != nil && !errors.As(err, &exit) {
		t.Fatalf("relock %q: %v", args, err)
	}
	return cmd.ProcessState.ExitCode(), stderr.String()
}
