package redistest

// The one process starter of the harness: a data node (Server, cluster
// nodes) and a sentinel are each a redis-server process, started here on a
// loopback port, waited for until it answers as itself, and ended by its own
// pid. Every wait is bounded.

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"time"
)

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

// process is one run of redis-server, as a data node or a sentinel.
type process struct {
	cmd  *exec.Cmd
	out  *lockedBuffer
	done chan struct{} // closed once the process has been reaped
	err  error         // cmd.Wait's result, valid after done is closed
}

// startProcess starts bin with args, expecting it to listen on
// 127.0.0.1:port, and waits until it answers there as the process just
// started. On error the process has already been killed and reaped.
func startProcess(bin string, args []string, port int) (*process, error) {
	cmd := exec.Command(bin, args...)
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

// onFreePort calls start with a free loopback port, and again with another
// one while start fails with errPortTaken (another process took the port
// between freePort and the bind), at most startAttempts times. It returns
// start's last error.
func onFreePort(start func(port int) error) error {
	return retryPortTaken(0, func() error {
		port, err := freePort()
		if err != nil {
			return fmt.Errorf("find a free port: %w", err)
		}
		return start(port)
	})
}

// retryPortTaken calls start until it succeeds or fails with an error other
// than errPortTaken, at most startAttempts times, pausing between attempts.
// It returns start's last error.
func retryPortTaken(pause time.Duration, start func() error) error {
	var err error
	for attempt := range startAttempts {
		if attempt > 0 {
			time.Sleep(pause)
		}
		if err = start(); !errors.Is(err, errPortTaken) {
			return err
		}
	}
	return err
}

// freePort asks the kernel for a free loopback port. The port is released
// before redis-server binds it, so another process may take it in between;
// onFreePort detects that and retries.
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

// addrOf is the address of a process started on port: every one listens on
// 127.0.0.1 only.
func addrOf(port int) string {
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
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

// stop ends p at a test's cleanup, by its own pid. A process that exited by
// itself is logged, not failed, because a test may have shut it down on
// purpose (SHUTDOWN, DEBUG SEGFAULT); the log helps when it was not. what
// names it in the log, e.g. "sentinel on 127.0.0.1:7000".
func (p *process) stop(t tb, what string) {
	if p.exited() {
		t.Logf("redistest: %s had exited before cleanup (%v); its output:\n%s",
			what, p.err, p.out.String())
		return
	}
	if err := p.kill(); err != nil {
		t.Errorf("redistest: cleanup: %v", err)
	}
}

// untilOK calls check every pollInterval until it returns nil, or until
// timeout has passed, and then returns check's last error: the bounded wait
// of a start-up for its processes to form the setup asked for, and of the
// cluster and sentinel helpers that wait for a failover or for health.
func untilOK(timeout time.Duration, check func() error) error {
	deadline := time.Now().Add(timeout)
	for {
		err := check()
		if err == nil || time.Now().After(deadline) {
			return err
		}
		time.Sleep(pollInterval)
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
