package relock_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/relock-go/relock"
	"github.com/relock-go/relock/fairlock"
	"github.com/relock-go/relock/internal/redistest"
	"github.com/relock-go/relock/internal/redistest/relocktest"
	"github.com/relock-go/relock/rlock"
	"github.com/relock-go/relock/rwlock"
)

// badEnv is what a bad-input case runs with: one backend, a relock client on it, a side
// client to look at the data, a context carrying an owner of the client, so that Unlock
// and HoldCount reach Redis, and a context that bounds the case's waits.
type badEnv struct {
	b     *redistest.Backend
	c     *relock.Client
	side  rueidis.Client
	owned context.Context
	ctx   context.Context
	key   string // a key of the case's own
}

type badCase struct {
	name string
	real bool // needs a real redis-server
	run  func(t *testing.T, e *badEnv)
}

// TestBadInput feeds every lock kind input it must refuse: each case checks the error it
// documents, that nothing panics, and that data that is not the lock's stays as it was.
// docs/reliability.md lists the cases.
func TestBadInput(t *testing.T) {
	t.Parallel()
	cases := append(badInputCases(), auxKeyCases()...)
	redistest.EachWithCluster(t, func(t *testing.T, b *redistest.Backend) {
		side := b.Client(t)
		c, err := relock.New(b.Client(t))
		if err != nil {
			t.Fatalf("relock.New: %v", err)
		}
		t.Cleanup(func() { c.Close() })
		// Held through every case: its wait is bounded, its hold is not.
		owned, err := c.Lock("bad:anchor").Lock(context.Background(), rlock.WithWaitTimeout(30*time.Second))
		if err != nil {
			t.Fatalf("anchor lock: %v", err)
		}
		t.Cleanup(func() { c.Lock("bad:anchor").Unlock(owned) })
		for i, tc := range cases {
			if tc.real && b.Server == nil {
				continue // a case that changes one server's settings or state
			}
			t.Run(tc.name, func(t *testing.T) {
				// A refusal takes a round trip, and the slowest case (the server down) under
				// 2 s: a bound of 10 s has room on a loaded machine, and a call that waits
				// where it should refuse fails the case in 10 s, not the whole run in many
				// times 30.
				ctx := redistest.Context(t, 10*time.Second)
				tc.run(t, &badEnv{b: b, c: c, side: side, owned: owned, ctx: ctx, key: fmt.Sprintf("bad:%d", i)})
			})
		}
	})
}

// wantErr checks that err is target (nil: any error), wrapped as *relock.Error naming the
// lock name.
func wantErr(t *testing.T, err, target error, name string) {
	t.Helper()
	if err == nil {
		t.Fatalf("err = nil; want %v", target)
	}
	if target != nil && !errors.Is(err, target) {
		t.Fatalf("err = %v; want errors.Is %v", err, target)
	}
	var le *relock.Error
	if !errors.As(err, &le) || le.Name != name {
		t.Fatalf("err = %v (%T); want a *relock.Error naming %q", err, err, name)
	}
}

// lockOp is one call of a lock's API, made on the lock named name.
type lockOp struct {
	name string
	call func(e *badEnv, name string) error
}

func keep[T any](_ T, err error) error { return err }

// noop is a critical section that does nothing.
func noop(context.Context) error { return nil }

var rlockOps = []lockOp{
	{"Lock", func(e *badEnv, n string) error { return keep(e.c.Lock(n).Lock(e.ctx)) }},
	{"TryLock", func(e *badEnv, n string) error { return keep(e.c.Lock(n).TryLock(context.Background())) }},
	{"Unlock", func(e *badEnv, n string) error { return e.c.Lock(n).Unlock(e.owned) }},
	{"ForceUnlock", func(e *badEnv, n string) error { return keep(e.c.Lock(n).ForceUnlock(context.Background())) }},
	{"HoldCount", func(e *badEnv, n string) error { return keep(e.c.Lock(n).HoldCount(e.owned)) }},
	{"IsLocked", func(e *badEnv, n string) error { return keep(e.c.Lock(n).IsLocked(context.Background())) }},
	{"IsHeld", func(e *badEnv, n string) error { return keep(e.c.Lock(n).IsHeld(e.owned)) }},
	{"TTL", func(e *badEnv, n string) error { return keep(e.c.Lock(n).TTL(e.owned)) }},
	{"Do", func(e *badEnv, n string) error { return e.c.Lock(n).Do(e.ctx, noop) }},
	{"Extend", func(e *badEnv, n string) error { return e.c.Lock(n).Extend(e.owned, time.Minute) }},
}

var spinOps = []lockOp{
	{"Lock", func(e *badEnv, n string) error { return keep(e.c.SpinLock(n).Lock(e.ctx)) }},
	{"TryLock", func(e *badEnv, n string) error { return keep(e.c.SpinLock(n).TryLock(context.Background())) }},
	{"Unlock", func(e *badEnv, n string) error { return e.c.SpinLock(n).Unlock(e.owned) }},
	{"ForceUnlock", func(e *badEnv, n string) error { return keep(e.c.SpinLock(n).ForceUnlock(context.Background())) }},
	{"HoldCount", func(e *badEnv, n string) error { return keep(e.c.SpinLock(n).HoldCount(e.owned)) }},
	{"IsLocked", func(e *badEnv, n string) error { return keep(e.c.SpinLock(n).IsLocked(context.Background())) }},
	{"IsHeld", func(e *badEnv, n string) error { return keep(e.c.SpinLock(n).IsHeld(e.owned)) }},
	{"TTL", func(e *badEnv, n string) error { return keep(e.c.SpinLock(n).TTL(e.owned)) }},
	{"Do", func(e *badEnv, n string) error { return e.c.SpinLock(n).Do(e.ctx, noop) }},
	{"Extend", func(e *badEnv, n string) error { return e.c.SpinLock(n).Extend(e.owned, time.Minute) }},
}

