package script_test

import (
	"context"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/relock-go/relock/internal/keys"
	"github.com/relock-go/relock/internal/redistest"
	"github.com/relock-go/relock/internal/script"
)

const (
	holder = "6f1c2a3b-0000-4000-8000-000000000001:1"
	first  = "6f1c2a3b-0000-4000-8000-000000000002:1"
	second = "6f1c2a3b-0000-4000-8000-000000000003:1"
)

// acquire runs the plain lock's acquire script on lock name for owner, with the client's
// wake code and a woken waiter's stay ("" for a first attempt).
func acquire(t *testing.T, rc rueidis.Client, name, owner, code, stay string) ([]int64, error) {
	t.Helper()
	return script.AcquireReply(nil, script.RLockAcquire().Exec(context.Background(), rc, []string{name, keys.Of(name).Wake},
		[]string{"30000", owner, code, stay}))
}

// writeAcquire is acquire for owner's write hold of a read-write lock, with a 30s lease
// and no writer preference, as the engine sends it (engine.Write).
func writeAcquire(t *testing.T, rc rueidis.Client, name, owner, code, stay string) ([]int64, error) {
	t.Helper()
	return writeAcquireFor(t, rc, name, owner, "30000", code, stay)
}

// writeAcquireFor is writeAcquire with a lease of its own, in milliseconds.
func writeAcquireFor(t *testing.T, rc rueidis.Client, name, owner, lease, code, stay string) ([]int64, error) {
	t.Helper()
	n := keys.Of(name)
	return script.AcquireReply(nil, script.RWLockWriteAcquire().Exec(context.Background(), rc, []string{n.Lock, n.Writers, n.ReadTimeouts(owner), n.Wake},
		[]string{lease, keys.WriteField(owner), owner, "0", "10000", code, stay, n.RWChannel, "publish"}))
}

// readAcquire is acquire for a read hold, with prefer "1" when new readers give way to
// waiting writers, as the engine sends it (engine.Read).
func readAcquire(t *testing.T, rc rueidis.Client, name, owner, prefer, code, stay string) ([]int64, error) {
	t.Helper()
	return readAcquireFor(t, rc, name, owner, "30000", prefer, code, stay)
}

// readAcquireFor is readAcquire with a lease of its own, in milliseconds.
func readAcquireFor(t *testing.T, rc rueidis.Client, name, owner, lease, prefer, code, stay string) ([]int64, error) {
	t.Helper()
	n := keys.Of(name)
	return script.AcquireReply(nil, script.RWLockReadAcquire().Exec(context.Background(), rc, []string{n.Lock, n.ReadTimeouts(owner), n.Writers, n.Readers, n.Wake},
		[]string{lease, owner, keys.WriteField(owner), prefer, code, stay, n.RWChannel, "publish"}))
}

// The wake registry (lua/wake.lua) keeps clients in the order they joined: a client that
// fails again keeps its place. Its life only grows: a waiter told of a short lease does not
// cut short the entry of one that sleeps for a long one.
func TestWakeRegistryOrderAndLife(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		rc := b.Client(t)
		ctx := context.Background()
		reg := keys.Of("queue").Wake
		if v, err := acquire(t, rc, "queue", holder, "", ""); err != nil || v[0] != 1 {
			t.Fatalf("holder: %v %v", v, err)
		}
		for _, w := range []struct{ owner, code string }{{first, "1111"}, {second, "2222"}, {first, "1111"}} {
			if v, err := acquire(t, rc, "queue", w.owner, w.code, ""); err != nil || v[0] != 0 {
				t.Fatalf("waiter %s: %v %v; want {0, PTTL}", w.code, v, err)
			}
		}
		order := func() string {
			t.Helper()
			m := redistest.Members(t, rc, reg)
			return strings.Join(m, " ")
		}
		if got := order(); got != "1111 2222" {
			t.Errorf("registry %q; want 1111 then 2222: the first client keeps its place when it fails again", got)
		}
		// The lock's lease now looks short to the second client's next attempt.
		redistest.MustDo(t, rc, "PEXPIRE", "queue", "2000")
		if v, err := acquire(t, rc, "queue", second, "2222", "1"); err != nil || v[0] != 0 {
			t.Fatalf("second waiter again: %v %v", v, err)
		}
		if pttl, err := rc.Do(ctx, rc.B().Pttl().Key(reg).Build()).AsInt64(); err != nil || pttl <= 30000 {
			t.Errorf("registry PTTL %d (%v); want above 30000: the first client sleeps up to 30s, and its entry must outlive that", pttl, err)
		}
		if got := order(); got != "1111 2222" {
			t.Errorf("registry %q after a retry; want 1111 then 2222", got)
		}
	})
}

