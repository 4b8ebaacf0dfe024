package relock_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/relock-go/relock"
	"github.com/relock-go/relock/internal/keys"
	"github.com/relock-go/relock/internal/redistest"
	"github.com/relock-go/relock/internal/redistest/relocktest"
	"github.com/relock-go/relock/rlock"
	"github.com/relock-go/relock/rwlock"
)

// A lock's auxiliary keys (its queue, its waiters' deadlines, its wake registries, its
// fencing counter) may hold data of another type: an application's key under a name that
// collides, or debris. The promise is the lock key's: a call either works and leaves that
// data as it was, or is refused with ErrWrongType naming the lock and changes nothing at
// all: no hold taken that nobody knows of, no hold released while the caller is told it
// failed, no key deleted or given an expiry.

// auxKind is a kind of lock as the auxiliary-key cases use it: how to take a hold of it
// (each way its API has), how to release one, and which auxiliary keys it touches.
type auxKind struct {
	kind    string
	aux     []auxKey
	acquire []auxAcquire
	waiting []auxWait // acquisitions that wait, bounded to half a second
	release func(e *badEnv, name string, held context.Context) error
	force   func(e *badEnv, name string) error
}

// waitBound is how long the waiting acquisitions of the auxiliary-key cases wait.
var waitBound = rlock.WithWaitTimeout(500 * time.Millisecond)

// auxKey is an auxiliary key of a lock and the type relock keeps in it.
type auxKey struct {
	what string
	typ  string
	key  func(keys.Names) string
}

type auxAcquire struct {
	name string
	call func(e *badEnv, name string) (context.Context, error)
}

// auxWait is an acquisition that waits, and the auxiliary keys its first attempt reads or
// writes while another client holds the lock.
type auxWait struct {
	name    string
	call    func(e *badEnv, name string) (context.Context, error)
	touches []auxKey
}

var (
	wakeKey      = auxKey{"wake registry", "zset", func(n keys.Names) string { return n.Wake }}
	readersKey   = auxKey{"reader registry", "zset", func(n keys.Names) string { return n.Readers }}
	writersKey   = auxKey{"waiting writers", "zset", func(n keys.Names) string { return n.Writers }}
	queueKey     = auxKey{"queue", "list", func(n keys.Names) string { return n.Queue }}
	deadlinesKey = auxKey{"deadlines", "zset", func(n keys.Names) string { return n.Deadlines }}
)