var fairOps = []lockOp{
	{"Lock", func(e *badEnv, n string) error { return keep(e.c.FairLock(n).Lock(e.ctx)) }},
	{"TryLock", func(e *badEnv, n string) error { return keep(e.c.FairLock(n).TryLock(context.Background())) }},
	{"Unlock", func(e *badEnv, n string) error { return e.c.FairLock(n).Unlock(e.owned) }},
	{"ForceUnlock", func(e *badEnv, n string) error { return keep(e.c.FairLock(n).ForceUnlock(context.Background())) }},
	{"HoldCount", func(e *badEnv, n string) error { return keep(e.c.FairLock(n).HoldCount(e.owned)) }},
	{"IsLocked", func(e *badEnv, n string) error { return keep(e.c.FairLock(n).IsLocked(context.Background())) }},
	{"IsHeld", func(e *badEnv, n string) error { return keep(e.c.FairLock(n).IsHeld(e.owned)) }},
	{"TTL", func(e *badEnv, n string) error { return keep(e.c.FairLock(n).TTL(e.owned)) }},
	{"Do", func(e *badEnv, n string) error { return e.c.FairLock(n).Do(e.ctx, noop) }},
	{"Extend", func(e *badEnv, n string) error { return e.c.FairLock(n).Extend(e.owned, time.Minute) }},
}

var rwOps = []lockOp{
	{"RLock", func(e *badEnv, n string) error { return keep(e.c.RWLock(n).RLock(e.ctx)) }},
	{"TryRLock", func(e *badEnv, n string) error { return keep(e.c.RWLock(n).TryRLock(context.Background())) }},
	{"Lock", func(e *badEnv, n string) error { return keep(e.c.RWLock(n).Lock(e.ctx)) }},
	{"TryLock", func(e *badEnv, n string) error { return keep(e.c.RWLock(n).TryLock(context.Background())) }},
	{"RUnlock", func(e *badEnv, n string) error { return e.c.RWLock(n).RUnlock(e.owned) }},
	{"Unlock", func(e *badEnv, n string) error { return e.c.RWLock(n).Unlock(e.owned) }},
	{"ForceUnlock", func(e *badEnv, n string) error { return keep(e.c.RWLock(n).ForceUnlock(context.Background())) }},
	{"RHoldCount", func(e *badEnv, n string) error { return keep(e.c.RWLock(n).RHoldCount(e.owned)) }},
	{"HoldCount", func(e *badEnv, n string) error { return keep(e.c.RWLock(n).HoldCount(e.owned)) }},
	{"IsLocked", func(e *badEnv, n string) error { return keep(e.c.RWLock(n).IsLocked(context.Background())) }},
	{"IsHeld", func(e *badEnv, n string) error { return keep(e.c.RWLock(n).IsHeld(e.owned)) }},
	{"TTL", func(e *badEnv, n string) error { return keep(e.c.RWLock(n).TTL(e.owned)) }},
	{"RDo", func(e *badEnv, n string) error { return e.c.RWLock(n).RDo(e.ctx, noop) }},
	{"Do", func(e *badEnv, n string) error { return e.c.RWLock(n).Do(e.ctx, noop) }},
	{"Extend", func(e *badEnv, n string) error { return e.c.RWLock(n).Extend(e.owned, time.Minute) }},
	{"RExtend", func(e *badEnv, n string) error { return e.c.RWLock(n).RExtend(e.owned, time.Minute) }},
}

// exclusiveOps are kindOps but for the read-write lock's: the kinds of one hash layout.
func exclusiveOps() []kindOp {
	var ops []kindOp
	for _, k := range kindOps {
		if k.kind != "rwlock" {
			ops = append(ops, k)
		}
	}
	return ops
}

type kindOp struct {
	kind string
	ops  []lockOp
}

var kindOps = []kindOp{{"rlock", rlockOps}, {"fairlock", fairOps}, {"rwlock", rwOps}, {"spinlock", spinOps}}

// foreign is data of another type, written to key.
var foreign = []struct {
	typ   string
	write []string // the command that writes it, with an empty second word for the key
}{
	{"string", []string{"SET", "", "v"}},
	{"list", []string{"RPUSH", "", "a", "b"}},
	{"set", []string{"SADD", "", "a", "b"}},
	{"zset", []string{"ZADD", "", "1", "a", "2", "b"}},
	{"stream", []string{"XADD", "", "1-1", "f", "v"}},
}

func writeForeign(t *testing.T, rc rueidis.Client, cmd []string, key string) {
	t.Helper()
	args := append([]string(nil), cmd...)
	args[1] = key
	redistest.MustDo(t, rc, args...)
}