// A woken waiter's attempt is spared the hash's shape check, but not for a hash without
// expiry, which no lock is: waiting on an application's hash would last forever.
func TestRetryRefusesHashWithoutExpiry(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		rc := b.Client(t)
		redistest.MustDo(t, rc, "HSET", "app", "color", "blue")
		for _, stay := range []string{"", "1", "0"} {
			_, err := acquire(t, rc, "app", first, "1111", stay)
			if err == nil || !strings.Contains(err.Error(), "WRONGTYPE") {
				t.Errorf("stay %q: %v; want WRONGTYPE for a hash that is not a lock", stay, err)
			}
		}
		if got, err := rc.Do(context.Background(), rc.B().Hgetall().Key("app").Build()).AsStrMap(); err != nil || len(got) != 1 || got["color"] != "blue" {
			t.Errorf("the application's hash is now %v (%v); want it untouched", got, err)
		}
	})
}

// A woken waiter that gets the lock settles its client's entry, which the unlock that woke
// it took: stay "1" (other waiters of the client remain) registers the client again, also
// when that unlock took the registry's last entry and the registry is gone; stay "0" leaves
// it out, also when the client has joined the registry again since; a first attempt ("")
// leaves the registry as it is. So for every kind of waiter a registry names: a plain
// lock's, a read-write lock's writers, and its readers (in a registry of their own).
func TestWokenWaiterSettlesItsEntry(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		rc := b.Client(t)
		for _, kind := range []struct {
			name    string
			acquire func(name, owner, code, stay string) ([]int64, error)
		}{
			{"plain", func(name, owner, code, stay string) ([]int64, error) {
				return acquire(t, rc, name, owner, code, stay)
			}},
			{"write", func(name, owner, code, stay string) ([]int64, error) {
				return writeAcquire(t, rc, name, owner, code, stay)
			}},
			{"read", func(name, owner, code, stay string) ([]int64, error) {
				return readAcquire(t, rc, name, owner, "0", code, stay)
			}},
		} {
			for _, c := range []struct {
				stay   string
				before []string // the registry's codes before the attempt
				want   string
			}{
				{"1", nil, "1111"},
				{"1", []string{"2222"}, "2222 1111"},
				{"0", nil, ""},
				{"0", []string{"2222"}, "2222"},
				{"0", []string{"1111", "2222"}, "2222"},
				{"", nil, ""},
				{"", []string{"2222"}, "2222"},
			} {
				name := "settle-" + kind.name + "-" + c.stay + "-" + strings.Join(c.before, "-")
				reg := keys.Of(name).Wake
				if kind.name == "read" {
					reg = keys.Of(name).Readers // a reader settles its client's entry among the readers'
				}
				for i, code := range c.before {
					redistest.MustDo(t, rc, "ZADD", reg, strconv.Itoa(i+1), code)
				}
				if v, err := kind.acquire(name, first, "1111", c.stay); err != nil || v[0] != 1 {
					t.Fatalf("%s, stay %q, registry %v: %v %v; want the free lock", kind.name, c.stay, c.before, v, err)
				}
				m := redistest.Members(t, rc, reg)
				if got := strings.Join(m, " "); got != c.want {
					t.Errorf("%s, stay %q, registry %v before: registry %q after; want %q", kind.name, c.stay, c.before, got, c.want)
				}
			}
		}
	})
}

// A writer that takes a free read-write lock leaves the waiting writers' zset (writer
// preference), whatever else is there: a first attempt with no wake registry, as well as
// one beside other writers' entries. An entry it left behind would hold readers back until
// it expired.
func TestWriterTakingTheLockLeavesTheWriters(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		rc := b.Client(t)
		for _, c := range []struct {
			others   []string // other writers' entries
			registry bool     // a client of the lock's is registered to be woken
		}{{nil, false}, {[]string{second + ":write"}, false}, {nil, true}, {[]string{second + ":write"}, true}} {
			name := "writers-" + strconv.Itoa(len(c.others)) + "-" + strconv.FormatBool(c.registry)
			n := keys.Of(name)
			for i, w := range append([]string{first + ":write"}, c.others...) {
				redistest.MustDo(t, rc, "ZADD", n.Writers, strconv.Itoa(i+1), w)
			}
			if c.registry {
				redistest.MustDo(t, rc, "ZADD", n.Wake, "1", "2222")
			}
			v, err := writeAcquire(t, rc, name, first, "1111", "")
			if err != nil || v[0] != 1 {
				t.Fatalf("others %v, registry %v: %v %v; want the free lock", c.others, c.registry, v, err)
			}
			m := redistest.Members(t, rc, n.Writers)
			if got, want := strings.Join(m, " "), strings.Join(c.others, " "); got != want {
				t.Errorf("others %v, registry %v: writers %q after the write hold; want %q", c.others, c.registry, got, want)
			}
		}
	})
}