var auxKinds = []auxKind{
	{
		kind: "rlock", aux: []auxKey{wakeKey},
		acquire: []auxAcquire{
			{"Lock", func(e *badEnv, n string) (context.Context, error) { return e.c.Lock(n).Lock(e.ctx) }},
			{"TryLock", func(e *badEnv, n string) (context.Context, error) { return e.c.Lock(n).TryLock(context.Background()) }},
		},
		waiting: []auxWait{
			{"Lock", func(e *badEnv, n string) (context.Context, error) { return e.c.Lock(n).Lock(e.ctx, waitBound) }, []auxKey{wakeKey}},
		},
		release: func(e *badEnv, n string, held context.Context) error { return e.c.Lock(n).Unlock(held) },
		force:   func(e *badEnv, n string) error { return keep(e.c.Lock(n).ForceUnlock(context.Background())) },
	},
	{
		kind: "spinlock", aux: []auxKey{wakeKey},
		acquire: []auxAcquire{
			{"Lock", func(e *badEnv, n string) (context.Context, error) { return e.c.SpinLock(n).Lock(e.ctx) }},
			{"TryLock", func(e *badEnv, n string) (context.Context, error) {
				return e.c.SpinLock(n).TryLock(context.Background())
			}},
		},
		release: func(e *badEnv, n string, held context.Context) error { return e.c.SpinLock(n).Unlock(held) },
		force:   func(e *badEnv, n string) error { return keep(e.c.SpinLock(n).ForceUnlock(context.Background())) },
	},
	{
		kind: "fairlock", aux: []auxKey{queueKey, deadlinesKey},
		acquire: []auxAcquire{
			{"Lock", func(e *badEnv, n string) (context.Context, error) { return e.c.FairLock(n).Lock(e.ctx) }},
			{"TryLock", func(e *badEnv, n string) (context.Context, error) {
				return e.c.FairLock(n).TryLock(context.Background())
			}},
		},
		waiting: []auxWait{
			{"Lock", func(e *badEnv, n string) (context.Context, error) { return e.c.FairLock(n).Lock(e.ctx, waitBound) }, []auxKey{queueKey, deadlinesKey}},
		},
		release: func(e *badEnv, n string, held context.Context) error { return e.c.FairLock(n).Unlock(held) },
		force:   func(e *badEnv, n string) error { return keep(e.c.FairLock(n).ForceUnlock(context.Background())) },
	},
	{
		kind: "rwlock write", aux: []auxKey{wakeKey, readersKey, writersKey},
		acquire: []auxAcquire{
			{"Lock", func(e *badEnv, n string) (context.Context, error) { return e.c.RWLock(n).Lock(e.ctx) }},
			{"TryLock", func(e *badEnv, n string) (context.Context, error) { return e.c.RWLock(n).TryLock(context.Background()) }},
			{"Lock preferred", func(e *badEnv, n string) (context.Context, error) {
				return e.c.RWLock(n, rwlock.WithWriterPreference()).Lock(e.ctx)
			}},
		},
		waiting: []auxWait{
			{"Lock", func(e *badEnv, n string) (context.Context, error) { return e.c.RWLock(n).Lock(e.ctx, waitBound) }, []auxKey{wakeKey}},
			{"Lock preferred", func(e *badEnv, n string) (context.Context, error) {
				return e.c.RWLock(n, rwlock.WithWriterPreference()).Lock(e.ctx, waitBound)
			}, []auxKey{wakeKey, writersKey}},
		},
		release: func(e *badEnv, n string, held context.Context) error { return e.c.RWLock(n).Unlock(held) },
		force:   func(e *badEnv, n string) error { return keep(e.c.RWLock(n).ForceUnlock(context.Background())) },
	},
	{
		kind: "rwlock read", aux: []auxKey{wakeKey, readersKey, writersKey},
		acquire: []auxAcquire{
			{"RLock", func(e *badEnv, n string) (context.Context, error) { return e.c.RWLock(n).RLock(e.ctx) }},
			{"TryRLock", func(e *badEnv, n string) (context.Context, error) {
				return e.c.RWLock(n).TryRLock(context.Background())
			}},
			{"RLock preferred", func(e *badEnv, n string) (context.Context, error) {
				return e.c.RWLock(n, rwlock.WithWriterPreference()).RLock(e.ctx)
			}},
		},
		waiting: []auxWait{
			{"RLock", func(e *badEnv, n string) (context.Context, error) { return e.c.RWLock(n).RLock(e.ctx, waitBound) }, []auxKey{readersKey}},
		},
		release: func(e *badEnv, n string, held context.Context) error { return e.c.RWLock(n).RUnlock(held) },
		force:   func(e *badEnv, n string) error { return keep(e.c.RWLock(n).ForceUnlock(context.Background())) },
	},
}

// foreignFor returns the data of other types than typ, and a hash that is no lock's.
func foreignFor(typ string) [][]string {
	out := [][]string{{"HSET", "", "name", "alice"}}
	for _, f := range foreign {
		if f.typ != typ {
			out = append(out, f.write)
		}
	}
	return out
}

// refusedOrUntouched checks a call's outcome against the promise: err is nil, or
// ErrWrongType naming name. The foreign key is as it was either way (checked by the
// caller through unchanged).
func refusedOrUntouched(t *testing.T, err error, name string) bool {
	t.Helper()
	if err == nil {
		return false
	}
	wantErr(t, err, relock.ErrWrongType, name)
	return true
}