// appHashes are hashes an application may keep under a lock's name; none is a lock.
var appHashes = []struct {
	what   string
	fields []string
}{
	{"application", []string{"name", "alice", "email", "a@x"}},
	{"zero count", []string{"5df8512c-e096-4359-bc82-07efb0bc9d8e:7", "0"}},
	{"word count", []string{"5df8512c-e096-4359-bc82-07efb0bc9d8e:7", "seven"}},
	{"mode with data", []string{"mode", "read", "name", "alice"}},
	{"read mode alone", []string{"mode", "read"}}, // no lock leaves it: the last release deletes the hash
	{"write mode alone", []string{"mode", "write"}},
	{"other mode", []string{"mode", "fast", "5df8512c-e096-4359-bc82-07efb0bc9d8e:7", "1"}},
	{"writer without mode", []string{"5df8512c-e096-4359-bc82-07efb0bc9d8e:7:write", "1"}},
	{"short id", []string{"0d2c8f0e:1", "1"}},
	{"prefixed id", []string{"x5df8512c-e096-4359-bc82-07efb0bc9d8e:7", "1"}},
	{"suffixed id", []string{"5df8512c-e096-4359-bc82-07efb0bc9d8e:7:x", "1"}},
	{"suffixed writer", []string{"mode", "write", "5df8512c-e096-4359-bc82-07efb0bc9d8e:7:writer", "1"}},
}

// ownerOf returns the owner that held carries on e's client: the field its holds count in.
func ownerOf(t *testing.T, e *badEnv, held context.Context) string {
	t.Helper()
	fields, err := redistest.Do(t, e.side, "HKEYS", e.key).AsStrSlice()
	if err != nil {
		t.Fatal(err)
	}
	prefix := e.c.ID() + ":"
	for _, f := range fields {
		if strings.HasPrefix(f, prefix) && !strings.HasSuffix(f, ":write") {
			return f
		}
	}
	t.Fatalf("no field of client %s in %v", e.c.ID(), fields)
	return ""
}

