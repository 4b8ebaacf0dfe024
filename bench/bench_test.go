package main

import (
	"bufio"
	"context"
	"errors"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/relock-go/relock/internal/keys"
	"github.com/relock-go/relock/internal/script"
)

// A request is an array of bulk strings, lengths in bytes, empty arguments included; the
// request counter parses what the encoder writes.
func TestAppendCommand(t *testing.T) {
	got := string(appendCommand([]byte("x"), "SET", "k€", ""))
	want := "x*3\r\n$3\r\nSET\r\n$4\r\nk€\r\n$0\r\n\r\n"
	if got != want {
		t.Fatalf("appendCommand = %q; want %q", got, want)
	}
	name, used, ok := parseRequest([]byte(got[1:]))
	if !ok || name != "set" || used != len(got)-1 {
		t.Fatalf("parseRequest of the encoded request = %q, %d, %v", name, used, ok)
	}
}

// Every RESP2 reply kind is read whole, nested arrays and nils included, and the stream is
// left at the next reply.
func TestReadReply(t *testing.T) {
	in := "+OK\r\n-ERR no\r\n:-42\r\n$5\r\na\r\nb!\r\n$-1\r\n*-1\r\n*3\r\n:1\r\n*1\r\n$0\r\n\r\n:7\r\n"
	r := bufio.NewReader(strings.NewReader(in))
	want := []string{"+OK", "-ERR no", "-42", "$a\r\nb!", "nil", "nil array", "[1 [$] 7]"}
	for i, w := range want {
		rep, err := readReply(r)
		if err != nil {
			t.Fatalf("reply %d: %v", i, err)
		}
		if got := rep.String(); got != w {
			t.Fatalf("reply %d = %q; want %q", i, got, w)
		}
	}
	if _, err := readReply(r); err == nil {
		t.Fatal("read past the end without an error")
	}
}

// Bytes that are not a reply are an error, not a hang or a wrong value.
func TestReadReplyRejects(t *testing.T) {
	for _, in := range []string{"?x\r\n", ":12a\r\n", "$3\r\nabcd\r\n", "$-2\r\n", "+OK\n", "*2000000\r\n"} {
		if _, err := readReply(bufio.NewReader(strings.NewReader(in))); !errors.Is(err, errProtocol) {
			t.Errorf("readReply(%q) = %v; want a protocol error", in, err)
		}
	}
}

// relock's ceiling cycle is two EVALSHAs of the engine's scripts on the lock's own keys,
// every key and argument with the lock's name or the owner where the engine puts them.
func TestRelockCeilingCycle(t *testing.T) {
	conn := &ceilingConn{names: []keys.Names{keys.Of("orders")}}
	b := ceilingVariants[0].cycle(nil, conn, 0, "u:1")
	s := string(b)
	var names []string
	for len(b) > 0 {
		name, used, ok := parseRequest(b)
		if !ok {
			t.Fatalf("incomplete request in %q", b)
		}
		names = append(names, name)
		b = b[used:]
	}
	if strings.Join(names, ",") != "evalsha,evalsha" {
		t.Fatalf("commands %v; want two EVALSHAs", names)
	}
	for _, part := range []string{script.RLockAcquire().SHA1, script.RLockUnlock().SHA1, "$6\r\norders\r\n",
		"redisson_lock__channel:{orders}", "$5\r\n30000\r\n", "$3\r\nu:1\r\n", "publish"} {
		if !strings.Contains(s, part) {
			t.Errorf("cycle %q lacks %q", s, part)
		}
	}
}

// The per-acquisition and per-lease arithmetic: totals divided by their counts, nothing
// to divide by giving NaN (printed "-") rather than a zero or an infinity.
func TestPerArithmetic(t *testing.T) {
	if got := per(9, 4); got != 2.25 {
		t.Fatalf("per(9, 4) = %v", got)
	}
	if !math.IsNaN(per(9, 0)) || num(per(9, 0), 1) != "-" {
		t.Fatal("per of nothing is not NaN printed as -")
	}
	p := scalePoint{procs: 2, waiters: 8, memPeak: 1600,
		round: s2Round{acq: 10, sent: map[string]int64{"evalsha": 30, "subscribe": 2}, commands: map[string]int64{"evalsha": 30, "hincrby": 60}}}
	if p.sentPerAcq() != 3.2 || p.runPerAcq() != 9 || p.memPerWaiter() != 100 || p.memPerAcq() != 160 {
		t.Fatalf("scale point: %v sent, %v run, %v B per waiter, %v B per acquisition; want 3.2, 9, 100, 160",
			p.sentPerAcq(), p.runPerAcq(), p.memPerWaiter(), p.memPerAcq())
	}
	m := manyResult{procs: 4, waiters: 1250, parked: map[string]int64{"evalsha": 24}}
	if got := m.callsPerProcLease(); got != 2 {
		t.Fatalf("calls per process per lease = %v; want 24 ÷ (4 processes × %d leases) = 2", got, manyLeases)
	}
	if got := cpuBound(2, 30, 20); got != 40000 {
		t.Fatalf("cpuBound(2 cores, 30 µs + 20 µs) = %v; want 40000 cycles/s", got)
	}
	if got := thousands(5000); got != "5,000" {
		t.Fatalf("thousands(5000) = %q", got)
	}
}

