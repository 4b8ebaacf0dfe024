package main

import (
	"context"
	"io"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/relock-go/relock"
	"github.com/relock-go/relock/fairlock"
	"github.com/relock-go/relock/internal/redistest"
	"github.com/relock-go/relock/internal/redistest/relocktest"
)

// answering runs "relock unlock --force NAME" in process against addr, and returns its
// result once the test has called answer with what the operator types: answer waits for
// the question first, then runs meanwhile (what happens while the operator reads the
// view), then types the answer.
func answering(t *testing.T, addr, name string) (answer func(meanwhile func(), typed string) (string, error)) {
	t.Helper()
	in, typing := io.Pipe()
	var out syncBuffer
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, []string{"unlock", "--force", "--redis", addr, name}, func(string) string { return "" }, in, &out, &out)
	}()
	t.Cleanup(func() { cancel(); typing.Close() })
	return func(meanwhile func(), typed string) (string, error) {
		t.Helper()
		redistest.Eventually(t, 30*time.Second, "the confirmation question", func() bool { return strings.Contains(out.String(), "[y/N]") })
		meanwhile()
		go func() { _, _ = io.WriteString(typing, typed) }()
		select {
		case err := <-done:
			return out.String(), err
		case <-time.After(30 * time.Second):
			t.Fatalf("relock unlock --force %s: not done 30s after the answer\n%s", name, out.String())
			return "", nil
		}
	}
}