func badInputCases() []badCase {
	var cases []badCase
	add := func(name string, run func(t *testing.T, e *badEnv)) {
		cases = append(cases, badCase{name: name, run: run})
	}
	addReal := func(name string, run func(t *testing.T, e *badEnv)) {
		cases = append(cases, badCase{name: name, real: true, run: run})
	}
	ctx := context.Background()

	// Names whose keys would not share a slot, or no name at all, and names whose keys
	// would be another lock's: every kind, every call. The error says why.
	for _, c := range []struct{ name, reason string }{
		{"", "empty name"},
		{"a{}b", "empty hash tag '{}' at 1"},
		{"a{b", "unbalanced brace: '{' at 1 has no '}'"},
		{"a}b", "'}' at 1 without a '{'"},
		{"{x}", `keys would be those of the lock "x"`},
		{"redisson_lock_queue:{x}", `starts with "redisson_lock_queue:"`},
		{"redisson_lock__channel:{x}", `starts with "redisson_lock__channel:"`},
		{"relock_rwlock_writers:{x}", `starts with "relock_rwlock_writers:"`},
		{"{x}:" + javaOwner + ":rwlock_timeout:1", `":rwlock_timeout:"`},
		{"{x}:" + javaOwner, "ends in an owner id"},
	} {
		for _, k := range kindOps {
			for _, op := range k.ops {
				add(fmt.Sprintf("name %q/%s %s", c.name, k.kind, op.name), func(t *testing.T, e *badEnv) {
					err := op.call(e, c.name)
					wantErr(t, err, relock.ErrInvalidName, c.name)
					if !strings.Contains(err.Error(), c.reason) {
						t.Fatalf("err = %v; want it to say why: %q", err, c.reason)
					}
				})
			}
		}
	}

	// "x" and "{x}" would name the same queue, deadlines, fencing counter, channels and
	// read holds' timeout keys: with an owner in read holds of x, every call on "{x}" is
	// refused and leaves x's keys alone (it used to share and delete x's timeout key, and
	// a fair waiter on x blocked a free "{x}").
	for _, k := range kindOps {
		for _, op := range k.ops {
			add("name {key} beside key/"+k.kind+" "+op.name, func(t *testing.T, e *badEnv) {
				mu := e.c.RWLock(e.key)
				held, err := mu.RLock(e.owned)
				if err != nil {
					t.Fatal(err)
				}
				defer mu.RUnlock(held)
				timeout := "{" + e.key + "}:" + ownerOf(t, e, held) + ":rwlock_timeout:1"
				redistest.Unchanged(t, e.side, e.key, func() {
					redistest.Unchanged(t, e.side, timeout, func() {
						wantErr(t, op.call(e, "{"+e.key+"}"), relock.ErrInvalidName, "{"+e.key+"}")
					})
				})
			})
		}
	}

	// Leases under a millisecond, per call and as the lock's default.
	for _, d := range []time.Duration{0, -time.Second, time.Microsecond, 999 * time.Microsecond} {
		add(fmt.Sprintf("lease %v/rlock", d), func(t *testing.T, e *badEnv) {
			redistest.Unchanged(t, e.side, e.key, func() {
				wantErr(t, keep(e.c.Lock(e.key).Lock(e.ctx, rlock.WithLease(d))), relock.ErrInvalidLease, e.key)
				wantErr(t, keep(e.c.Lock(e.key, rlock.WithLease(d)).TryLock(ctx)), relock.ErrInvalidLease, e.key)
			})
		})
		add(fmt.Sprintf("lease %v/fairlock", d), func(t *testing.T, e *badEnv) {
			redistest.Unchanged(t, e.side, e.key, func() {
				wantErr(t, keep(e.c.FairLock(e.key).Lock(e.ctx, rlock.WithLease(d))), relock.ErrInvalidLease, e.key)
				wantErr(t, keep(e.c.FairLock(e.key, rlock.WithLease(d)).TryLock(ctx)), relock.ErrInvalidLease, e.key)
			})
		})
		add(fmt.Sprintf("lease %v/rwlock", d), func(t *testing.T, e *badEnv) {
			redistest.Unchanged(t, e.side, e.key, func() {
				wantErr(t, keep(e.c.RWLock(e.key).RLock(e.ctx, rlock.WithLease(d))), relock.ErrInvalidLease, e.key)
				wantErr(t, keep(e.c.RWLock(e.key, rlock.WithLease(d)).Lock(e.ctx)), relock.ErrInvalidLease, e.key)
			})
		})
	}

	// Refresh periods under 10ms.
	for _, d := range []time.Duration{0, -time.Second, 9 * time.Millisecond} {
		add(fmt.Sprintf("refresh %v/fairlock", d), func(t *testing.T, e *badEnv) {
			redistest.Unchanged(t, e.side, e.key, func() {
				wantErr(t, keep(e.c.FairLock(e.key).Lock(e.ctx, fairlock.WithRefreshPeriod(d))), relock.ErrInvalidOption, e.key)
				wantErr(t, keep(e.c.FairLock(e.key, fairlock.WithRefreshPeriod(d)).TryLock(ctx)), relock.ErrInvalidOption, e.key)
			})
		})
		add(fmt.Sprintf("refresh %v/rwlock", d), func(t *testing.T, e *badEnv) {
			redistest.Unchanged(t, e.side, e.key, func() {
				wantErr(t, keep(e.c.RWLock(e.key, rwlock.WithWriterPreference()).Lock(e.ctx, rwlock.WithRefreshPeriod(d))), relock.ErrInvalidOption, e.key)
			})
		})
	}

	// A nil option is ignored, by the client and by every kind (a semaphore lease's too).
	add("nil option", func(t *testing.T, e *badEnv) {
		c, err := relock.New(e.b.Client(t), nil)
		if err != nil {
			t.Fatalf("relock.New(rc, nil) = %v", err)
		}
		defer c.Close()
		held, err := c.Lock(e.key, nil).Lock(e.ctx, nil)
		if err != nil {
			t.Fatalf("rlock with nil options: %v", err)
		}
		if err := c.Lock(e.key).Unlock(held); err != nil {
			t.Fatal(err)
		}
		if held, err = c.FairLock(e.key, nil).Lock(e.ctx, nil); err != nil {
			t.Fatalf("fairlock with nil options: %v", err)
		}
		if err := c.FairLock(e.key).Unlock(held); err != nil {
			t.Fatal(err)
		}
		if held, err = c.RWLock(e.key, nil).RLock(e.ctx, nil); err != nil {
			t.Fatalf("rwlock with nil options: %v", err)
		}
		if err := c.RWLock(e.key).RUnlock(held); err != nil {
			t.Fatal(err)
		}
		s := c.Semaphore(e.key + ":sem")
		if err := s.AddPermits(e.ctx, 1); err != nil {
			t.Fatal(err)
		}
		if held, err = s.AcquireLease(e.ctx, 1, nil); err != nil {
			t.Fatalf("semaphore lease with a nil option: %v", err)
		}
		if err := s.ReleaseLease(held); err != nil {
			t.Fatal(err)
		}
	})

	// Data of another type: every call of every kind is refused and leaves it alone.
	for _, f := range foreign {
		for _, k := range kindOps {
			for _, op := range k.ops {
				add(fmt.Sprintf("%s key/%s %s", f.typ, k.kind, op.name), func(t *testing.T, e *badEnv) {
					writeForeign(t, e.side, f.write, e.key)
					redistest.Unchanged(t, e.side, e.key, func() {
						wantErr(t, op.call(e, e.key), relock.ErrWrongType, e.key)
					})
				})
			}
		}
	}

	// A hash of the other lock family: acquisitions, ForceUnlock and the state queries are
	// refused and leave it alone.
	rlockHash := func(t *testing.T, e *badEnv) {
		redistest.MustDo(t, e.side, "HSET", e.key, javaOwner, "1")
		redistest.MustDo(t, e.side, "PEXPIRE", e.key, "30000")
	}
	rwHash := func(t *testing.T, e *badEnv) {
		redistest.MustDo(t, e.side, "HSET", e.key, "mode", "read", javaOwner, "1")
		redistest.MustDo(t, e.side, "PEXPIRE", e.key, "30000")
	}
	for _, op := range rwOps {
		if strings.HasSuffix(op.name, "Unlock") && op.name != "ForceUnlock" {
			continue
		}
		add("rlock hash/rwlock "+op.name, func(t *testing.T, e *badEnv) {
			rlockHash(t, e)
			redistest.Unchanged(t, e.side, e.key, func() { wantErr(t, op.call(e, e.key), relock.ErrWrongType, e.key) })
		})
	}
	for _, k := range exclusiveOps() {
		for _, op := range k.ops {
			if op.name == "Unlock" {
				continue
			}
			add("rwlock hash/"+k.kind+" "+op.name, func(t *testing.T, e *badEnv) {
				rwHash(t, e)
				redistest.Unchanged(t, e.side, e.key, func() { wantErr(t, op.call(e, e.key), relock.ErrWrongType, e.key) })
			})
		}
	}

	// The owner's own hold of one lock family does not make the key a lock of the other: the
	// other family's state queries by that owner are refused too, and leave the hold alone.
	queries := map[string]bool{"RHoldCount": true, "HoldCount": true, "IsLocked": true, "IsHeld": true, "TTL": true}
	for _, op := range rwOps {
		if !queries[op.name] {
			continue
		}
		add("own rlock hold/rwlock "+op.name, func(t *testing.T, e *badEnv) {
			mu := e.c.Lock(e.key)
			held, err := mu.Lock(e.owned)
			if err != nil {
				t.Fatal(err)
			}
			defer mu.Unlock(held)
			redistest.Unchanged(t, e.side, e.key, func() { wantErr(t, op.call(e, e.key), relock.ErrWrongType, e.key) })
		})
	}
	for _, k := range exclusiveOps() {
		for _, op := range k.ops {
			if !queries[op.name] {
				continue
			}
			add("own read hold/"+k.kind+" "+op.name, func(t *testing.T, e *badEnv) {
				mu := e.c.RWLock(e.key)
				held, err := mu.RLock(e.owned)
				if err != nil {
					t.Fatal(err)
				}
				defer mu.RUnlock(held)
				redistest.Unchanged(t, e.side, e.key, func() { wantErr(t, op.call(e, e.key), relock.ErrWrongType, e.key) })
			})
		}
	}

	// An application's hash is not a lock: every call of every kind is refused with
	// ErrWrongType (an unlock, which finds no hold of its owner, with ErrNotHeld) and
	// changes nothing. Lock used to wait until its context ended, and ForceUnlock deleted
	// the hash and returned true. Among these hashes some look like locks in part: the
	// shape is checked field by field.
	for _, h := range appHashes {
		for _, k := range kindOps {
			for _, op := range k.ops {
				want := relock.ErrWrongType
				if strings.HasSuffix(op.name, "Unlock") && op.name != "ForceUnlock" {
					want = relock.ErrNotHeld
				}
				add(fmt.Sprintf("%s hash/%s %s", h.what, k.kind, op.name), func(t *testing.T, e *badEnv) {
					redistest.MustDo(t, e.side, append([]string{"HSET", e.key}, h.fields...)...)
					redistest.Unchanged(t, e.side, e.key, func() { wantErr(t, op.call(e, e.key), want, e.key) })
				})
			}
		}
	}

	// Unlock by a context without an owner, and by an owner that does not hold the lock.
	for _, k := range kindOps {
		unlock := k.ops[2].call
		if k.kind == "rwlock" {
			unlock = rwOps[5].call
		}
		add("no owner/"+k.kind+" Unlock", func(t *testing.T, e *badEnv) {
			err := unlock(&badEnv{c: e.c, owned: ctx}, e.key)
			wantErr(t, err, relock.ErrNotHeld, e.key)
		})
	}
	add("no owner/rwlock RUnlock", func(t *testing.T, e *badEnv) {
		wantErr(t, e.c.RWLock(e.key).RUnlock(ctx), relock.ErrNotHeld, e.key)
	})
	add("other owner/rlock Unlock", func(t *testing.T, e *badEnv) {
		mu := e.c.Lock(e.key)
		held, err := mu.Lock(relock.NewOwner(e.ctx))
		if err != nil {
			t.Fatal(err)
		}
		defer mu.Unlock(held)
		redistest.Unchanged(t, e.side, e.key, func() { wantErr(t, mu.Unlock(e.owned), relock.ErrNotHeld, e.key) })
		if n, err := mu.HoldCount(held); n != 1 || err != nil {
			t.Fatalf("holder's HoldCount = %d, %v; want 1", n, err)
		}
	})
	add("other owner/fairlock Unlock", func(t *testing.T, e *badEnv) {
		mu := e.c.FairLock(e.key)
		held, err := mu.Lock(relock.NewOwner(e.ctx))
		if err != nil {
			t.Fatal(err)
		}
		defer mu.Unlock(held)
		redistest.Unchanged(t, e.side, e.key, func() { wantErr(t, mu.Unlock(e.owned), relock.ErrNotHeld, e.key) })
	})
	add("other owner/rwlock Unlock and RUnlock", func(t *testing.T, e *badEnv) {
		mu := e.c.RWLock(e.key)
		held, err := mu.Lock(relock.NewOwner(e.ctx))
		if err != nil {
			t.Fatal(err)
		}
		defer mu.Unlock(held)
		redistest.Unchanged(t, e.side, e.key, func() {
			wantErr(t, mu.Unlock(e.owned), relock.ErrNotHeld, e.key)
			wantErr(t, mu.RUnlock(e.owned), relock.ErrNotHeld, e.key)
		})
	})
	add("rwlock RUnlock by the writer without read hold", func(t *testing.T, e *badEnv) {
		mu := e.c.RWLock(e.key)
		held, err := mu.Lock(relock.NewOwner(e.ctx))
		if err != nil {
			t.Fatal(err)
		}
		defer mu.Unlock(held)
		redistest.Unchanged(t, e.side, e.key, func() { wantErr(t, mu.RUnlock(held), relock.ErrNotHeld, e.key) })
	})
	add("rwlock upgrade", func(t *testing.T, e *badEnv) {
		mu := e.c.RWLock(e.key)
		held, err := mu.RLock(relock.NewOwner(e.ctx))
		if err != nil {
			t.Fatal(err)
		}
		defer mu.RUnlock(held)
		redistest.Unchanged(t, e.side, e.key, func() {
			wantErr(t, keep(mu.Lock(held)), relock.ErrUpgrade, e.key)
			wantErr(t, keep(mu.TryLock(held)), relock.ErrUpgrade, e.key)
		})
	})

	// A lock held by another owner, asked for with a context that is already done.
	done, cancel := context.WithCancel(ctx)
	cancel()
	expired, cancel2 := context.WithDeadline(ctx, time.Now().Add(-time.Second))
	cancel2()
	for _, c := range []struct {
		what string
		ctx  context.Context
		err  error
	}{{"cancelled", done, context.Canceled}, {"expired", expired, context.DeadlineExceeded}} {
		add(c.what+" ctx/rlock Lock on a held lock", func(t *testing.T, e *badEnv) {
			held, err := e.c.Lock(e.key).Lock(relock.NewOwner(e.ctx))
			if err != nil {
				t.Fatal(err)
			}
			defer e.c.Lock(e.key).Unlock(held)
			redistest.Unchanged(t, e.side, e.key, func() { wantErr(t, keep(e.c.Lock(e.key).Lock(c.ctx)), c.err, e.key) })
		})
		add(c.what+" ctx/fairlock Lock on a held lock", func(t *testing.T, e *badEnv) {
			held, err := e.c.FairLock(e.key).Lock(relock.NewOwner(e.ctx))
			if err != nil {
				t.Fatal(err)
			}
			defer e.c.FairLock(e.key).Unlock(held)
			redistest.Unchanged(t, e.side, e.key, func() { wantErr(t, keep(e.c.FairLock(e.key).Lock(c.ctx)), c.err, e.key) })
			if n, err := redistest.Do(t, e.side, "EXISTS", "redisson_lock_queue:{"+e.key+"}").AsInt64(); err != nil || n != 0 {
				t.Fatalf("queue left behind: EXISTS = %d, %v", n, err)
			}
		})
		add(c.what+" ctx/rwlock RLock and Lock on a write-held lock", func(t *testing.T, e *badEnv) {
			mu := e.c.RWLock(e.key)
			held, err := mu.Lock(relock.NewOwner(e.ctx))
			if err != nil {
				t.Fatal(err)
			}
			defer mu.Unlock(held)
			redistest.Unchanged(t, e.side, e.key, func() {
				wantErr(t, keep(mu.RLock(c.ctx)), c.err, e.key)
				wantErr(t, keep(mu.Lock(c.ctx)), c.err, e.key)
			})
		})
	}

	// Every call after Close.
	for _, k := range kindOps {
		for _, op := range k.ops {
			add("closed/"+k.kind+" "+op.name, func(t *testing.T, e *badEnv) {
				c, err := relock.New(e.b.Client(t))
				if err != nil {
					t.Fatal(err)
				}
				c.Close()
				c.Close() // idempotent
				redistest.Unchanged(t, e.side, e.key, func() {
					wantErr(t, op.call(&badEnv{c: c, owned: e.owned, ctx: e.ctx}, e.key), relock.ErrClosed, e.key)
				})
			})
		}
	}

	// Client construction.
	add("New(nil)", func(t *testing.T, e *badEnv) {
		if c, err := relock.New(nil); err == nil || c != nil {
			t.Fatalf("New(nil) = %v, %v; want nil and an error", c, err)
		}
	})
	for _, c := range []struct {
		what string
		opt  relock.Option
		err  error
	}{
		{"WithWatchdogTimeout(0)", relock.WithWatchdogTimeout(0), relock.ErrInvalidLease},
		{"WithWatchdogTimeout(-1s)", relock.WithWatchdogTimeout(-time.Second), relock.ErrInvalidLease},
		{"WithWatchdogTimeout(999µs)", relock.WithWatchdogTimeout(999 * time.Microsecond), relock.ErrInvalidLease},
		{"WithTimeout(0)", relock.WithTimeout(0), relock.ErrInvalidOption},
		{"WithTimeout(-1)", relock.WithTimeout(-1), relock.ErrInvalidOption},
		{"WithSyncReplicas(0, 1s)", relock.WithSyncReplicas(0, time.Second), relock.ErrInvalidOption},
		{"WithSyncReplicas(1, 0)", relock.WithSyncReplicas(1, 0), relock.ErrInvalidOption},
		// WAIT takes whole milliseconds, and WAIT with 0 waits for ever: a timeout under a
		// millisecond cannot bound the wait as WithSyncReplicas promises ("at most timeout").
		{"WithSyncReplicas(1, 999µs)", relock.WithSyncReplicas(1, 999*time.Microsecond), relock.ErrInvalidOption},
	} {
		add("New "+c.what, func(t *testing.T, e *badEnv) {
			rc, err := relock.New(e.b.Client(t), c.opt)
			if err == nil || rc != nil {
				t.Fatalf("New = %v, %v; want nil and an error", rc, err)
			}
			if !errors.Is(err, c.err) {
				t.Fatalf("New: %v; want errors.Is %v", err, c.err)
			}
		})
	}

	// The longest durations the options take: a client made with them works (a timeout
	// added to the clock must not wrap around into the past and end every call at once).
	for _, c := range []struct {
		what string
		opt  relock.Option
	}{
		{"WithTimeout(MaxInt64)", relock.WithTimeout(math.MaxInt64)},
		{"WithWatchdogTimeout(MaxInt64)", relock.WithWatchdogTimeout(math.MaxInt64)},
	} {
		add("New "+c.what, func(t *testing.T, e *badEnv) {
			rc, err := relock.New(e.b.Client(t), c.opt)
			if err != nil {
				t.Fatalf("New: %v", err)
			}
			defer rc.Close()
			for _, op := range []struct {
				what string
				call func() error
			}{
				{"rlock", func() error { return rc.Lock(e.key).Do(e.ctx, noop) }},
				{"fairlock", func() error { return rc.FairLock(e.key+":f").Do(e.ctx, noop) }},
				{"rwlock", func() error { return rc.RWLock(e.key+":rw").RDo(e.ctx, noop) }},
				{"semaphore", func() error {
					if err := rc.Semaphore(e.key+":s").AddPermits(e.ctx, 1); err != nil {
						return err
					}
					if err := rc.Semaphore(e.key+":s").Acquire(e.ctx, 1); err != nil {
						return err
					}
					return rc.Semaphore(e.key+":s").Release(e.ctx, 1)
				}},
			} {
				if err := op.call(); err != nil {
					t.Fatalf("%s: %v", op.what, err)
				}
			}
		})
	}

	// The server goes away under a client: every kind fails within the client's timeout.
	addReal("redis down", func(t *testing.T, e *badEnv) {
		s := redistest.StartServer(t)
		rc := s.Client(t)
		c, err := relock.New(rc, relock.WithTimeout(300*time.Millisecond))
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		s.Kill(t)
		bound, cancel := context.WithTimeout(ctx, 2*time.Second)
		defer cancel()
		start := time.Now()
		wantErr(t, keep(c.Lock("down").Lock(bound)), nil, "down")
		wantErr(t, keep(c.Lock("down").TryLock(ctx)), nil, "down")
		wantErr(t, keep(c.FairLock("down").Lock(bound)), nil, "down")
		wantErr(t, keep(c.RWLock("down").RLock(bound)), nil, "down")
		wantErr(t, keep(c.RWLock("down").Lock(bound)), nil, "down")
		wantErr(t, keep(c.Lock("down").IsLocked(bound)), nil, "down")
		if d := time.Since(start); d > 5*time.Second {
			t.Fatalf("calls on a dead server took %v", d)
		}
	})

	// NOSCRIPT: the scripts are gone from the server's cache; rueidis falls back to EVAL.
	add("SCRIPT FLUSH", func(t *testing.T, e *badEnv) {
		// One hash tag for the three, so that the check below is one command on a cluster.
		tag := "{" + e.key + "}"
		mu, fmu, rw := e.c.Lock(tag+":r"), e.c.FairLock(tag+":f"), e.c.RWLock(tag+":rw")
		flush := func() {
			t.Helper()
			e.b.DoOnMasters(t, e.side, "SCRIPT", "FLUSH")
		}
		for round := 0; round < 2; round++ {
			flush()
			held, err := mu.Lock(e.ctx)
			if err != nil {
				t.Fatalf("round %d: Lock after SCRIPT FLUSH: %v", round, err)
			}
			flush()
			if err := mu.Unlock(held); err != nil {
				t.Fatalf("round %d: Unlock after SCRIPT FLUSH: %v", round, err)
			}
			if held, err = fmu.Lock(e.ctx); err != nil {
				t.Fatalf("round %d: fair Lock after SCRIPT FLUSH: %v", round, err)
			}
			flush()
			if err := fmu.Unlock(held); err != nil {
				t.Fatalf("round %d: fair Unlock after SCRIPT FLUSH: %v", round, err)
			}
			if held, err = rw.RLock(e.ctx); err != nil {
				t.Fatalf("round %d: RLock after SCRIPT FLUSH: %v", round, err)
			}
			flush()
			if err := rw.RUnlock(held); err != nil {
				t.Fatalf("round %d: RUnlock after SCRIPT FLUSH: %v", round, err)
			}
		}
		if n, err := redistest.Do(t, e.side, "EXISTS", tag+":r", tag+":f", tag+":rw").AsInt64(); err != nil || n != 0 {
			t.Fatalf("locks left behind: EXISTS = %d, %v", n, err)
		}
	})

	// maxmemory reached with noeviction: the acquisition is refused with Redis's OOM, and
	// works again once memory is available.
	addReal("maxmemory", func(t *testing.T, e *badEnv) {
		redistest.MustDo(t, e.side, "CONFIG", "SET", "maxmemory-policy", "noeviction")
		redistest.MustDo(t, e.side, "CONFIG", "SET", "maxmemory", "1")
		defer e.b.Server.Do(t, "CONFIG", "SET", "maxmemory", "0")
		for _, call := range []func() error{
			func() error { return keep(e.c.Lock(e.key).Lock(e.ctx)) },
			func() error { return keep(e.c.Lock(e.key).TryLock(ctx)) },
			func() error { return keep(e.c.RWLock(e.key).Lock(e.ctx)) },
			func() error { return keep(e.c.RWLock(e.key).RLock(e.ctx)) },
			func() error { return keep(e.c.FairLock(e.key).Lock(e.ctx)) },
			func() error { return keep(e.c.FairLock(e.key).TryLock(ctx)) },
		} {
			redistest.Unchanged(t, e.side, e.key, func() {
				err := call()
				wantErr(t, err, nil, e.key)
				if !strings.Contains(err.Error(), "OOM") {
					t.Fatalf("err = %v; want Redis's OOM", err)
				}
			})
		}
		redistest.MustDo(t, e.side, "CONFIG", "SET", "maxmemory", "0")
		held, err := e.c.Lock(e.key).Lock(e.ctx)
		if err != nil {
			t.Fatalf("Lock after maxmemory was raised: %v", err)
		}
		if err := e.c.Lock(e.key).Unlock(held); err != nil {
			t.Fatal(err)
		}
	})

	// A client pointed at a replica: writes are refused with READONLY.
	addReal("READONLY replica", func(t *testing.T, e *badEnv) {
		port := e.b.Addr[strings.LastIndexByte(e.b.Addr, ':')+1:]
		replica := redistest.StartServer(t, "--replicaof", "127.0.0.1", port)
		rc := replica.Client(t)
		c, err := relock.New(rc)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		for _, call := range []func() error{
			func() error { return keep(c.Lock(e.key).Lock(e.ctx)) },
			func() error { return keep(c.Lock(e.key).TryLock(ctx)) },
			func() error { return keep(c.FairLock(e.key).Lock(e.ctx)) },
			func() error { return keep(c.RWLock(e.key).RLock(e.ctx)) },
			func() error { return keep(c.RWLock(e.key).Lock(e.ctx)) },
		} {
			err := call()
			wantErr(t, err, nil, e.key)
			if !strings.Contains(err.Error(), "READONLY") {
				t.Fatalf("err = %v; want Redis's READONLY", err)
			}
		}
		if n, err := redistest.Do(t, e.side, "EXISTS", e.key).AsInt64(); err != nil || n != 0 {
			t.Fatalf("lock key on the primary: EXISTS = %d, %v", n, err)
		}
	})
	return cases
}