// A step-aside window stretches past its length until enough handoffs, and no further.
func TestContendStretches(t *testing.T) {
	l := newLocalLock()
	handles := []locker{l, l}
	start := time.Now()
	evs, _ := contend(handles, 0, start, window{dur: 10 * time.Millisecond, stretch: 5 * time.Second, handoffs: 50}, 0, true)
	if el := time.Since(start); el > 4*time.Second {
		t.Fatalf("window ran %v; it should have closed after 50 handoffs", el)
	}
	if r := analyse(evs, 2, time.Second, 0); len(r.handoffs) < 49 {
		t.Fatalf("%d handoffs; want about 50", len(r.handoffs))
	}
}

// localLock is an in-process lock with a locker's contract, for testing the drivers.
type localLock struct{ ch chan struct{} }

func newLocalLock() *localLock { return &localLock{ch: make(chan struct{}, 1)} }

func (l *localLock) Lock(ctx context.Context) (func() error, error) {
	select {
	case l.ch <- struct{}{}:
		return func() error { <-l.ch; return nil }, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// The scale charts are written as SVG, one per axis.
func TestScaleCharts(t *testing.T) {
	pt := func(procs, waiters int) scalePoint {
		return scalePoint{procs: procs, waiters: waiters, round: s2Round{acq: 10, sent: map[string]int64{"evalsha": 40}}}
	}
	r := &report{scale: scaleResult{waiters: []scalePoint{pt(1, 1), pt(1, 100)}, procs: []scalePoint{pt(1, 16), pt(8, 2)}}}
	dir := t.TempDir()
	files, err := r.scaleCharts(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(files) != 2 {
		t.Fatalf("wrote %v; want two charts", files)
	}
	for _, f := range files {
		b, err := os.ReadFile(filepath.Join(dir, f))
		if err != nil || !strings.Contains(string(b), "<svg") {
			t.Fatalf("%s: %v, not an SVG", f, err)
		}
	}
}

// A semaphore run's k-th acquisition takes the permit of the (k-permits)-th release: a
// handoff when another goroutine released it, timed from the release's return (at least 0)
// and from its call.
func TestAnalyseSem(t *testing.T) {
	us := int64(time.Microsecond)
	evs := []event{
		// Two permits: goroutines 0 and 1 take them at the start.
		{Waiter: 0, Ask: 0, Acq: 10 * us, Leave: 100 * us, Rel: 110 * us},
		{Waiter: 1, Ask: 0, Acq: 20 * us, Leave: 200 * us, Rel: 210 * us},
		// Goroutine 2 waited and got 0's permit 30 µs after the release returned.
		{Waiter: 2, Ask: 5 * us, Acq: 140 * us, Leave: 300 * us, Rel: 310 * us},
		// Goroutine 1 took its own permit back.
		{Waiter: 1, Ask: 211 * us, Acq: 230 * us, Leave: 400 * us, Rel: 410 * us},
		// Goroutine 0 got 2's permit before 2's release returned: 0.
		{Waiter: 0, Ask: 120 * us, Acq: 305 * us, Leave: 500 * us, Rel: 510 * us},
	}
	r := analyseSem(evs, 3, 2, time.Second, 0)
	want := []time.Duration{30 * time.Microsecond, 0}
	if !reflect.DeepEqual(r.handoffs, want) {
		t.Fatalf("handoffs %v; want %v", r.handoffs, want)
	}
	if want := []time.Duration{40 * time.Microsecond, 5 * time.Microsecond}; !reflect.DeepEqual(r.fromCall, want) {
		t.Fatalf("from the call %v; want %v", r.fromCall, want)
	}
	if r.same != 1 || r.acq != 5 || r.violations != 0 {
		t.Fatalf("same %d, acquisitions %d, overlaps %d; want 1, 5, 0", r.same, r.acq, r.violations)
	}
	if !reflect.DeepEqual(r.perWaiter, []int64{2, 2, 1}) {
		t.Fatalf("per waiter %v", r.perWaiter)
	}
}

// More holders inside their critical sections than permits is an overlap; a release and an
// acquisition at the same instant are not.
func TestBeyondPermits(t *testing.T) {
	evs := []event{
		{Acq: 0, Leave: 10},
		{Acq: 5, Leave: 20},
		{Acq: 10, Leave: 30}, // 0 left at 10: two inside
		{Acq: 15, Leave: 16}, // 1 and 2 are inside: a third
	}
	if got := beyondPermits(evs, 2); got != 1 {
		t.Fatalf("beyondPermits = %d; want 1", got)
	}
	if got := beyondPermits(evs, 3); got != 0 {
		t.Fatalf("beyondPermits with 3 permits = %d; want 0", got)
	}
}