// A handoff (lua/rlock_hand.lua) keeps the releasing client registered to be woken for the
// lock: in its place when it has an entry, at the back when it has none, and for at least
// a second longer than the lease it hands on, so that its other waiters still hear of the
// next release.
func TestHandKeepsTheClientRegistered(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		rc := b.Client(t)
		ctx := context.Background()
		for _, c := range []struct {
			before []string // the registry's codes before the handoff
			want   string
		}{
			{nil, "1111"},
			{[]string{"2222"}, "2222 1111"},
			{[]string{"1111", "2222"}, "1111 2222"},
		} {
			name := "hand-" + strings.Join(c.before, "-")
			n := keys.Of(name)
			if v, err := acquire(t, rc, name, holder, "", ""); err != nil || v[0] != 1 {
				t.Fatalf("holder: %v %v", v, err)
			}
			for i, code := range c.before {
				redistest.MustDo(t, rc, "ZADD", n.Wake, strconv.Itoa(i+1), code)
			}
			v, err := script.RLockHand().Exec(ctx, rc, []string{n.Lock, n.Channel, n.Wake},
				[]string{holder, "1", "publish", first, "30000", "1111"}).AsIntSlice()
			if err != nil || len(v) != 2 || v[0] != 1 || v[1] != 0 {
				t.Fatalf("registry %v: hand %v %v; want {1, 0}", c.before, v, err)
			}
			m := redistest.Members(t, rc, n.Wake)
			if got := strings.Join(m, " "); got != c.want {
				t.Errorf("registry %v before the handoff: %q after; want %q", c.before, got, c.want)
			}
			if pttl := redistest.PTTL(t, rc, n.Wake); pttl <= 30000 {
				t.Errorf("registry %v before the handoff: registry PTTL %d; want above the handed lease, 30000", c.before, pttl)
			}
		}
	})
}

// An unlock (lua/rlock_unlock.lua) wakes the client that registered first among those that
// listen: it publishes that client's code and then Redisson's message, takes that client's
// entry and the entries before it of clients that no longer listen, and leaves the clients
// behind it registered in their order.
func TestUnlockWakesTheFirstListeningClient(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		rc := b.Client(t)
		ctx := context.Background()
		n := keys.Of("wake-order")
		if v, err := acquire(t, rc, n.Lock, holder, "", ""); err != nil || v[0] != 1 {
			t.Fatalf("holder: %v %v", v, err)
		}
		redistest.MustDo(t, rc, "ZADD", n.Wake, "1", "1111", "2", "2222", "3", "3333", "4", "4444")
		b.Listen(t, n.Wake+":2222")
		b.Listen(t, n.Wake+":3333")
		l := b.Listen(t, n.Channel)
		v, err := script.RLockUnlock().Exec(ctx, rc, []string{n.Lock, n.Channel, n.Wake}, []string{"0", holder, "1", "publish"}).AsInt64()
		if err != nil || v != 1 {
			t.Fatalf("unlock: %v %v; want 1", v, err)
		}
		redistest.Eventually(t, 10*time.Second, "the unlock's two messages", func() bool { return len(l.Messages()) >= 2 })
		if got := strings.Join(l.Messages(), " "); got != "2222 0" {
			t.Errorf("messages %q; want the first listening client's code, then Redisson's: \"2222 0\"", got)
		}
		m := redistest.Members(t, rc, n.Wake)
		if got := strings.Join(m, " "); got != "3333 4444" {
			t.Errorf("registry %q after the unlock; want \"3333 4444\"", got)
		}
	})
}

// An acquisition with no third value to give replies the hold count alone, an integer
// (package lua): a first hold of a lock without fencing, and a re-entry. A fenced first
// hold replies {1, 1, token}, and a held lock {0, PTTL}; AcquireReply reads them all.
func TestAcquireRepliesTheCountAlone(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		rc := b.Client(t)
		ctx := context.Background()
		run := func(name, owner, stay string, fenced bool) rueidis.RedisResult {
			n := keys.Of(name)
			ks := []string{n.Lock, n.Wake}
			if fenced {
				ks = append(ks, n.Token)
			}
			return script.RLockAcquire().Exec(ctx, rc, ks, []string{"30000", owner, "1111", stay, n.Channel, "publish"})
		}
		for _, c := range []struct {
			what        string
			name, owner string
			stay        string
			fenced      bool
			bare        int64   // the integer reply, or 0 for an array
			want        []int64 // as AcquireReply reads it
		}{
			{"a first hold", "bare", holder, "", false, 1, []int64{1, 1, 0}},
			{"a re-entry", "bare", holder, "", false, 2, []int64{1, 2, 0}},
			{"a woken waiter's hold", "woken", holder, "0", false, 1, []int64{1, 1, 0}},
			{"a fenced first hold", "fenced", holder, "", true, 0, []int64{1, 1, 1}},
			{"a fenced re-entry", "fenced", holder, "", true, 2, []int64{1, 2, 0}},
		} {
			res := run(c.name, c.owner, c.stay, c.fenced)
			n, err := res.AsInt64()
			if c.bare != 0 && (err != nil || n != c.bare) {
				t.Errorf("%s: reply %v %v; want the integer %d", c.what, n, err, c.bare)
			}
			if c.bare == 0 && err == nil {
				t.Errorf("%s: reply the integer %d; want an array", c.what, n)
			}
			if v, err := script.AcquireReply(nil, res); err != nil || !slices.Equal(v, c.want) {
				t.Errorf("%s: AcquireReply read %v %v; want %v", c.what, v, err, c.want)
			}
		}
		v, err := script.AcquireReply(nil, run("bare", first, "", false))
		if err != nil || len(v) != 2 || v[0] != 0 || v[1] <= 0 || v[1] > 30000 {
			t.Errorf("another owner: AcquireReply read %v %v; want {0, PTTL}", v, err)
		}
	})
}