// Under maxmemory with noeviction, what docs/operations.md promises ("Settings that
// matter"): a re-entry fails with Redis's OOM and changes nothing; a partial Unlock fails
// (the hold's context ends, and the lock is left to its lease); renewals and an owner's
// last unlock still work, since they only shrink what Redis keeps or move an expiry. The
// acquisitions' refusal is the "maxmemory" case of TestBadInput.
//
// Guards against a renewal or a last unlock that writes something that grows memory (an
// unlock latch, a touched field), which a full server refuses: every hold would then be
// lost at its lease, and no lock could be released until memory is freed.
func TestOutOfMemoryLeavesReleasesAndRenewals(t *testing.T) {
	t.Parallel()
	const lease = 3 * time.Second // the watchdog's: renewed every second
	redistest.Real(t, func(t *testing.T, b *redistest.Backend) {
		side := b.Client(t)
		c := relocktest.New(t, b, relock.WithWatchdogTimeout(lease))
		ctx := redistest.Context(t, time.Minute)
		kinds := []holdKind{kindRLock, kindFair, kindWrite, kindRead}
		partial := make([]context.Context, len(kinds)) // a fixed-lease hold re-entered: count 2
		renewed := make([]context.Context, len(kinds)) // a watchdog hold of another lock
		for i, k := range kinds {
			held, err := k.lock(c, ctx, "oom-partial:"+k.name, time.Minute)
			if err == nil {
				partial[i], err = k.lock(c, held, "oom-partial:"+k.name, time.Minute)
			}
			if err == nil {
				renewed[i], err = k.lock(c, relock.NewOwner(ctx), "oom-renewed:"+k.name, 0)
			}
			if err != nil {
				t.Fatalf("%s: %v", k.name, err)
			}
		}
		redistest.MustDo(t, side, "CONFIG", "SET", "maxmemory-policy", "noeviction")
		redistest.MustDo(t, side, "CONFIG", "SET", "maxmemory", "1")
		defer b.Server.Do(t, "CONFIG", "SET", "maxmemory", "0")
		oom := func(what string, err error) {
			t.Helper()
			if err == nil || !strings.Contains(err.Error(), "OOM") {
				t.Errorf("%s: %v; want Redis's OOM", what, err)
			}
		}
		start := time.Now()
		for i, k := range kinds {
			key := "oom-partial:" + k.name
			redistest.Unchanged(t, side, key, func() {
				// A lease longer than the time left: a re-entry that ran would move the expiry.
				_, err := k.lock(c, partial[i], key, 2*time.Minute)
				oom(k.name+" re-entry", err)
				oom(k.name+" partial unlock", k.unlock(c, partial[i], key))
			})
			if partial[i].Err() == nil {
				t.Errorf("%s: the hold's context is live after its Unlock failed", k.name)
			}
		}
		// Past a lease from the last renewal before the memory ran out: only renewals made
		// since keep the holds.
		time.Sleep(lease + lease/2 - time.Since(start))
		for i, k := range kinds {
			key := "oom-renewed:" + k.name
			if err := context.Cause(renewed[i]); err != nil {
				t.Errorf("%s: a renewed hold ended under maxmemory: %v", k.name, err)
			}
			if err := k.unlock(c, renewed[i], key); err != nil {
				t.Errorf("%s: last unlock under maxmemory: %v", k.name, err)
			}
			if n, _ := redistest.Do(t, side, "EXISTS", key).AsInt64(); n != 0 {
				t.Errorf("%s: the lock is still there after its last unlock", k.name)
			}
		}
	})
}
