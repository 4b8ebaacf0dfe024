package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/relock-go/relock"
	"github.com/relock-go/relock/fairlock"
	"github.com/relock-go/relock/internal/redistest"
	"github.com/relock-go/relock/internal/redistest/relocktest"
	"github.com/relock-go/relock/rlock"
	"github.com/relock-go/relock/rwlock"
)

func TestMain(m *testing.M) {
	// Main also stops the Redis Cluster of the "cluster" subtests and checks for leaked
	// goroutines, which the in-process runs of the command would show.
	code := redistest.Main(m)
	relockBin.remove()
	os.Exit(code)
}

// relockBin is the command built once for the tests that run it as a process: building
// it takes seconds on a loaded machine.
var relockBin builtBinary

type builtBinary struct {
	once sync.Once
	dir  string
	path string
	err  error
}

// relockBinary returns the built command, building it on first use.
func relockBinary(t *testing.T) string {
	t.Helper()
	b := &relockBin
	b.once.Do(func() {
		if b.dir, b.err = os.MkdirTemp("", "relock-cmd-test-"); b.err != nil {
			return
		}
		b.path = filepath.Join(b.dir, "relock")
		if out, err := exec.Command("go", "build", "-o", b.path, ".").CombinedOutput(); err != nil {
			b.err = errors.New("go build: " + err.Error() + "\n" + string(out))
		}
	})
	if b.err != nil {
		t.Fatal(b.err)
	}
	return b.path
}

func (b *builtBinary) remove() {
	if b.dir != "" {
		_ = os.RemoveAll(b.dir)
	}
}

// runBinary runs the built command with env as its whole environment, so that a
// REDIS_URL or REDIS_PASSWORD of the machine's cannot change what a test sees, and
// returns its output and exit status.
func runBinary(t *testing.T, env []string, args ...string) (stdout, stderr string, status int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, relockBinary(t), args...)
	cmd.Env = append([]string{}, env...) // never nil, which would pass on the test's own
	var o, e bytes.Buffer
	cmd.Stdout, cmd.Stderr = &o, &e
	err := cmd.Run()
	var exit *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &exit):
		status = exit.ExitCode()
	default:
		t.Fatalf("relock %q: %v", args, err)
	}
	return o.String(), e.String(), status
}

// relockCmd runs the command in process against addr.
func relockCmd(t *testing.T, addr, stdin string, args ...string) (string, error) {
	t.Helper()
	return runEnv(t, nil, stdin, append(args[:1:1], append([]string{"--redis", addr}, args[1:]...)...)...)
}

// runEnv runs the command in process with env as its environment.
func runEnv(t *testing.T, env map[string]string, stdin string, args ...string) (string, error) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	err := run(ctx, args, func(k string) string { return env[k] }, strings.NewReader(stdin), &stdout, &stderr)
	return stdout.String() + stderr.String(), err
}

// inspectJSON runs inspect --json in process and decodes its report.
func inspectJSON(t *testing.T, addr, name string) Report {
	t.Helper()
	out, err := relockCmd(t, addr, "", "inspect", "--json", name)
	if err != nil {
		t.Fatalf("inspect --json %s: %v\n%s", name, err, out)
	}
	var r Report
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatalf("inspect --json %s: %v\n%s", name, err, out)
	}
	return r
}

// async runs f in a goroutine; await collects its result.
func async(f func() error) <-chan error {
	ch := make(chan error, 1)
	go func() { ch <- f() }()
	return ch
}

func await(t *testing.T, what string, ch <-chan error) {
	t.Helper()
	select {
	case err := <-ch:
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("%s: not done after 30s", what)
	}
}

