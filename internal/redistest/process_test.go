package redistest

import (
	"errors"
	"net"
	"strconv"
	"testing"
)

// A port that another process took between freePort and the bind must come back as
// errPortTaken, the one error onFreePort and Restart retry: a plain listener holds it (the
// new server exits at once on the bind), or another redis-server answers there (its pid
// is not the new process's). Without this, a start that lost the race would fail the
// test instead of moving to another port, or a test would talk to the wrong server.
func TestStartProcessOnTakenPort(t *testing.T) {
	bin := lookupServer(t)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	other := StartServer(t)
	for what, port := range map[string]int{
		"a listener": l.Addr().(*net.TCPAddr).Port,
		"a server":   other.port,
	} {
		p, err := startProcess(bin, []string{"--port", strconv.Itoa(port), "--bind", "127.0.0.1", "--save", ""}, port)
		if err == nil {
			p.stop(t, "redis-server on "+addrOf(port))
			t.Fatalf("redis-server started on the port %d held by %s", port, what)
		}
		if !errors.Is(err, errPortTaken) {
			t.Errorf("port held by %s: %v; want errPortTaken", what, err)
		}
	}
}

// retryPortTaken tries again only on errPortTaken, and at most startAttempts times: any
// other error, or success, ends it at once.
func TestRetryPortTaken(t *testing.T) {
	other := errors.New("other")
	for _, tc := range []struct {
		results []error
		want    error
		calls   int
	}{
		{[]error{nil}, nil, 1},
		{[]error{errPortTaken, nil}, nil, 2},
		{[]error{errPortTaken, other, nil}, other, 2},
		{[]error{errPortTaken, errPortTaken, errPortTaken, errPortTaken, errPortTaken, nil}, errPortTaken, startAttempts},
	} {
		calls := 0
		err := retryPortTaken(0, func() error {
			calls++
			return tc.results[calls-1]
		})
		if !errors.Is(err, tc.want) || (tc.want == nil) != (err == nil) || calls != tc.calls {
			t.Errorf("results %v: %v after %d calls; want %v after %d", tc.results, err, calls, tc.want, tc.calls)
		}
	}
}