// lockData is the lock key's type and contents, without its expiry, which runs down
// while the test looks.
func lockData(t *testing.T, e *badEnv) string {
	t.Helper()
	typ, err := redistest.Do(t, e.side, "TYPE", e.key).ToString()
	if err != nil {
		t.Fatal(err)
	}
	m, err := redistest.Do(t, e.side, "HGETALL", e.key).AsStrMap()
	if err != nil && typ == "hash" {
		t.Fatal(err)
	}
	return fmt.Sprint(typ, m)
}

// contents is key's type and contents, without its expiry.
func contents(t *testing.T, e *badEnv, key string) string {
	t.Helper()
	snap := redistest.Snapshot(t, e.side, key)
	typ, err := redistest.Do(t, e.side, "TYPE", key).ToString()
	if err != nil {
		t.Fatal(err)
	}
	if typ == "zset" {
		m, err := redistest.Do(t, e.side, "ZRANGE", key, "0", "-1", "WITHSCORES").AsZScores() // RESP3 replies pairs
		if err != nil {
			t.Fatal(err)
		}
		return fmt.Sprint(typ, m)
	}
	return snap
}

// lockKeys is the contents of every key of e's lock, without expiries.
func lockKeys(t *testing.T, e *badEnv) string {
	t.Helper()
	n := keys.Of(e.key)
	out := lockData(t, e)
	for _, k := range []string{n.Wake, n.Readers, n.Writers, n.Queue, n.Deadlines, n.Token} {
		out += "\n" + k + " " + contents(t, e, k)
	}
	return out
}

// noLock is lockData of a lock key that does not exist.
var noLock = "none" + fmt.Sprint(map[string]string{})