func TestInspectRLock(t *testing.T) {
	redistest.Real(t, func(t *testing.T, b *redistest.Backend) {
		c := relocktest.New(t, b)
		ctx := redistest.Context(t, 2*time.Minute)
		id := regexp.QuoteMeta(c.ID())

		// One owner holding twice, with fencing.
		mu := c.Lock("orders", rlock.WithFencing())
		held, err := mu.Lock(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if held, err = mu.Lock(held); err != nil {
			t.Fatal(err)
		}
		out, err := relockCmd(t, b.Addr, "", "inspect", "orders")
		if err != nil {
			t.Fatal(err, out)
		}
		if !regexp.MustCompile(`^orders: rlock, held, lease .* left\n  ` + id + `:\d+ +holds ×2` + clientCol + `\n  fencing token  1 \(last handed out\)\n` + clientNotes + `$`).MatchString(out) {
			t.Errorf("inspect of an rlock:\n%s", out)
		}
		r := inspectJSON(t, b.Addr, "orders")
		if r.Kind != "rlock" || !r.Locked || len(r.Owners) != 1 || r.Owners[0].Holds != 2 || r.TTLMs <= 0 || r.Token == nil || *r.Token != 1 || r.Subscribers != 0 {
			t.Errorf("JSON report %+v", r)
		}
		holder := r.Owners[0].Owner

		// Another owner waits: it is no holder, but its client's subscription shows.
		waiter := async(func() error {
			wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
			defer cancel()
			h, err := mu.Lock(wctx)
			if err != nil {
				return err
			}
			return mu.Unlock(h)
		})
		redistest.Eventually(t, 20*time.Second, "the waiter is not parked on the lock's channel", func() bool {
			return c.PubSubStats().Waiting == 1 && b.Server.Subscribers(t, "NUMSUB", "redisson_lock__channel:{orders}") == 1
		})
		out, _ = relockCmd(t, b.Addr, "", "inspect", "orders")
		if !regexp.MustCompile(`^orders: rlock, held, lease .* left\n  ` + regexp.QuoteMeta(holder) + ` +holds ×2` + clientCol + `\n  waiting clients  1 \(subscribed to the lock's wake-up channel\)\n` + parked("waiters", c) + `  fencing token  1 \(last handed out\)\n` + clientNotes + `$`).MatchString(out) {
			t.Errorf("inspect of an rlock with a waiter:\n%s", out)
		}
		r = inspectJSON(t, b.Addr, "orders")
		if len(r.Owners) != 1 || r.Owners[0].Owner != holder || r.Owners[0].Holds != 2 || r.Subscribers != 1 || !r.Locked ||
			len(r.WaitingClients) != 1 || r.WaitingClients[0].Readers || r.WaitingClients[0].ClientID != c.ID() {
			t.Errorf("JSON report with a waiter %+v", r)
		}

		// The waiter gets the lock after the holder's last unlock and leaves it free.
		_ = mu.Unlock(held)
		_ = mu.Unlock(held)
		await(t, "the waiter", waiter)
		redistest.Eventually(t, 20*time.Second, "the waiter's client is still subscribed", func() bool {
			return b.Server.Subscribers(t, "NUMSUB", "redisson_lock__channel:{orders}") == 0
		})
		out, _ = relockCmd(t, b.Addr, "", "inspect", "orders")
		if out != "orders: free: no such key\n  fencing token  2 (last handed out)\n" {
			t.Errorf("inspect after the waiter came and went: %q", out)
		}
	})
}

func TestInspectRWLock(t *testing.T) {
	redistest.Real(t, func(t *testing.T, b *redistest.Backend) {
		c := relocktest.New(t, b)
		ctx := redistest.Context(t, 2*time.Minute)
		id := regexp.QuoteMeta(c.ID())

		// Two readers, and a writer waiting for them. Without writer preference the
		// waiting writer leaves nothing in the lock's keys: only its client's subscription
		// to the lock's channel shows.
		rw := c.RWLock("config")
		r1, err := rw.RLock(relock.NewOwner(ctx))
		if err != nil {
			t.Fatal(err)
		}
		r2, err := rw.RLock(relock.NewOwner(ctx))
		if err != nil {
			t.Fatal(err)
		}
		writer := async(func() error {
			wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
			defer cancel()
			h, err := rw.Lock(wctx)
			if err != nil {
				return err
			}
			return rw.Unlock(h)
		})
		redistest.Eventually(t, 20*time.Second, "the writer is not parked on the lock's channel", func() bool {
			return c.PubSubStats().Waiting == 1 && b.Server.Subscribers(t, "NUMSUB", "redisson_rwlock:{config}") == 1
		})
		out, _ := relockCmd(t, b.Addr, "", "inspect", "config")
		if !regexp.MustCompile(`^config: rwlock, held \(read mode\), lease .* left\n(  ` + id + `:\d+ +reads ×1  \(leases \d[^,\n)]*\)` + clientCol + `\n){2}  waiting clients  1 \(subscribed to the lock's wake-up channel\)\n` + parked("writers", c) + clientNotes + `$`).MatchString(out) {
			t.Errorf("inspect of an rwlock with a waiting writer:\n%s", out)
		}
		r := inspectJSON(t, b.Addr, "config")
		if r.Kind != "rwlock" || r.Mode != "read" || !r.Locked || r.TTLMs <= 0 || len(r.Owners) != 2 || r.Subscribers != 1 || len(r.Writers) != 0 || r.Token != nil ||
			len(r.WaitingClients) != 1 || r.WaitingClients[0].Readers || r.WaitingClients[0].ClientID != c.ID() {
			t.Errorf("JSON report of an rwlock %+v", r)
		}
		for _, o := range r.Owners {
			if o.Write || o.Holds != 1 || len(o.ReadTTLsMs) != 1 || o.ReadTTLsMs[0] <= 0 || !strings.HasPrefix(o.Owner, c.ID()+":") {
				t.Errorf("JSON report of an rwlock reader %+v", o)
			}
		}
		_ = rw.RUnlock(r1)
		_ = rw.RUnlock(r2)
		await(t, "the writer", writer)

		// Under writer preference the waiting writer registers, and inspect names it.
		pref := c.RWLock("prefs", rwlock.WithWriterPreference())
		reader, err := pref.RLock(relock.NewOwner(ctx))
		if err != nil {
			t.Fatal(err)
		}
		wrote := make(chan context.Context, 1)
		release := make(chan struct{})
		writer = async(func() error {
			wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
			defer cancel()
			h, err := pref.Lock(wctx)
			if err != nil {
				return err
			}
			wrote <- h
			<-release
			return pref.Unlock(h)
		})
		defer close(release)
		redistest.Eventually(t, 20*time.Second, "the writer did not register as waiting", func() bool {
			if c.PubSubStats().Waiting != 1 || b.Server.Subscribers(t, "NUMSUB", "redisson_rwlock:{prefs}") != 1 {
				return false
			}
			n, _ := b.Server.Do(t, "ZCARD", "relock_rwlock_writers:{prefs}").AsInt64()
			return n == 1
		})
		r = inspectJSON(t, b.Addr, "prefs")
		if r.Kind != "rwlock" || r.Mode != "read" || len(r.Owners) != 1 || len(r.Writers) != 1 || r.Subscribers != 1 {
			t.Fatalf("JSON report of an rwlock with a registered writer %+v", r)
		}
		waiting := r.Writers[0]
		if !strings.HasPrefix(waiting.Owner, c.ID()+":") || waiting.Owner == r.Owners[0].Owner || waiting.ExpiresInMs <= 0 {
			t.Errorf("the waiting writer %+v (the reader is %s)", waiting, r.Owners[0].Owner)
		}
		out, _ = relockCmd(t, b.Addr, "", "inspect", "prefs")
		if !regexp.MustCompile(`^prefs: rwlock, held \(read mode\), lease .* left\n  ` + id + `:\d+ +reads ×1  \(leases [^\n)]*\)` + clientCol + `\n  writer   ` + regexp.QuoteMeta(waiting.Owner) + ` +waits \(new readers give way\), entry expires in [^\n;]+;` + clientCol[1:] + `\n  waiting clients  1 \(subscribed to the lock's wake-up channel\)\n` + parked("writers", c) + clientNotes + `$`).MatchString(out) {
			t.Errorf("inspect of an rwlock with a registered writer:\n%s", out)
		}

		// The writer shown waiting is the one that then holds the lock.
		_ = pref.RUnlock(reader)
		select {
		case <-wrote:
		case err := <-writer:
			t.Fatalf("the writer: %v", err)
		case <-time.After(30 * time.Second):
			t.Fatal("the writer did not get the lock")
		}
		r = inspectJSON(t, b.Addr, "prefs")
		if r.Mode != "write" || len(r.Owners) != 1 || !r.Owners[0].Write || r.Owners[0].Owner != waiting.Owner || len(r.Writers) != 0 {
			t.Errorf("JSON report after the writer's turn %+v; the waiting writer was %s", r, waiting.Owner)
		}
		// The writer's client keeps the channel subscribed for a moment after its last
		// waiter left (the hub's linger); then nobody is counted as waiting.
		redistest.Eventually(t, 20*time.Second, "the channel is still subscribed after the linger", func() bool {
			return b.Server.Subscribers(t, "NUMSUB", "redisson_rwlock:{prefs}") == 0
		})
		out, _ = relockCmd(t, b.Addr, "", "inspect", "prefs")
		if !regexp.MustCompile(`^prefs: rwlock, held \(write mode\), lease .* left\n  ` + regexp.QuoteMeta(waiting.Owner) + ` +writes ×1` + clientCol + `\n` + clientNotes + `$`).MatchString(out) {
			t.Errorf("inspect of a write-held rwlock:\n%s", out)
		}
		release <- struct{}{}
		await(t, "the writer", writer)
	})
}

func TestInspectFairLockAndOthers(t *testing.T) {
	redistest.Real(t, func(t *testing.T, b *redistest.Backend) {
		c := relocktest.New(t, b)
		ctx := redistest.Context(t, 2*time.Minute)

		// A holder and two waiters in order.
		fl := c.FairLock("jobs")
		fh, err := fl.Lock(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var waiters []<-chan error
		for i := range 2 {
			waiters = append(waiters, async(func() error {
				wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
				defer cancel()
				h, err := fl.Lock(wctx)
				if err != nil {
					return err
				}
				return fl.Unlock(h)
			}))
			redistest.Eventually(t, 20*time.Second, "waiter not queued", func() bool {
				r, err := inspectLock(ctx, b.Client(t), "jobs")
				return err == nil && len(r.Queue) == i+1
			})
		}
		r := inspectJSON(t, b.Addr, "jobs")
		if r.Kind != "fairlock" || len(r.Queue) != 2 || r.Queue[0].ExpiresInMs <= 0 || r.Queue[0].Owner == r.Queue[1].Owner {
			t.Errorf("JSON report of a fair lock %+v", r)
		}
		out, _ := relockCmd(t, b.Addr, "", "inspect", "jobs")
		if !strings.Contains(out, "queue 1 ") || !strings.Contains(out, "queue 2 ") || !strings.Contains(out, "live, entry expires in") {
			t.Errorf("inspect of a fair lock:\n%s", out)
		}
		_ = fl.Unlock(fh)
		for _, w := range waiters {
			await(t, "a fair waiter", w)
		}

		// Free and foreign keys.
		if out, _ = relockCmd(t, b.Addr, "", "inspect", "nothing"); out != "nothing: free: no such key\n" {
			t.Errorf("inspect of a free lock: %q", out)
		}
		// A lock without expiry (a PERSIST by hand; neither relock nor Redisson makes one)
		// says so, not "lease no expiry left".
		b.Server.Do(t, "HSET", "forever", c.ID()+":1", "1")
		if out, _ = relockCmd(t, b.Addr, "", "inspect", "forever"); !strings.HasPrefix(out, "forever: rlock, held, no expiry\n") {
			t.Errorf("inspect of a lock without expiry: %q", out)
		}
		b.Server.Do(t, "SET", "plain", "x")
		if out, _ = relockCmd(t, b.Addr, "", "inspect", "plain"); !strings.Contains(out, "not a lock (the key holds a string)") {
			t.Errorf("inspect of a string: %q", out)
		}
	})
}

// syncBuffer is a bytes.Buffer that a running command writes while the test reads it.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// viewHeader starts each of watch's views: the time, then the view count or interval.
var viewHeader = regexp.MustCompile(`(?m)^\d\d:\d\d:\d\d  \(`)

// views splits watch's output into its views. Into a buffer, not a terminal, watch writes
// no screen-control codes: views follow one another, a blank line apart.
func views(out string) []string {
	var vs []string
	idx := viewHeader.FindAllStringIndex(out, -1)
	for i, at := range idx {
		end := len(out)
		if i+1 < len(idx) {
			end = idx[i+1][0] - 1 // the blank line before the next view
		}
		vs = append(vs, out[at[0]:end])
	}
	return vs
}

// watch shows the lock as it is at each refresh: the holder, then the lock free once it is
// unlocked; --count ends it by itself.
func TestWatch(t *testing.T) {
	redistest.Real(t, func(t *testing.T, b *redistest.Backend) {
		c := relocktest.New(t, b)
		ctx := redistest.Context(t, 2*time.Minute)
		mu := c.Lock("nightly")
		held, err := mu.Lock(ctx)
		if err != nil {
			t.Fatal(err)
		}
		holder := regexp.MustCompile(`\nnightly: rlock, held, lease .* left\n  ` + regexp.QuoteMeta(c.ID()) + `:\d+ +holds ×1` + clientCol + `\n`)

		out, err := relockCmd(t, b.Addr, "", "watch", "--count", "3", "--interval", "10ms", "nightly")
		if err != nil {
			t.Fatalf("watch --count 3: %v\n%s", err, out)
		}
		vs := views(out)
		if len(vs) != 3 {
			t.Fatalf("watch --count 3 showed %d views:\n%q", len(vs), out)
		}
		for i, v := range vs {
			if !strings.Contains(v, fmt.Sprintf("(view %d of 3, every 10ms)", i+1)) || !holder.MatchString(v) {
				t.Errorf("view %d of watch --count 3:\n%s", i+1, v)
			}
		}

		// A watch left running shows the unlock in a later view, and stops when
		// interrupted (here its context ends).
		var buf syncBuffer
		wctx, stop := context.WithTimeout(ctx, time.Minute)
		defer stop()
		done := async(func() error {
			return run(wctx, []string{"watch", "--redis", b.Addr, "--interval", "20ms", "nightly"},
				func(string) string { return "" }, strings.NewReader(""), &buf, &buf)
		})
		redistest.Eventually(t, 20*time.Second, "no view shows the holder", func() bool { return holder.MatchString(buf.String()) })
		if err := mu.Unlock(held); err != nil {
			t.Fatal(err)
		}
		redistest.Eventually(t, 20*time.Second, "no view shows the lock free after the unlock", func() bool {
			return strings.Contains(buf.String(), "\nnightly: free: no such key\n")
		})
		stop()
		await(t, "watch after its interrupt", done)

		vs = views(buf.String())
		free := -1
		for i, v := range vs {
			switch {
			case holder.MatchString(v):
				if free >= 0 {
					t.Errorf("view %d shows the holder after view %d showed the lock free", i+1, free+1)
				}
			case strings.HasSuffix(v, "\nnightly: free: no such key\n"):
				if free < 0 {
					free = i
				}
			default:
				t.Errorf("view %d shows neither the holder nor the lock free:\n%q", i+1, v)
			}
			if !strings.Contains(v, "(every 20ms; interrupt to stop)") {
				t.Errorf("view %d has no header:\n%q", i+1, v)
			}
		}
		if free < 1 {
			t.Errorf("want views of the holder, then of the lock free; the first free view is %d of %d", free+1, len(vs))
		}

		// An interrupt that lands while a view is being read ends watch as quietly as one
		// that lands between views: here it has come before the first read.
		cancelled, cancel := context.WithCancel(ctx)
		cancel()
		var quiet bytes.Buffer
		err = run(cancelled, []string{"watch", "--redis", b.Addr, "nightly"}, func(string) string { return "" }, strings.NewReader(""), &quiet, &quiet)
		if err != nil || quiet.Len() != 0 {
			t.Errorf("watch interrupted during its first read: %v, output %q; want no error and no view", err, quiet.String())
		}
	})
}

// unlock --force frees a held lock and its waiter proceeds; without -y it asks first.
func TestForceUnlock(t *testing.T) {
	redistest.Real(t, func(t *testing.T, b *redistest.Backend) {
		c := relocktest.New(t, b)
		ctx := redistest.Context(t, 2*time.Minute)
		if _, err := c.Lock("stuck").Lock(ctx); err != nil {
			t.Fatal(err)
		}
		got := make(chan error, 1)
		go func() {
			wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
			defer cancel()
			h, err := c.Lock("stuck").Lock(wctx)
			if err == nil {
				err = c.Lock("stuck").Unlock(h)
			}
			got <- err
		}()
		redistest.Eventually(t, 20*time.Second, "waiter not waiting", func() bool { return c.PubSubStats().Waiting == 1 })

		out, err := relockCmd(t, b.Addr, "n\n", "unlock", "--force", "stuck")
		if err == nil || !strings.Contains(err.Error(), "not unlocked: the confirmation was declined") {
			t.Fatalf("declined force unlock: %v; want an error (exit status 1)\n%s", err, out)
		}
		if locked, _ := c.Lock("stuck").IsLocked(ctx); !locked {
			t.Fatal("declining the confirmation unlocked the lock")
		}

		stdout, stderr, status := runBinary(t, nil, "unlock", "--force", "-y", "--redis", b.Addr, "stuck")
		if status != 0 || !strings.Contains(stdout, "force-unlocked") {
			t.Fatalf("relock unlock --force -y: status %d\n%s%s", status, stdout, stderr)
		}
		select {
		case err := <-got:
			if err != nil {
				t.Fatalf("the waiter after the force unlock: %v", err)
			}
		case <-time.After(25 * time.Second):
			t.Fatal("the waiter did not proceed after the force unlock")
		}
		if st := c.PubSubStats(); st.TimedOut != 0 {
			t.Errorf("stats %+v: the waiter was not woken by the force unlock's message", st)
		}
	})
}

// unlock --force releases each kind by that kind's own release, so that its waiters are
// woken by a message, not by their time bounds: a fair lock's first queued waiter on its
// own channel, and the readers of an rwlock held for writing, of several clients, all
// together. Of a multilock it frees the member it names and leaves the other as it was.
// Guards against a fair lock or an rwlock released as a plain lock (whose message no fair
// waiter hears, and whose script refuses an rwlock).
func TestForceUnlockWakesEachKind(t *testing.T) {
	redistest.Real(t, func(t *testing.T, b *redistest.Backend) {
		holder := relocktest.New(t, b)
		ctx := redistest.Context(t, 2*time.Minute)
		forced := func(t *testing.T, name string) {
			t.Helper()
			stdout, stderr, status := runBinary(t, nil, "unlock", "--force", "-y", "--redis", b.Addr, name)
			if status != 0 || stdout != name+" force-unlocked; waiters woken\n" {
				t.Fatalf("relock unlock --force -y %s: status %d\n%s%s", name, status, stdout, stderr)
			}
		}
		// waiter takes and releases the lock with lock and unlock within 30s.
		waiter := func(lock func(context.Context) (context.Context, error), unlock func(context.Context) error) <-chan error {
			return async(func() error {
				wctx, cancel := context.WithTimeout(relock.NewOwner(ctx), 30*time.Second)
				defer cancel()
				h, err := lock(wctx)
				if err != nil {
					return err
				}
				return unlock(h)
			})
		}

		t.Run("fair lock", func(t *testing.T) {
			waiting := relocktest.New(t, b)
			if _, err := holder.FairLock("fair-forced").Lock(relock.NewOwner(ctx)); err != nil {
				t.Fatal(err)
			}
			// A refresh period beyond the test: only a message wakes the waiter in time.
			fl := waiting.FairLock("fair-forced", fairlock.WithRefreshPeriod(time.Minute))
			done := waiter(func(ctx context.Context) (context.Context, error) { return fl.Lock(ctx) }, fl.Unlock)
			redistest.Eventually(t, 20*time.Second, "the fair waiter is not queued", func() bool {
				return waiting.PubSubStats().Waiting == 1 && len(redistest.FairQueue(t, b.Client(t), "fair-forced")) == 1
			})
			forced(t, "fair-forced")
			if err := redistest.Recv(t, done, 25*time.Second, "the fair waiter after the force unlock"); err != nil {
				t.Fatal(err)
			}
			if st := waiting.PubSubStats(); st.TimedOut != 0 || st.Woken != 1 {
				t.Errorf("the fair waiter's hub %+v; want it woken by the force unlock's message, not by a time bound", st)
			}
		})

		t.Run("rwlock readers of two clients", func(t *testing.T) {
			c1, c2 := relocktest.New(t, b), relocktest.New(t, b)
			if _, err := holder.RWLock("rw-forced").Lock(relock.NewOwner(ctx)); err != nil {
				t.Fatal(err)
			}
			var readers []<-chan error
			for _, c := range []*relock.Client{c1, c2, c2} {
				rw := c.RWLock("rw-forced")
				readers = append(readers, waiter(func(ctx context.Context) (context.Context, error) { return rw.RLock(ctx) }, rw.RUnlock))
			}
			redistest.Eventually(t, 20*time.Second, "the readers are not parked", func() bool { return relocktest.Waiting(c1, c2) == 3 })
			forced(t, "rw-forced")
			for _, r := range readers {
				if err := redistest.Recv(t, r, 25*time.Second, "a reader after the force unlock"); err != nil {
					t.Fatal(err)
				}
			}
			for i, c := range []*relock.Client{c1, c2} {
				if st := c.PubSubStats(); st.TimedOut != 0 {
					t.Errorf("client %d's hub %+v: a reader was not woken by the force unlock's message", i+1, st)
				}
			}
		})

		t.Run("multilock member", func(t *testing.T) {
			rc := b.Client(t)
			ml := holder.MultiLock(relock.Member(holder.Lock("member-a")), relock.Member(holder.Lock("member-b")))
			if _, err := ml.Lock(relock.NewOwner(ctx)); err != nil {
				t.Fatal(err)
			}
			before := redistest.Snapshot(t, rc, "member-b")
			forced(t, "member-a")
			if n, _ := redistest.Do(t, rc, "EXISTS", "member-a").AsInt64(); n != 0 {
				t.Error("member-a is still there after unlock --force member-a")
			}
			if after := redistest.Snapshot(t, rc, "member-b"); after != before {
				t.Errorf("unlock --force member-a changed member-b:\nbefore %s\nafter  %s", before, after)
			}
		})
	})
}

// watch goes on through a server that stops answering: each look is bounded, a view that
// could not be read says so, and --count still ends the watch by itself. (Without the
// bound rueidis sends a read again until its context ends, and the watch waits for ever.)
func TestWatchThroughAStoppedServer(t *testing.T) {
	s := redistest.StartServer(t)
	rc := s.Client(t)
	redistest.MustDo(t, rc, "HSET", "nightly", "someone:1", "1")

	var buf syncBuffer
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	done := async(func() error {
		return run(ctx, []string{"watch", "--redis", s.Addr(), "--count", "3", "--interval", "100ms", "nightly"},
			func(string) string { return "" }, strings.NewReader(""), &buf, &buf)
	})
	redistest.Eventually(t, 20*time.Second, "no first view", func() bool { return strings.Contains(buf.String(), "(view 1 of 3") })
	s.Pause(t)
	defer s.Resume(t)
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("watch --count 3: %v\n%s", err, buf.String())
		}
	case <-time.After(90 * time.Second):
		t.Fatalf("watch --count 3 did not end within 90s of its server stopping:\n%s", buf.String())
	}
	vs := views(buf.String())
	if len(vs) != 3 || !strings.Contains(vs[2], "nightly: could not be read: ") {
		t.Errorf("watch --count 3 through a stopped server showed %d views; want 3, the last saying it could not read the lock:\n%s", len(vs), buf.String())
	}
}

