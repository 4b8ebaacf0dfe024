package relock_test

import (
	"context"
	"errors"
	"log/slog"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/relock-go/relock"
	"github.com/relock-go/relock/internal/redistest"
	"github.com/relock-go/relock/internal/redistest/relocktest"
	"github.com/relock-go/relock/rlock"
)

// records is a slog handler that keeps what it is given.
type records struct {
	mu   sync.Mutex
	msgs []string // level and message, one per record, with its attributes
}

func (r *records) Enabled(context.Context, slog.Level) bool { return true }
func (r *records) WithAttrs([]slog.Attr) slog.Handler       { return r }
func (r *records) WithGroup(string) slog.Handler            { return r }
func (r *records) Handle(_ context.Context, rec slog.Record) error {
	line := rec.Level.String() + " " + rec.Message
	rec.Attrs(func(a slog.Attr) bool {
		line += " " + a.String()
		return true
	})
	r.mu.Lock()
	r.msgs = append(r.msgs, line)
	r.mu.Unlock()
	return nil
}

// newRecords returns an empty records, whose records t logs if it fails.
func newRecords(t *testing.T) *records {
	r := &records{}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("records:\n%s", r)
		}
	})
	return r
}

// index returns the position of the first record that contains want, or -1.
func (r *records) index(want string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	for i, m := range r.msgs {
		if strings.Contains(m, want) {
			return i
		}
	}
	return -1
}

// count returns how many records contain want.
func (r *records) count(want string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, m := range r.msgs {
		if strings.Contains(m, want) {
			n++
		}
	}
	return n
}

func (r *records) String() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return strings.Join(r.msgs, "\n")
}

// What an operator must hear of is logged through the client's slog logger: a renewal
// that fails (Redis refuses writes) and its recovery, and the subscriber connection going
// down and coming back.
func TestLogging(t *testing.T) {
	t.Parallel()
	redistest.Real(t, func(t *testing.T, b *redistest.Backend) {
		logs := newRecords(t)
		c := relocktest.New(t, b, relock.WithWatchdogTimeout(3*time.Second), relock.WithLogger(slog.New(logs)))
		side := b.Client(t)
		held, err := c.Lock("logged").Lock(context.Background(), rlock.WithWaitTimeout(30*time.Second)) // the hold must end by its own loss
		if err != nil {
			t.Fatal(err)
		}

		// Renewals fail while Redis refuses writes (no replica), and recover after.
		redistest.MustDo(t, side, "CONFIG", "SET", "min-replicas-to-write", "1")
		redistest.Eventually(t, 10*time.Second, "no renewal failure logged", func() bool {
			return logs.index("WARN relock: lease renewal failed") >= 0
		})
		redistest.MustDo(t, side, "CONFIG", "SET", "min-replicas-to-write", "0")
		redistest.Eventually(t, 10*time.Second, "no recovery logged", func() bool {
			return logs.index("INFO relock: lease renewal recovered") > logs.index("WARN relock: lease renewal failed")
		})
		if i := logs.index("NOREPLICAS"); i < 0 {
			t.Errorf("the failure's record does not carry Redis's error:\n%s", logs)
		}
		if held.Err() != nil {
			t.Fatalf("the hold ended across a short renewal failure: %v", context.Cause(held))
		}

		// The client's connections, the subscriber's among them, are cut; it comes back.
		redistest.MustDo(t, side, "CLIENT", "KILL", "TYPE", "normal", "SKIPME", "yes")
		redistest.Eventually(t, 10*time.Second, "no reconnect logged", func() bool {
			down := logs.index("WARN relock: subscriber connection down")
			return down >= 0 && logs.index("INFO relock: subscriber reconnected") > down
		})

		// A hold found lost is logged with its lock: here the next renewal finds the key
		// gone.
		redistest.MustDo(t, side, "DEL", "logged")
		// One record, WARN, with the lock and its owner (docs/operations.md, WithLogger).
		lost := "lock=logged owner=" + c.ID() + ":"
		redistest.Eventually(t, 10*time.Second, "no lost lease logged", func() bool {
			return logs.index("WARN relock: lease lost") >= 0 && logs.index(lost) == logs.index("WARN relock: lease lost")
		})
		// The hold's context tells the holder too. (Using it here also keeps it reachable:
		// a hold whose context is dropped is abandoned, not lost.)
		redistest.Recv(t, held.Done(), 10*time.Second, "the end of the lost hold's context")
		if cause := context.Cause(held); !errors.Is(cause, relock.ErrLeaseLost) {
			t.Errorf("the lost hold's context ended with %v; want ErrLeaseLost", cause)
		}
	})
}

