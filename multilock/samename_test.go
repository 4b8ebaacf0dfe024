package multilock_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/relock-go/relock"
	"github.com/relock-go/relock/internal/redistest"
	"github.com/relock-go/relock/internal/redistest/relocktest"
	"github.com/relock-go/relock/multilock"
)

// A MultiLock may name one lock more than once: the owner takes it once per member (the
// later members re-enter the first's hold), Unlock releases as many holds, and the lock is
// free after it. A member that the name's kind refuses (a plain lock and a read-write lock
// on one name) fails the call with ErrWrongType naming the name, and the members taken
// before it are released again.
func TestMultiLockNameTwice(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		c := relocktest.New(t, b)
		side := b.Client(t)
		ctx := redistest.Context(t, time.Minute)
		rw := c.RWLock("twice:rw")
		for _, tc := range []struct {
			name    string
			members []multilock.Member
			count   func(held context.Context) (int, error)
		}{
			{"one mutex twice", []multilock.Member{relock.Member(c.Lock("twice:plain")), relock.Member(c.Lock("twice:plain"))},
				func(held context.Context) (int, error) { return c.Lock("twice:plain").HoldCount(held) }},
			{"a mutex and a spin lock of one name", []multilock.Member{relock.Member(c.SpinLock("twice:spin")), relock.Member(c.Lock("twice:spin"))},
				func(held context.Context) (int, error) { return c.Lock("twice:spin").HoldCount(held) }},
			{"one fair lock twice", []multilock.Member{relock.Member(c.FairLock("twice:fair")), relock.Member(c.FairLock("twice:fair"))},
				func(held context.Context) (int, error) { return c.FairLock("twice:fair").HoldCount(held) }},
			{"the write side twice", []multilock.Member{relock.WriteMember(rw), relock.WriteMember(rw)},
				func(held context.Context) (int, error) { return rw.HoldCount(held) }},
			{"the read side twice", []multilock.Member{relock.ReadMember(rw), relock.ReadMember(rw)},
				func(held context.Context) (int, error) { return rw.RHoldCount(held) }},
		} {
			t.Run(tc.name, func(t *testing.T) {
				name := tc.members[0].L.Name()
				ml := c.MultiLock(tc.members...)
				held, err := ml.Lock(relock.NewOwner(ctx))
				if err != nil {
					t.Fatal(err)
				}
				if n, err := tc.count(held); n != 2 || err != nil {
					t.Fatalf("hold count %d, %v; want 2, one per member", n, err)
				}
				// Another owner is kept out (a writer, where the members read).
				other := c.MultiLock(relock.Member(c.Lock(name)))
				if tc.members[0].L.Name() == "twice:rw" {
					other = c.MultiLock(relock.WriteMember(rw))
				}
				if _, err := other.TryLock(relock.NewOwner(ctx)); !errors.Is(err, relock.ErrLocked) {
					t.Fatalf("another owner's TryLock: %v; want ErrLocked", err)
				}
				if err := ml.Unlock(held); err != nil {
					t.Fatalf("Unlock: %v", err)
				}
				if n, err := redistest.Do(t, side, "EXISTS", name).AsInt64(); n != 0 || err != nil {
					t.Fatalf("EXISTS %s after Unlock = %d, %v; want 0", name, n, err)
				}
				if held.Err() == nil {
					t.Fatal("the hold's context is live after Unlock")
				}
			})
		}
		t.Run("a mutex and a read-write lock of one name", func(t *testing.T) {
			ml := c.MultiLock(relock.Member(c.Lock("twice:a")), relock.WriteMember(c.RWLock("twice:b")), relock.Member(c.Lock("twice:b")))
			owner := relock.NewOwner(ctx)
			_, err := ml.Lock(owner)
			var le *relock.Error
			if !errors.Is(err, relock.ErrWrongType) || !errors.As(err, &le) || le.Name != "twice:b" {
				t.Fatalf("Lock = %v; want ErrWrongType naming twice:b", err)
			}
			for _, name := range []string{"twice:a", "twice:b"} {
				if n, err := redistest.Do(t, side, "EXISTS", name).AsInt64(); n != 0 || err != nil {
					t.Fatalf("EXISTS %s after the refused Lock = %d, %v; want 0: no member left held", name, n, err)
				}
			}
			if st := c.WatchdogStats(); st.Holds != 0 {
				t.Fatalf("the watchdog knows %d holds after the refused Lock; want none", st.Holds)
			}
		})
	})
}