func auxKeyCases() []badCase {
	var cases []badCase
	add := func(name string, run func(t *testing.T, e *badEnv)) {
		cases = append(cases, badCase{name: name, run: run})
	}
	for _, k := range auxKinds {
		for _, ak := range k.aux {
			for _, f := range foreignFor(ak.typ) {
				// A free lock: the acquisition takes the lock with the data left alone, or is
				// refused with no hold left behind.
				for _, acq := range k.acquire {
					add(fmt.Sprintf("aux %s %s/%s %s", ak.what, f[0], k.kind, acq.name), func(t *testing.T, e *badEnv) {
						aux := ak.key(keys.Of(e.key))
						writeForeign(t, e.side, f, aux)
						redistest.Unchanged(t, e.side, aux, func() {
							held, err := acq.call(e, e.key)
							if refusedOrUntouched(t, err, e.key) {
								if d := lockData(t, e); d != noLock {
									t.Fatalf("%s refused with %v, but the lock key holds %s: a hold nobody knows of", acq.name, err, d)
								}
								return
							}
							if err := k.release(e, e.key, held); err != nil {
								wantErr(t, err, relock.ErrWrongType, e.key)
								redistest.MustDo(t, e.side, "DEL", e.key)
							}
						})
					})
				}
				// A held lock: the release frees it with the data left alone, or is
				// refused with the hold as it was.
				add(fmt.Sprintf("aux %s %s/%s release", ak.what, f[0], k.kind), func(t *testing.T, e *badEnv) {
					held, err := k.acquire[0].call(e, e.key)
					if err != nil {
						t.Fatal(err)
					}
					aux := ak.key(keys.Of(e.key))
					writeForeign(t, e.side, f, aux)
					before := lockData(t, e)
					redistest.Unchanged(t, e.side, aux, func() {
						err := k.release(e, e.key, held)
						after := lockData(t, e)
						if refusedOrUntouched(t, err, e.key) {
							if after != before {
								t.Fatalf("release refused with %v, but the lock went from %s to %s", err, before, after)
							}
							redistest.MustDo(t, e.side, "DEL", e.key)
						} else if after != noLock {
							t.Fatalf("release succeeded, but the lock key holds %s", after)
						}
					})
				})
				add(fmt.Sprintf("aux %s %s/%s ForceUnlock", ak.what, f[0], k.kind), func(t *testing.T, e *badEnv) {
					if _, err := k.acquire[0].call(e, e.key); err != nil {
						t.Fatal(err)
					}
					aux := ak.key(keys.Of(e.key))
					writeForeign(t, e.side, f, aux)
					before := lockData(t, e)
					redistest.Unchanged(t, e.side, aux, func() {
						err := k.force(e, e.key)
						after := lockData(t, e)
						if refusedOrUntouched(t, err, e.key) {
							if after != before {
								t.Fatalf("ForceUnlock refused with %v, but the lock went from %s to %s", err, before, after)
							}
						} else if after != noLock {
							t.Fatalf("ForceUnlock succeeded, but the lock key holds %s", after)
						}
					})
					redistest.MustDo(t, e.side, "DEL", e.key)
				})
			}
		}
	}

	// A fencing counter that cannot count on: another type, a string that is no whole
	// number, or one at the top of the range. Every fenced acquisition is refused with
	// ErrWrongType and takes nothing.
	fenced := []struct {
		kind string
		call func(e *badEnv, name string) error
	}{
		{"rlock", func(e *badEnv, n string) error { return keep(e.c.Lock(n, rlock.WithFencing()).Lock(e.ctx)) }},
		{"spinlock", func(e *badEnv, n string) error { return keep(e.c.SpinLock(n, rlock.WithFencing()).Lock(e.ctx)) }},
		{"fairlock", func(e *badEnv, n string) error { return keep(e.c.FairLock(n, rlock.WithFencing()).Lock(e.ctx)) }},
		{"rwlock", func(e *badEnv, n string) error { return keep(e.c.RWLock(n, rlock.WithFencing()).Lock(e.ctx)) }},
	}
	for _, fc := range fenced {
		for _, v := range [][]string{{"SET", "", "hello"}, {"SET", "", "1.5"}, {"SET", "", "9223372036854775807"}, {"RPUSH", "", "a"}, {"HSET", "", "a", "b"}} {
			add(fmt.Sprintf("aux token %s %s/%s", v[0], v[len(v)-1], fc.kind), func(t *testing.T, e *badEnv) {
				token := keys.Of(e.key).Token
				writeForeign(t, e.side, v, token)
				redistest.Unchanged(t, e.side, token, func() {
					wantErr(t, fc.call(e, e.key), relock.ErrWrongType, e.key)
				})
				if d := lockData(t, e); d != noLock {
					t.Fatalf("refused, but the lock key holds %s", d)
				}
			})
		}
	}

	// A waiter whose wake registry turned into other data while it slept: its next
	// attempt, when the holder's fixed lease runs out, is refused and takes nothing.
	waiters := []struct {
		kind string
		key  func(keys.Names) string
		hold func(e *badEnv, n string) error
		wait func(e *badEnv, n string) (context.Context, error)
	}{
		{"rlock", func(n keys.Names) string { return n.Wake },
			func(e *badEnv, n string) error {
				return keep(e.c.Lock(n).Lock(context.Background(), rlock.WithLease(time.Second)))
			},
			func(e *badEnv, n string) (context.Context, error) { return e.c.Lock(n).Lock(e.ctx) }},
		{"rwlock write", func(n keys.Names) string { return n.Wake },
			func(e *badEnv, n string) error {
				return keep(e.c.RWLock(n).Lock(context.Background(), rlock.WithLease(time.Second)))
			},
			func(e *badEnv, n string) (context.Context, error) { return e.c.RWLock(n).Lock(e.ctx) }},
		{"rwlock read", func(n keys.Names) string { return n.Readers },
			func(e *badEnv, n string) error {
				return keep(e.c.RWLock(n).Lock(context.Background(), rlock.WithLease(time.Second)))
			},
			func(e *badEnv, n string) (context.Context, error) { return e.c.RWLock(n).RLock(e.ctx) }},
	}
	for _, w := range waiters {
		add("aux registry of a sleeping waiter/"+w.kind, func(t *testing.T, e *badEnv) {
			// The holder is another client's, so that the waiter cannot be handed the lock.
			other, err := relock.New(e.b.Client(t))
			if err != nil {
				t.Fatal(err)
			}
			defer other.Close()
			if err := w.hold(&badEnv{c: other, ctx: e.ctx}, e.key); err != nil {
				t.Fatal(err)
			}
			holder := lockData(t, e)
			reg := w.key(keys.Of(e.key))
			type result struct {
				held context.Context
				err  error
			}
			done := make(chan result, 1)
			go func() {
				held, err := w.wait(e, e.key)
				done <- result{held, err}
			}()
			// The waiter has registered once the registry exists.
			redistest.Eventually(t, 5*time.Second, "the waiter's registration", func() bool {
				n, err := redistest.Do(t, e.side, "EXISTS", reg).AsInt64()
				return err == nil && n == 1
			})
			// Past the waiter's second attempt, which it makes once its subscription is
			// confirmed: the registry changes while it sleeps.
			time.Sleep(200 * time.Millisecond)
			redistest.MustDo(t, e.side, "DEL", reg)
			redistest.MustDo(t, e.side, "SET", reg, "v")
			redistest.Unchanged(t, e.side, reg, func() {
				r := redistest.Recv(t, done, 10*time.Second, "the waiter's return")
				if r.err == nil {
					t.Fatalf("the waiter got the lock; want ErrWrongType")
				}
				wantErr(t, r.err, relock.ErrWrongType, e.key)
				if errors.Is(r.err, context.DeadlineExceeded) {
					t.Fatal("the waiter timed out")
				}
			})
			// The holder's hold may still be there, or have run out: nothing else.
			if d := lockData(t, e); d != noLock && d != holder {
				t.Fatalf("refused, but the lock key went from the holder's %s to %s", holder, d)
			}
		})
	}

	// A held lock, another client's: a waiting acquisition, whose first attempt reads or
	// writes the auxiliary key, is refused with every key of the lock as it was (no
	// registration, no queue entry of a waiter that is not there).
	for _, k := range auxKinds {
		for _, acq := range k.waiting {
			for _, ak := range acq.touches {
				for _, f := range [][]string{{"SET", "", "v"}, {"HSET", "", "name", "alice"}} {
					add(fmt.Sprintf("aux %s %s/%s %s, held by another", ak.what, f[0], k.kind, acq.name), func(t *testing.T, e *badEnv) {
						other, err := relock.New(e.b.Client(t))
						if err != nil {
							t.Fatal(err)
						}
						defer other.Close()
						// A write hold, for the read-write lock: both its sides must wait.
						if k.kind == "rwlock write" || k.kind == "rwlock read" {
							_, err = other.RWLock(e.key).Lock(context.Background())
						} else {
							_, err = other.Lock(e.key).Lock(context.Background())
						}
						if err != nil {
							t.Fatal(err)
						}
						aux := ak.key(keys.Of(e.key))
						writeForeign(t, e.side, f, aux)
						before := lockKeys(t, e)
						redistest.Unchanged(t, e.side, aux, func() {
							_, err := acq.call(e, e.key)
							wantErr(t, err, relock.ErrWrongType, e.key)
							if after := lockKeys(t, e); after != before {
								t.Fatalf("%s refused with %v, but the lock's keys went from\n%s to\n%s", acq.name, err, before, after)
							}
						})
					})
				}
			}
		}
	}

	// A fair waiter that gives up after its queue turned into other data: leaving is
	// refused with the deadlines as they were.
	add("aux queue of a fair waiter that gives up", func(t *testing.T, e *badEnv) {
		other, err := relock.New(e.b.Client(t))
		if err != nil {
			t.Fatal(err)
		}
		defer other.Close()
		if _, err := other.FairLock(e.key).Lock(context.Background()); err != nil {
			t.Fatal(err)
		}
		n := keys.Of(e.key)
		done := make(chan error, 1)
		go func() {
			_, err := e.c.FairLock(e.key).Lock(e.ctx, rlock.WithWaitTimeout(time.Second))
			done <- err
		}()
		redistest.Eventually(t, 5*time.Second, "the waiter's queue entry", func() bool {
			l, err := redistest.Do(t, e.side, "LLEN", n.Queue).AsInt64()
			return err == nil && l == 1
		})
		redistest.MustDo(t, e.side, "DEL", n.Queue)
		redistest.MustDo(t, e.side, "SET", n.Queue, "v")
		before := contents(t, e, n.Deadlines)
		redistest.Unchanged(t, e.side, n.Queue, func() {
			if err := redistest.Recv(t, done, 10*time.Second, "the waiter's return"); err == nil {
				t.Fatal("the waiter got a lock another client holds")
			}
		})
		if after := contents(t, e, n.Deadlines); after != before {
			t.Fatalf("the leave was refused, but the deadlines went from %s to %s", before, after)
		}
	})

	// A release that hands the lock to a waiter of its own client (lua/rlock_hand.lua),
	// whose registry turned into other data while the waiter was parked: the release hands
	// it on with the data left alone, or is refused with the lock as it was; and the
	// waiter either holds the lock or is refused, with no hold taken that nobody knows of.
	add("aux registry of a parked waiter of the holder's client/rlock", func(t *testing.T, e *badEnv) {
		mu := e.c.Lock(e.key)
		held, err := mu.Lock(e.ctx)
		if err != nil {
			t.Fatal(err)
		}
		reg := keys.Of(e.key).Wake
		type result struct {
			held context.Context
			err  error
		}
		done := make(chan result, 1)
		go func() {
			h, err := mu.Lock(e.ctx)
			done <- result{h, err}
		}()
		redistest.Eventually(t, 5*time.Second, "the waiter's registration", func() bool {
			n, err := redistest.Do(t, e.side, "EXISTS", reg).AsInt64()
			return err == nil && n == 1
		})
		time.Sleep(100 * time.Millisecond) // for the waiter to park: only a parked one is handed the lock
		redistest.MustDo(t, e.side, "DEL", reg)
		redistest.MustDo(t, e.side, "SET", reg, "v")
		before := lockData(t, e)
		redistest.Unchanged(t, e.side, reg, func() {
			uerr := mu.Unlock(held)
			after := lockData(t, e)
			if refusedOrUntouched(t, uerr, e.key) && after != before {
				t.Fatalf("Unlock refused with %v, but the lock went from %s to %s", uerr, before, after)
			}
			r := redistest.Recv(t, done, 10*time.Second, "the waiter's return")
			if r.err != nil {
				wantErr(t, r.err, relock.ErrWrongType, e.key)
				if uerr == nil && lockData(t, e) != noLock {
					t.Fatalf("the waiter was refused with %v after the release, but the lock key holds %s", r.err, lockData(t, e))
				}
				return
			}
			if err := mu.Unlock(r.held); err != nil {
				wantErr(t, err, relock.ErrWrongType, e.key)
			}
		})
		redistest.MustDo(t, e.side, "DEL", e.key)
	})
	return cases
}