// An operator agrees to take a lock from the holders the view showed, not from whoever
// holds it by the time they answer: if an owner not shown holds it then, nothing is
// changed; if it was released, there is nothing to do; if only owners shown hold it (a
// re-entry meanwhile changes only a count, and a reader may have left), it is
// force-unlocked.
func TestForceUnlockConfirmsTheHoldersShown(t *testing.T) {
	redistest.Real(t, func(t *testing.T, b *redistest.Backend) {
		c := relocktest.New(t, b)
		ctx := redistest.Context(t, 2*time.Minute)

		t.Run("changed hands", func(t *testing.T) {
			l := c.Lock("handed")
			a, err := l.Lock(relock.NewOwner(ctx))
			if err != nil {
				t.Fatal(err)
			}
			var bctx context.Context
			out, err := answering(t, b.Addr, "handed")(func() {
				if err := l.Unlock(a); err != nil {
					t.Fatal(err)
				}
				if bctx, err = l.Lock(relock.NewOwner(ctx)); err != nil {
					t.Fatal(err)
				}
			}, "y\n")
			if err == nil || !strings.Contains(err.Error(), "changed") || !strings.Contains(err.Error(), "nothing was changed") {
				t.Errorf("the answer after the lock changed hands: %v; want an error saying its holders changed and nothing was\n%s", err, out)
			}
			if bctx.Err() != nil {
				t.Fatalf("the new holder's context ended: %v", context.Cause(bctx))
			}
			if err := l.Unlock(bctx); err != nil {
				t.Errorf("the new holder's unlock: %v; want its hold kept", err)
			}
		})

		t.Run("released", func(t *testing.T) {
			l := c.Lock("released")
			a, err := l.Lock(relock.NewOwner(ctx))
			if err != nil {
				t.Fatal(err)
			}
			out, err := answering(t, b.Addr, "released")(func() {
				if err := l.Unlock(a); err != nil {
					t.Fatal(err)
				}
			}, "y\n")
			if err != nil || !strings.Contains(out, "released meanwhile; nothing to do") {
				t.Errorf("the answer after the lock was released: %v; want status 0 and nothing to do\n%s", err, out)
			}
		})

		t.Run("same holder", func(t *testing.T) {
			l := c.Lock("same")
			a, err := l.Lock(relock.NewOwner(ctx))
			if err != nil {
				t.Fatal(err)
			}
			out, err := answering(t, b.Addr, "same")(func() {
				if _, err := l.Lock(a); err != nil { // a re-entry: holds 2
					t.Fatal(err)
				}
			}, "y\n")
			if err != nil || !strings.Contains(out, "force-unlocked") {
				t.Errorf("the answer with the same holder: %v; want the lock force-unlocked\n%s", err, out)
			}
			if locked, err := l.IsLocked(ctx); err != nil || locked {
				t.Errorf("after the force unlock: locked %v (%v); want free", locked, err)
			}
		})

		// The operator agreed to free a lock, not whatever the key holds by the answer: a
		// key that became a count (a semaphore's or a latch's) or other data is refused as
		// the first look refuses it, unchanged.
		t.Run("other data", func(t *testing.T) {
			rc := b.Client(t)
			for name, data := range map[string][]string{"became-count": {"SET", "became-count", "7"}, "became-hash": {"HSET", "became-hash", "name", "alice"}} {
				l := c.Lock(name)
				a, err := l.Lock(relock.NewOwner(ctx))
				if err != nil {
					t.Fatal(err)
				}
				var before string
				out, err := answering(t, b.Addr, name)(func() {
					if err := l.Unlock(a); err != nil {
						t.Fatal(err)
					}
					redistest.MustDo(t, rc, data...)
					before = redistest.Snapshot(t, rc, name)
				}, "y\n")
				if err == nil || !strings.Contains(err.Error(), name+" is not a lock") || !strings.Contains(err.Error(), "nothing was changed") {
					t.Errorf("the answer after %s became other data: %v; want it refused as not a lock, nothing changed\n%s", name, err, out)
				}
				if after := redistest.Snapshot(t, rc, name); after != before {
					t.Errorf("unlock --force changed %s:\nbefore %s\nafter  %s", name, before, after)
				}
			}
		})

		// A fair lock's hash with nobody queued reads as a plain lock's; a waiter that
		// queues while the operator reads makes it a fair lock's, and the force unlock
		// then releases it as one, waking that waiter on its own channel. Guards against
		// a force unlock that goes by the kind the first look saw, whose plain release no
		// fair waiter hears.
		t.Run("fair waiter queued meanwhile", func(t *testing.T) {
			waiting := relocktest.New(t, b)
			if _, err := c.FairLock("queued").Lock(relock.NewOwner(ctx)); err != nil {
				t.Fatal(err)
			}
			// A refresh period beyond the test: only a message wakes the waiter in time.
			fl := waiting.FairLock("queued", fairlock.WithRefreshPeriod(time.Minute))
			var done <-chan error
			out, err := answering(t, b.Addr, "queued")(func() {
				done = async(func() error {
					wctx, cancel := context.WithTimeout(relock.NewOwner(ctx), 30*time.Second)
					defer cancel()
					h, err := fl.Lock(wctx)
					if err != nil {
						return err
					}
					return fl.Unlock(h)
				})
				redistest.Eventually(t, 20*time.Second, "the fair waiter is not queued", func() bool {
					return waiting.PubSubStats().Waiting == 1 && len(redistest.FairQueue(t, b.Client(t), "queued")) == 1
				})
			}, "y\n")
			if err != nil || !strings.Contains(out, "force-unlocked") {
				t.Fatalf("the answer after a fair waiter queued: %v; want the lock force-unlocked\n%s", err, out)
			}
			if err := redistest.Recv(t, done, 25*time.Second, "the fair waiter after the force unlock"); err != nil {
				t.Fatal(err)
			}
			if st := waiting.PubSubStats(); st.TimedOut != 0 || st.Woken != 1 {
				t.Errorf("the fair waiter's hub %+v; want it woken by the force unlock's message, not by a time bound", st)
			}
		})

		t.Run("readers", func(t *testing.T) {
			rw := c.RWLock("readers")
			a, err := rw.RLock(relock.NewOwner(ctx))
			if err != nil {
				t.Fatal(err)
			}
			b1, err := rw.RLock(relock.NewOwner(ctx))
			if err != nil {
				t.Fatal(err)
			}
			var joined context.Context
			out, err := answering(t, b.Addr, "readers")(func() {
				if joined, err = rw.RLock(relock.NewOwner(ctx)); err != nil {
					t.Fatal(err)
				}
			}, "y\n")
			if err == nil || !strings.Contains(err.Error(), "changed") {
				t.Errorf("the answer after a third reader joined: %v; want nothing changed\n%s", err, out)
			}
			for _, h := range []context.Context{a, b1, joined} {
				if h.Err() != nil {
					t.Fatalf("a reader's context ended: %v", context.Cause(h))
				}
			}
			if err := rw.RUnlock(joined); err != nil {
				t.Fatal(err)
			}

			out, err = answering(t, b.Addr, "readers")(func() {
				if err := rw.RUnlock(b1); err != nil {
					t.Fatal(err)
				}
			}, "y\n")
			if err != nil || !strings.Contains(out, "force-unlocked") {
				t.Errorf("the answer after one of the two readers shown left: %v; want the lock force-unlocked\n%s", err, out)
			}
			if locked, err := rw.IsLocked(ctx); err != nil || locked {
				t.Errorf("after the force unlock: locked %v (%v); want free", locked, err)
			}
		})
	})
}