// watch whose first look fails has nothing to watch: an invalid name ends it at once
// with the name's error (and a non-zero status), rather than a view per interval saying
// the lock could not be read. Only a failure after a first view is watched through
// (TestWatchThroughAStoppedServer).
func TestWatchEndsWhenItsFirstLookFails(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		out, err := relockCmd(t, b.Addr, "", "watch", "--count", "2", "--interval", "10ms", "a}b")
		if !errors.Is(err, relock.ErrInvalidName) || strings.Contains(out, "could not be read") {
			t.Errorf("watch of an invalid name: %v\n%s; want ErrInvalidName and no view", err, out)
		}
	})
}

// A lock's auxiliary key that holds other data makes inspect fail with an error that
// names the lock and the key, not Redis's bare WRONGTYPE; and a name with a control
// character is printed quoted by unlock as by inspect, so that it cannot drive the
// terminal.
func TestOperatorErrorsNameTheirKeys(t *testing.T) {
	redistest.Real(t, func(t *testing.T, b *redistest.Backend) {
		rc := b.Client(t)
		holdLock(t, relocktest.New(t, b), "fx")
		redistest.MustDo(t, rc, "SET", "relock_wake:{fx}", "hello")
		out, err := relockCmd(t, b.Addr, "", "inspect", "fx")
		if err == nil || !strings.Contains(err.Error(), `lock "fx"`) || !strings.Contains(err.Error(), `key "relock_wake:{fx}"`) {
			t.Errorf("inspect with a string at relock_wake:{fx}: %v\n%s; want an error naming the lock and the key", err, out)
		}

		out, err = relockCmd(t, b.Addr, "", "unlock", "--force", "-y", "a\x1b[31mRED")
		if err != nil || strings.ContainsRune(out, '\x1b') || !strings.Contains(out, `"a\x1b[31mRED" is not held`) {
			t.Errorf("unlock of a name with an escape: %v, output %q; want it quoted", err, out)
		}
	})
}