// A waiters' deadline that no relock or Redisson waiter writes (a score of +inf, one
// beyond what PEXPIRE takes, a fraction of a millisecond) is taken for a waiter that is
// there: a fair waiter queues behind it and a reader under writer preference gives way to
// it, each until its wait bound, and leaves nothing of its own behind. (The scripts turned
// such a deadline into an expiry that PEXPIRE refused after they had written the caller's
// queue entry, or its client's registration, which then stayed without expiry.)
func TestWaitersBehindForeignDeadlines(t *testing.T) {
	redistest.Real(t, func(t *testing.T, b *redistest.Backend) {
		c, other := relocktest.New(t, b), relocktest.New(t, b)
		side := b.Client(t)
		ctx := redistest.Context(t, 30*time.Second)
		soon := strconv.FormatInt(time.Now().Add(time.Minute).UnixMilli(), 10) + ".5"
		for i, score := range []string{"+inf", "1e20", soon} {
			t.Run(fmt.Sprintf("fair %s", score), func(t *testing.T) {
				n := keys.Of(fmt.Sprintf("aux:deadlines:fair:%d", i))
				held, err := other.FairLock(n.Lock).Lock(ctx)
				if err != nil {
					t.Fatal(err)
				}
				defer other.FairLock(n.Lock).Unlock(held)
				redistest.MustDo(t, side, "RPUSH", n.Queue, javaOwner)
				redistest.MustDo(t, side, "ZADD", n.Deadlines, score, javaOwner)
				if _, err := c.FairLock(n.Lock).Lock(ctx, waitBound); !errors.Is(err, context.DeadlineExceeded) {
					t.Fatalf("Lock behind a waiter with deadline %s = %v; want the wait bound", score, err)
				}
				if q, err := redistest.Do(t, side, "LRANGE", n.Queue, "0", "-1").AsStrSlice(); err != nil || !slices.Equal(q, []string{javaOwner}) {
					t.Fatalf("queue = %v, %v; want the other waiter alone", q, err)
				}
				if z, err := redistest.Do(t, side, "ZRANGE", n.Deadlines, "0", "-1").AsStrSlice(); err != nil || !slices.Equal(z, []string{javaOwner}) {
					t.Fatalf("deadlines = %v, %v; want the other waiter's alone", z, err)
				}
			})
			t.Run(fmt.Sprintf("reader %s", score), func(t *testing.T) {
				n := keys.Of(fmt.Sprintf("aux:deadlines:rw:%d", i))
				redistest.MustDo(t, side, "ZADD", n.Writers, score, javaOwner+":write")
				if _, err := c.RWLock(n.Lock, rwlock.WithWriterPreference()).RLock(ctx, waitBound); !errors.Is(err, context.DeadlineExceeded) {
					t.Fatalf("RLock behind a writer with deadline %s = %v; want the wait bound", score, err)
				}
				for _, k := range []string{n.Readers, n.Wake} {
					if ttl, err := redistest.Do(t, side, "PTTL", k).AsInt64(); err != nil || ttl == -1 {
						t.Fatalf("%s: PTTL = %d, %v; want no key, or one that expires", k, ttl, err)
					}
				}
			})
			t.Run(fmt.Sprintf("writer %s", score), func(t *testing.T) {
				n := keys.Of(fmt.Sprintf("aux:deadlines:w:%d", i))
				held, err := other.RWLock(n.Lock).RLock(ctx)
				if err != nil {
					t.Fatal(err)
				}
				defer other.RWLock(n.Lock).RUnlock(held)
				redistest.MustDo(t, side, "ZADD", n.Writers, score, javaOwner+":write")
				if _, err := c.RWLock(n.Lock, rwlock.WithWriterPreference()).Lock(ctx, waitBound); !errors.Is(err, context.DeadlineExceeded) {
					t.Fatalf("Lock beside a writer with deadline %s = %v; want the wait bound", score, err)
				}
				if z, err := redistest.Do(t, side, "ZRANGE", n.Writers, "0", "-1").AsStrSlice(); err != nil || !slices.Equal(z, []string{javaOwner + ":write"}) {
					t.Fatalf("waiting writers = %v, %v; want the other writer alone", z, err)
				}
			})
		}
	})
}