// A user that may not SUBSCRIBE: the client cannot hear unlocks, and says why. Its
// waiters wait on the lock's lease and take it once it is free (no hang), and the WARN of
// the subscriber's trouble carries Redis's refusal, the reason an operator needs (it said
// only that the connection was down, once a second, with no cause).
func TestLoggingSubscribeRefused(t *testing.T) {
	t.Parallel()
	redistest.Real(t, func(t *testing.T, b *redistest.Backend) {
		redistest.MustDo(t, b.Client(t), "ACL", "SETUSER", "nosub", "on", ">nosub-pass", "~*", "&*", "+@all", "-subscribe")
		user := b.ClientWith(t, func(o *rueidis.ClientOption) { o.Username, o.Password = "nosub", "nosub-pass" })
		logs := newRecords(t)
		const lease = 2 * time.Second
		holder := relocktest.New(t, b, relock.WithWatchdogTimeout(lease))
		waiter, err := relock.New(user, relock.WithWatchdogTimeout(lease), relock.WithLogger(slog.New(logs)))
		if err != nil {
			t.Fatal(err)
		}
		defer waiter.Close()
		held, err := holder.Lock("nosub").Lock(redistest.Context(t, time.Minute))
		if err != nil {
			t.Fatal(err)
		}
		acquired := make(chan error, 1)
		go func() {
			ctx, cancel := context.WithTimeout(context.Background(), 10*lease)
			defer cancel()
			h, err := waiter.Lock("nosub").Lock(ctx)
			if err == nil {
				err = waiter.Lock("nosub").Unlock(h)
			}
			acquired <- err
		}()
		redistest.Eventually(t, 10*time.Second, "no subscriber trouble logged", func() bool {
			return logs.index("WARN relock: subscriber connection down") >= 0
		})
		// One episode, told once: the client tries again every second or so meanwhile, and
		// Redis answers its PING each time, but the subscriber is not back until its
		// subscriptions are made (it logged a WARN and an INFO for every try).
		time.Sleep(3 * time.Second)
		down, back := logs.count("WARN relock: subscriber connection down"), logs.count("INFO relock: subscriber reconnected")
		if down != 1 || back != 0 {
			t.Errorf("3s into a refusal: %d WARNs that the subscriber is down and %d INFOs that it is back; want 1 and 0", down, back)
		}
		if err := holder.Lock("nosub").Unlock(held); err != nil {
			t.Fatal(err)
		}
		if err := redistest.Recv(t, acquired, 12*lease, "the waiter's Lock"); err != nil {
			t.Fatalf("the waiter: %v", err)
		}
		if logs.index("NOPERM") < 0 {
			t.Errorf("the subscriber's WARN does not carry Redis's refusal:\n%s", logs)
		}
	})
}

// refused returns how many commands the server refused with the error code code since it
// started (INFO errorstats).
func refused(t *testing.T, rc rueidis.Client, code string) int64 {
	t.Helper()
	text, err := redistest.Do(t, rc, "INFO", "errorstats").ToString()
	if err != nil {
		t.Fatalf("INFO errorstats: %v", err)
	}
	for _, line := range strings.Split(text, "\r\n") {
		if rest, ok := strings.CutPrefix(line, "errorstat_"+code+":count="); ok {
			n, err := strconv.ParseInt(rest, 10, 64)
			if err != nil {
				t.Fatalf("INFO errorstats: %q: %v", line, err)
			}
			return n
		}
	}
	return 0
}

