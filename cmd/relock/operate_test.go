package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/relock-go/relock"
	"github.com/relock-go/relock/internal/redistest"
	"github.com/relock-go/relock/rlock"
)

// relockCmd runs the command in process against addr.
func relockCmd(t *testing.T, addr, stdin string, args ...string) (string, error) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	env := func(string) string { return "" }
	err := run(context.Background(), append(args[:1:1], append([]string{"--redis", addr}, args[1:]...)...), env, strings.NewReader(stdin), &stdout, &stderr)
	return stdout.String() + stderr.String(), err
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !cond(); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal(what)
		}
	}
}

func TestInspect(t *testing.T) {
	redistest.Real(t, func(t *testing.T, b *redistest.Backend) {
		c, err := relock.New(b.Client(t))
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		ctx := context.Background()

		// rlock: one owner holding twice, with fencing.
		mu := c.Lock("orders", rlock.WithFencing())
		held, _ := mu.Lock(ctx)
		held, _ = mu.Lock(held)
		out, err := relockCmd(t, b.Addr, "", "inspect", "orders")
		if err != nil {
			t.Fatal(err, out)
		}
		if !regexp.MustCompile(`orders: rlock, held, lease .* left\n  ` + regexp.QuoteMeta(c.ID()) + `:\d+ +holds ×2\n  fencing token  1`).MatchString(out) {
			t.Errorf("inspect of an rlock:\n%s", out)
		}
		out, err = relockCmd(t, b.Addr, "", "inspect", "--json", "orders")
		if err != nil {
			t.Fatal(err)
		}
		var r Report
		if err := json.Unmarshal([]byte(out), &r); err != nil {
			t.Fatalf("JSON: %v\n%s", err, out)
		}
		if r.Kind != "rlock" || !r.Locked || len(r.Owners) != 1 || r.Owners[0].Holds != 2 || r.TTLMs <= 0 || r.Token == nil || *r.Token != 1 {
			t.Errorf("JSON report %+v", r)
		}

		// rwlock: two readers, and a writer waiting.
		rw := c.RWLock("config")
		r1, _ := rw.RLock(relock.NewOwner(ctx))
		r2, _ := rw.RLock(relock.NewOwner(ctx))
		go func() {
			wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			defer cancel()
			if h, err := rw.Lock(wctx); err == nil {
				_ = rw.Unlock(h)
			}
		}()
		out, _ = relockCmd(t, b.Addr, "", "inspect", "config")
		if !strings.Contains(out, "config: rwlock, held (read mode)") || strings.Count(out, "reads ×1  (leases ") != 2 {
			t.Errorf("inspect of an rwlock:\n%s", out)
		}
		_ = rw.RUnlock(r1)
		_ = rw.RUnlock(r2)

		// fairlock: a holder and two waiters in order.
		fl := c.FairLock("jobs")
		fh, _ := fl.Lock(ctx)
		for i := 0; i < 2; i++ {
			go func() {
				wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
				defer cancel()
				if h, err := fl.Lock(wctx); err == nil {
					_ = fl.Unlock(h)
				}
			}()
			waitFor(t, "waiter not queued", func() bool {
				r, err := inspectLock(ctx, b.Client(t), "jobs")
				return err == nil && len(r.Queue) == i+1
			})
		}
		out, _ = relockCmd(t, b.Addr, "", "inspect", "--json", "jobs")
		if err := json.Unmarshal([]byte(out), &r); err != nil {
			t.Fatal(err)
		}
		if r.Kind != "fairlock" || len(r.Queue) != 2 || r.Queue[0].ExpiresInMs <= 0 || r.Queue[0].Owner == r.Queue[1].Owner {
			t.Errorf("JSON report of a fair lock %+v", r)
		}
		out, _ = relockCmd(t, b.Addr, "", "inspect", "jobs")
		if !strings.Contains(out, "queue 1 ") || !strings.Contains(out, "queue 2 ") || !strings.Contains(out, "live, entry expires in") {
			t.Errorf("inspect of a fair lock:\n%s", out)
		}
		_ = fl.Unlock(fh)

		// Free and foreign keys.
		if out, _ = relockCmd(t, b.Addr, "", "inspect", "nothing"); out != "nothing: free\n" {
			t.Errorf("inspect of a free lock: %q", out)
		}
		b.Server.Do(t, "SET", "plain", "x")
		if out, _ = relockCmd(t, b.Addr, "", "inspect", "plain"); !strings.Contains(out, "not a lock (the key holds a string)") {
			t.Errorf("inspect of a string: %q", out)
		}
		_ = mu.Unlock(held)
		_ = mu.Unlock(held)
	})
}

// unlock --force frees a held lock and its waiter proceeds; without -y it asks first.
func TestForceUnlock(t *testing.T) {
	redistest.Real(t, func(t *testing.T, b *redistest.Backend) {
		c, err := relock.New(b.Client(t))
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		ctx := context.Background()
		if _, err := c.Lock("stuck").Lock(ctx); err != nil {
			t.Fatal(err)
		}
		got := make(chan error, 1)
		go func() {
			wctx, cancel := context.WithTimeout(ctx, 20*time.Second)
			defer cancel()
			_, err := c.Lock("stuck").Lock(wctx)
			got <- err
		}()
		waitFor(t, "waiter not waiting", func() bool { return c.Stats().Waiting == 1 })

		out, err := relockCmd(t, b.Addr, "n\n", "unlock", "--force", "stuck")
		if err != nil || !strings.Contains(out, "not unlocked") {
			t.Fatalf("declined force unlock: %v\n%s", err, out)
		}
		if locked, _ := c.Lock("stuck").IsLocked(ctx); !locked {
			t.Fatal("declining the confirmation unlocked the lock")
		}

		bin := buildRelock(t)
		cmd := exec.Command(bin, "unlock", "--force", "-y", "--redis", b.Addr, "stuck")
		outb, err := cmd.CombinedOutput()
		if err != nil || !strings.Contains(string(outb), "force-unlocked") {
			t.Fatalf("relock unlock --force -y: %v\n%s", err, outb)
		}
		select {
		case err := <-got:
			if err != nil {
				t.Fatalf("the waiter after the force unlock: %v", err)
			}
		case <-time.After(15 * time.Second):
			t.Fatal("the waiter did not proceed after the force unlock")
		}
		if st := c.Stats(); st.TimedOut != 0 {
			t.Errorf("stats %+v: the waiter was not woken by the force unlock's message", st)
		}
	})
}
