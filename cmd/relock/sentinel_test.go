package main

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/relock-go/relock/internal/redistest"
	"github.com/relock-go/relock/internal/redistest/relocktest"
)

// With --sentinel-master the addresses are sentinels, and the operator commands act on the
// master they name: inspect shows the holder that the master has (the master's CLIENT
// LIST knows its connection), unlock --force frees the lock there and its waiter is woken
// by the message, and after a failover inspect reads the new master. A master set the
// sentinels do not know is an error that says so. Guards against commands that read a
// replica (a stale view, whose holders seem gone) or the sentinels themselves.
func TestSentinelMasterFlag(t *testing.T) {
	s := redistest.StartSentinel(t)
	c := relocktest.On(t, s.Client(t))
	ctx := redistest.Context(t, 2*time.Minute)
	seeds := strings.Join(s.SentinelAddrs(), ",")
	cmd := func(op string, args ...string) (string, error) {
		t.Helper()
		return runEnv(t, nil, "", append([]string{op, "--sentinel-master", s.MasterName(), "--redis", seeds}, args...)...)
	}
	held, err := c.Lock("sentinel-stuck").Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if out, err := cmd("inspect", "sentinel-stuck"); err != nil || !holderRE(c, "sentinel-stuck").MatchString(out) {
		t.Errorf("inspect through the sentinels: %v\n%s", err, out)
	}
	out, err := runEnv(t, nil, "", "inspect", "--sentinel-master", "no-such-set", "--redis", seeds, "sentinel-stuck")
	if err == nil || !strings.Contains(out+err.Error(), "No such master") {
		t.Errorf("inspect of a master set the sentinels do not know: %v\n%s; want an error saying so", err, out)
	}

	waiter := async(func() error {
		wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		h, err := c.Lock("sentinel-stuck").Lock(wctx)
		if err == nil {
			err = c.Lock("sentinel-stuck").Unlock(h)
		}
		return err
	})
	redistest.Eventually(t, 20*time.Second, "the waiter is not waiting", func() bool { return c.PubSubStats().Waiting == 1 })
	if out, err := cmd("unlock", "--force", "-y", "sentinel-stuck"); err != nil || !strings.Contains(out, "force-unlocked") {
		t.Fatalf("unlock --force through the sentinels: %v\n%s", err, out)
	}
	await(t, "the waiter after the force unlock", waiter)
	if st := c.PubSubStats(); st.TimedOut != 0 {
		t.Errorf("stats %+v: the waiter was not woken by the force unlock's message", st)
	}
	_ = held // force-unlocked

	old := s.Master()
	old.Kill(t)
	s.WaitFailover(t, old, 30*time.Second)
	redistest.Eventually(t, 20*time.Second, "no lock on the new master", func() bool {
		lctx, cancel := context.WithTimeout(ctx, time.Second)
		defer cancel()
		held, err = c.Lock("sentinel-after").Lock(lctx)
		return err == nil
	})
	if out, err := cmd("inspect", "sentinel-after"); err != nil || !holderRE(c, "sentinel-after").MatchString(out) {
		t.Errorf("inspect through the sentinels after a failover: %v\n%s", err, out)
	}
	if err := c.Lock("sentinel-after").Unlock(held); err != nil {
		t.Fatal(err)
	}
}