// A renewal outage that lasts several rounds is logged once, at its first failed round
// (WARN), and once at its recovery (INFO): docs/operations.md says "once per episode".
// Guards against a WARN per failed round, which floods the log of a client with many
// holds for as long as Redis refuses writes.
func TestLoggingRenewalOutageOnce(t *testing.T) {
	t.Parallel()
	redistest.Real(t, func(t *testing.T, b *redistest.Backend) {
		logs := newRecords(t)
		// Renewals every 2s. Two failed rounds and the round after them come a whole lease
		// after the last success, so the hold may run out at that round (on a loaded machine
		// it does): the episode's recovery is a later hold's first renewal then.
		c := relocktest.New(t, b, relock.WithWatchdogTimeout(6*time.Second), relock.WithLogger(slog.New(logs)))
		side := b.Client(t)
		held, err := c.Lock("logged:outage").Lock(redistest.Context(t, time.Minute))
		if err != nil {
			t.Fatal(err)
		}
		redistest.MustDo(t, side, "CONFIG", "SET", "min-replicas-to-write", "1")
		redistest.Eventually(t, 10*time.Second, "no renewal failure logged", func() bool {
			return logs.index("WARN relock: lease renewal failed") >= 0
		})
		// The first round's refusals are counted by now (it logged after them): one more is
		// a later round's.
		first := refused(t, side, "NOREPLICAS")
		redistest.Eventually(t, 10*time.Second, "no second failed round", func() bool {
			return refused(t, side, "NOREPLICAS") > first
		})
		redistest.MustDo(t, side, "CONFIG", "SET", "min-replicas-to-write", "0")
		after, err := c.Lock("logged:outage:after").Lock(redistest.Context(t, time.Minute))
		if err != nil {
			t.Fatal(err)
		}
		redistest.Eventually(t, 10*time.Second, "no recovery logged", func() bool {
			return logs.index("INFO relock: lease renewal recovered") >= 0
		})
		// Reachable until here: an abandoned hold would leave the renewal batch.
		runtime.KeepAlive(held)
		runtime.KeepAlive(after)
		if n, m := logs.count("relock: lease renewal failed"), logs.count("relock: lease renewal recovered"); n != 1 || m != 1 {
			t.Errorf("an outage of two failed rounds logged %d failures and %d recoveries; want 1 and 1", n, m)
		}
	})
}

// A hold that no context can release any more is logged as abandoned, once, as a WARN with
// its lock and owner (docs/operations.md, WithLogger): the operator's one sign that a
// program dropped a hold without its Unlock.
func TestLoggingAbandoned(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		logs := newRecords(t)
		c := relocktest.New(t, b, relock.WithWatchdogTimeout(abandonLease), relock.WithLogger(slog.New(logs)))
		func() {
			if _, err := c.Lock("logged:abandoned").Lock(context.Background()); err != nil { // dropped
				t.Fatal(err)
			}
		}()
		collect(t, "no abandoned hold logged", func() bool { return logs.index("relock: hold abandoned") >= 0 })
		i := logs.index("relock: hold abandoned")
		if logs.index("WARN relock: hold abandoned") != i || logs.index("lock=logged:abandoned owner="+c.ID()+":") != i {
			t.Errorf("the abandoned hold's record is not a WARN with its lock and owner:\n%s", logs)
		}
		if n := logs.count("relock: hold abandoned"); n != 1 {
			t.Errorf("%d records of one abandoned hold; want 1", n)
		}
	})
}

// A lost hold's record names its owner as the observer and the abandoned hold's record do,
// "<client id>:<n>", for kinds whose hash field is not the owner: a read-write lock's
// write hold (the field adds ":write") and a semaphore's lease (its fields are the permit
// ids). An operator matches the record to the acquisition by it.
func TestLoggingLostOwnerIsTheOwner(t *testing.T) {
	t.Parallel()
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		logs := newRecords(t)
		c := relocktest.New(t, b, relock.WithWatchdogTimeout(3*time.Second), relock.WithLogger(slog.New(logs)))
		side := b.Client(t)
		ctx := redistest.Context(t, time.Minute)
		sem := c.Semaphore("logged:sem")
		if err := sem.AddPermits(ctx, 1); err != nil {
			t.Fatal(err)
		}
		for _, k := range []struct {
			name, key string
			take      func() (context.Context, error)
		}{
			{"logged:rw", "logged:rw", func() (context.Context, error) { return c.RWLock("logged:rw").Lock(ctx) }},
			{"logged:sem", "{logged:sem}:timeout", func() (context.Context, error) { return sem.AcquireLease(ctx, 1) }},
		} {
			held, err := k.take()
			if err != nil {
				t.Fatal(err)
			}
			redistest.MustDo(t, side, "DEL", k.key)
			redistest.Recv(t, held.Done(), 10*time.Second, "the end of the lost hold of "+k.name)
			want := regexp.MustCompile(`^WARN relock: lease lost.* lock=` + regexp.QuoteMeta(k.name) + ` owner=` + regexp.QuoteMeta(c.ID()) + `:[0-9]+$`)
			if !logs.matches(want) {
				t.Errorf("no lost-lease record of %s naming its owner as %s:<n>", k.name, c.ID())
			}
			// The hold is kept until here, as a holder keeps its context: dropped after Done,
			// a garbage collection (the parallel tests run some) could find the hold
			// abandoned before its renewal found it lost, and log that instead.
			runtime.KeepAlive(held)
		}
	})
}

// matches reports whether a record matches re.
func (r *records) matches(re *regexp.Regexp) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, m := range r.msgs {
		if re.MatchString(m) {
			return true
		}
	}
	return false
}