// A force unlock waiting at its question ends when the command's context does (Ctrl-C or
// SIGTERM, which main turns into status 130 or 143), without an answer, and changes
// nothing. Guards against a question that kept the command running until a line was typed,
// so that a supervisor's SIGTERM alone never ended it.
func TestForceUnlockQuestionEndsWithTheCommand(t *testing.T) {
	redistest.Real(t, func(t *testing.T, b *redistest.Backend) {
		c := relocktest.New(t, b)
		l := c.Lock("asked")
		held, err := l.Lock(redistest.Context(t, time.Minute))
		if err != nil {
			t.Fatal(err)
		}
		in, typing := io.Pipe()
		defer typing.Close()
		var out syncBuffer
		ctx, interrupt := context.WithCancelCause(context.Background())
		defer interrupt(nil)
		done := make(chan error, 1)
		go func() {
			done <- run(ctx, []string{"unlock", "--force", "--redis", b.Addr, "asked"}, func(string) string { return "" }, in, &out, &out)
		}()
		redistest.Eventually(t, 30*time.Second, "the confirmation question", func() bool { return strings.Contains(out.String(), "[y/N]") })
		interrupt(signalled{os.Interrupt})
		err = redistest.Recv(t, done, 5*time.Second, "relock unlock --force after its context ended at the question")
		if err == nil || strings.Contains(out.String(), "force-unlocked") {
			t.Errorf("unlock --force ended at its question: %v; want an error and nothing unlocked\n%s", err, out.String())
		}
		if held.Err() != nil {
			t.Errorf("the holder's context ended: %v", context.Cause(held))
		}
		if err := l.Unlock(held); err != nil {
			t.Errorf("the holder's unlock: %v; want its hold kept", err)
		}
	})
}

// The question reads [y/N]: only a yes forces the lock open. Enter alone (the default the
// capital N names), the end of the input (Ctrl-D) and any other word decline, with status
// 1, and the holder keeps its hold. Guards against a question that takes whatever is not a
// no for a yes.
func TestForceUnlockDefaultsToNo(t *testing.T) {
	redistest.Real(t, func(t *testing.T, b *redistest.Backend) {
		c := relocktest.New(t, b)
		ctx := redistest.Context(t, time.Minute)
		l := c.Lock("asked")
		h, err := l.Lock(relock.NewOwner(ctx))
		if err != nil {
			t.Fatal(err)
		}
		for _, typed := range []string{"\n", "", "maybe\n", "yep\n"} {
			out, err := relockCmd(t, b.Addr, typed, "unlock", "--force", "asked")
			if err == nil || !strings.Contains(err.Error(), "not unlocked: the confirmation was declined") || strings.Contains(out, "force-unlocked") {
				t.Errorf("unlock --force answered %q: %v; want it declined (status 1)\n%s", typed, err, out)
			}
			if locked, err := l.IsLocked(ctx); err != nil || !locked || h.Err() != nil {
				t.Fatalf("after the answer %q: locked %v (%v), the holder's context %v; want the hold kept", typed, locked, err, context.Cause(h))
			}
		}
		if err := l.Unlock(h); err != nil {
			t.Errorf("the holder's unlock: %v; want its hold kept", err)
		}
	})
}
