package relock_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"log"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/relock-go/relock"
	"github.com/relock-go/relock/embedded"
	"github.com/relock-go/relock/fairlock"
	"github.com/relock-go/relock/rlock"
	"github.com/relock-go/relock/rwlock"
)

// migrationDoc is the migration guide whose tables TestMigrationDocAPI checks.
const migrationDoc = "docs/migration-from-redisson.md"

// migrationAPI holds every relock function, method and error that the migration guide's
// tables name in their "relock API" column, keyed as the guide writes them:
// "package.Func", "package.Var" or "package.Type.Method". The values make the list a
// compile-time check: a name that no longer exists stops this file from compiling.
var migrationAPI = map[string]any{
	"relock.New":                 relock.New,
	"relock.NewOwner":            relock.NewOwner,
	"relock.WithWatchdogTimeout": relock.WithWatchdogTimeout,
	"relock.WithTimeout":         relock.WithTimeout,
	"relock.WithShardedPubSub":   relock.WithShardedPubSub,
	"relock.WithSyncReplicas":    relock.WithSyncReplicas,
	"relock.Client.Lock":         (*relock.Client).Lock,
	"relock.Client.FairLock":     (*relock.Client).FairLock,
	"relock.Client.RWLock":       (*relock.Client).RWLock,
	"relock.Client.Close":        (*relock.Client).Close,
	"relock.Client.ID":           (*relock.Client).ID,
	"relock.ErrNotHeld":          relock.ErrNotHeld,
	"relock.ErrLocked":           relock.ErrLocked,
	"relock.ErrUpgrade":          relock.ErrUpgrade,
	"relock.ErrNotSynced":        relock.ErrNotSynced,
	"relock.ErrClosed":           relock.ErrClosed,

	"rlock.WithLease":          rlock.WithLease,
	"rlock.WithWaitTimeout":    rlock.WithWaitTimeout,
	"fairlock.WithWaitTimeout": fairlock.WithWaitTimeout,
	"rwlock.WithWaitTimeout":   rwlock.WithWaitTimeout,
	"rlock.WithFencing":        rlock.WithFencing,
	"rlock.Mutex.Lock":         (*rlock.Mutex).Lock,
	"rlock.Mutex.TryLock":      (*rlock.Mutex).TryLock,
	"rlock.Mutex.Unlock":       (*rlock.Mutex).Unlock,
	"rlock.Mutex.Do":           (*rlock.Mutex).Do,
	"rlock.Mutex.ForceUnlock":  (*rlock.Mutex).ForceUnlock,
	"rlock.Mutex.IsLocked":     (*rlock.Mutex).IsLocked,
	"rlock.Mutex.IsHeld":       (*rlock.Mutex).IsHeld,
	"rlock.Mutex.HoldCount":    (*rlock.Mutex).HoldCount,
	"rlock.Mutex.TTL":          (*rlock.Mutex).TTL,
	"rlock.Mutex.Name":         (*rlock.Mutex).Name,
	"rlock.Mutex.Token":        (*rlock.Mutex).Token,

	"fairlock.WithLease":         fairlock.WithLease,
	"fairlock.WithRefreshPeriod": fairlock.WithRefreshPeriod,
	"fairlock.Mutex.Lock":        (*fairlock.Mutex).Lock,
	"fairlock.Mutex.TryLock":     (*fairlock.Mutex).TryLock,
	"fairlock.Mutex.Unlock":      (*fairlock.Mutex).Unlock,
	"fairlock.Mutex.Do":          (*fairlock.Mutex).Do,
	"fairlock.Mutex.ForceUnlock": (*fairlock.Mutex).ForceUnlock,
	"fairlock.Mutex.IsLocked":    (*fairlock.Mutex).IsLocked,
	"fairlock.Mutex.IsHeld":      (*fairlock.Mutex).IsHeld,
	"fairlock.Mutex.HoldCount":   (*fairlock.Mutex).HoldCount,
	"fairlock.Mutex.TTL":         (*fairlock.Mutex).TTL,
	"fairlock.Mutex.Name":        (*fairlock.Mutex).Name,

	"rwlock.WithLease":            rwlock.WithLease,
	"rwlock.WithFencing":          rwlock.WithFencing,
	"rwlock.WithWriterPreference": rwlock.WithWriterPreference,
	"rwlock.WithRefreshPeriod":    rwlock.WithRefreshPeriod,
	"rwlock.RWMutex.RLock":        (*rwlock.RWMutex).RLock,
	"rwlock.RWMutex.TryRLock":     (*rwlock.RWMutex).TryRLock,
	"rwlock.RWMutex.RUnlock":      (*rwlock.RWMutex).RUnlock,
	"rwlock.RWMutex.RDo":          (*rwlock.RWMutex).RDo,
	"rwlock.RWMutex.RHoldCount":   (*rwlock.RWMutex).RHoldCount,
	"rwlock.RWMutex.Lock":         (*rwlock.RWMutex).Lock,
	"rwlock.RWMutex.TryLock":      (*rwlock.RWMutex).TryLock,
	"rwlock.RWMutex.Unlock":       (*rwlock.RWMutex).Unlock,
	"rwlock.RWMutex.Do":           (*rwlock.RWMutex).Do,
	"rwlock.RWMutex.HoldCount":    (*rwlock.RWMutex).HoldCount,
	"rwlock.RWMutex.IsLocked":     (*rwlock.RWMutex).IsLocked,
	"rwlock.RWMutex.ForceUnlock":  (*rwlock.RWMutex).ForceUnlock,
	"rwlock.RWMutex.TTL":          (*rwlock.RWMutex).TTL,
	"rwlock.RWMutex.Token":        (*rwlock.RWMutex).Token,
	"rwlock.RWMutex.Name":         (*rwlock.RWMutex).Name,
}

var (
	migrationCode = regexp.MustCompile("`([^`]*)`")
	migrationName = regexp.MustCompile(`^(relock|rlock|fairlock|rwlock)\.[A-Z][A-Za-z]*(\.[A-Z][A-Za-z]*)?$`)
)

// migrationDocNames reads the guide's tables whose last column is "relock API" and returns
// the names in that column, with the line each was found on. A row must name at least one
// API or say "—"; every backticked entry must look like a qualified Go name.
func migrationDocNames(t *testing.T) (names map[string]int, rows int) {
	t.Helper()
	f, err := os.Open(migrationDoc)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()

	names = map[string]int{}
	inTable, header := false, false
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if !strings.HasPrefix(line, "|") {
			inTable = false
			continue
		}
		cells := strings.Split(strings.Trim(line, "|"), "|")
		last := strings.TrimSpace(cells[len(cells)-1])
		switch {
		case !inTable:
			// A table's header row: check it only if it is one of ours.
			inTable, header = true, last == "relock API"
			continue
		case !header:
			continue
		case strings.Trim(line, "|-: ") == "":
			continue // the separator row
		}
		rows++
		found := migrationCode.FindAllStringSubmatch(last, -1)
		if len(found) == 0 && last != "—" {
			t.Errorf("%s:%d: the relock API column holds neither a backticked name nor —: %q", migrationDoc, n, last)
		}
		for _, m := range found {
			if !migrationName.MatchString(m[1]) {
				t.Errorf("%s:%d: %q is not a qualified name such as `rlock.Mutex.TryLock`", migrationDoc, n, m[1])
				continue
			}
			if _, ok := names[m[1]]; !ok {
				names[m[1]] = n
			}
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return names, rows
}

// TestMigrationDocAPI checks the migration guide against the code: every relock name in a
// table's "relock API" column must be in migrationAPI (and so exist, or this file would
// not compile), and every entry of migrationAPI must be used by the guide.
func TestMigrationDocAPI(t *testing.T) {
	names, rows := migrationDocNames(t)
	if rows < 50 {
		t.Fatalf("found %d mapping rows in %s; the tables or their \"relock API\" header are missing", rows, migrationDoc)
	}
	for name, line := range names {
		if _, ok := migrationAPI[name]; !ok {
			t.Errorf("%s:%d: %s is not a relock API listed in migrationAPI", migrationDoc, line, name)
		}
	}
	for name, v := range migrationAPI {
		if v == nil {
			t.Errorf("migrationAPI[%q] is nil", name)
		}
		if _, ok := names[name]; !ok {
			t.Errorf("migrationAPI lists %s, which %s does not name", name, migrationDoc)
		}
	}
	t.Logf("%d mapping rows name %d relock APIs", rows, len(names))
}

// tryLock(waitTime, leaseTime, unit): the wait is a context deadline and the lease an
// option. A wait that runs out is context.DeadlineExceeded where Redisson returns false.
func ExampleClient_migrationTryLockWithWait() {
	srv, err := embedded.Start()
	if err != nil {
		log.Fatal(err)
	}
	defer srv.Close()
	mu := srv.Client().Lock("invoice:7")

	other, err := mu.Lock(context.Background()) // someone else holds it
	if err != nil {
		log.Fatal(err)
	}

	// lock.tryLock(100, 2000, TimeUnit.MILLISECONDS) while it is held:
	wctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	_, err = mu.Lock(wctx, rlock.WithLease(2*time.Second))
	cancel()
	fmt.Println("wait ran out:", errors.Is(err, context.DeadlineExceeded))

	if err := mu.Unlock(other); err != nil {
		log.Fatal(err)
	}

	// The same call once the lock is free:
	wctx, cancel = context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	held, err := mu.Lock(wctx, rlock.WithLease(2*time.Second))
	if err != nil {
		log.Fatal(err)
	}
	ttl, _ := mu.TTL(held)
	fmt.Println("acquired, lease at most 2s:", ttl > 0 && ttl <= 2*time.Second)
	fmt.Println("unlock:", mu.Unlock(held))
	// Output:
	// wait ran out: true
	// acquired, lease at most 2s: true
	// unlock: <nil>
}

// A wait bounded by a timer instead of a deadline: once the timer is stopped, the hold's
// context lives until Unlock, past the wait time. (With context.WithTimeout the hold's
// context, derived from it, would end at the wait deadline.)
func ExampleClient_migrationWaitThenHold() {
	srv, err := embedded.Start()
	if err != nil {
		log.Fatal(err)
	}
	defer srv.Close()
	mu := srv.Client().Lock("report")

	// Like tryLock(waitTime, unit): the bound covers the wait only, not the hold.
	held, err := mu.Lock(context.Background(), rlock.WithWaitTimeout(100*time.Millisecond))
	if err != nil {
		log.Fatal(err) // the wait ran out (context.DeadlineExceeded), or Redis failed
	}

	time.Sleep(200 * time.Millisecond) // work past the wait time
	fmt.Println("hold context alive after the wait time:", held.Err() == nil)
	fmt.Println("unlock:", mu.Unlock(held))
	fmt.Println("hold context after unlock:", held.Err())
	// Output:
	// hold context alive after the wait time: true
	// unlock: <nil>
	// hold context after unlock: context canceled
}

// Thread ownership becomes context ownership: isHeldByCurrentThread is IsHeld with the
// hold's context, IllegalMonitorStateException is ErrNotHeld, and any goroutine may unlock
// with the owner's context.
func ExampleClient_migrationOwnership() {
	srv, err := embedded.Start()
	if err != nil {
		log.Fatal(err)
	}
	defer srv.Close()
	mu := srv.Client().Lock("orders:42")

	held, err := mu.Lock(context.Background())
	if err != nil {
		log.Fatal(err)
	}
	ok, _ := mu.IsHeld(held)
	fmt.Println("held by this owner:", ok)
	ok, _ = mu.IsHeld(relock.NewOwner(held))
	fmt.Println("held by another owner:", ok)

	err = mu.Unlock(relock.NewOwner(held)) // Redisson: IllegalMonitorStateException
	fmt.Println("unlock by another owner:", errors.Is(err, relock.ErrNotHeld))

	done := make(chan error)
	go func() { done <- mu.Unlock(held) }()
	fmt.Println("unlock from another goroutine:", <-done)
	// Output:
	// held by this owner: true
	// held by another owner: false
	// unlock by another owner: true
	// unlock from another goroutine: <nil>
}

// lockInterruptibly: interrupting the waiting thread is cancelling the waiter's context.
func ExampleClient_migrationLockInterruptibly() {
	srv, err := embedded.Start()
	if err != nil {
		log.Fatal(err)
	}
	defer srv.Close()
	c := srv.Client()
	mu := c.Lock("batch")

	held, err := mu.Lock(context.Background())
	if err != nil {
		log.Fatal(err)
	}
	ctx, interrupt := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() {
		_, err := mu.Lock(ctx)
		errc <- err
	}()
	for c.Stats().Waiting == 0 {
		time.Sleep(time.Millisecond)
	}
	interrupt() // Thread.interrupt()
	err = <-errc
	fmt.Println("waiter interrupted:", errors.Is(err, context.Canceled))
	fmt.Println("unlock:", mu.Unlock(held))
	// Output:
	// waiter interrupted: true
	// unlock: <nil>
}

// RFencedLock: lockAndGetToken is Lock and Token. Unlike Redisson, a re-entry keeps its
// hold's token instead of drawing a new one.
func ExampleClient_migrationFencedLock() {
	srv, err := embedded.Start()
	if err != nil {
		log.Fatal(err)
	}
	defer srv.Close()
	mu := srv.Client().Lock("ledger", rlock.WithFencing()) // getFencedLock("ledger")

	held, err := mu.Lock(context.Background())
	if err != nil {
		log.Fatal(err)
	}
	first, _ := mu.Token(held)
	held, err = mu.Lock(held) // re-entry
	if err != nil {
		log.Fatal(err)
	}
	again, _ := mu.Token(held)
	fmt.Println("first token:", first, "after re-entry:", again)
	_ = mu.Unlock(held)
	_ = mu.Unlock(held)

	next, err := mu.Lock(context.Background())
	if err != nil {
		log.Fatal(err)
	}
	third, _ := mu.Token(next)
	fmt.Println("next holder's token:", third)
	_, ok := mu.Token(context.Background())
	fmt.Println("token without a hold:", ok)
	_ = mu.Unlock(next)
	// Output:
	// first token: 1 after re-entry: 1
	// next holder's token: 2
	// token without a hold: false
}

// RReadWriteLock: readLock() is RLock, writeLock() is Lock. A reader asking for the write
// lock, which blocks in Redisson, fails at once with ErrUpgrade.
func ExampleClient_migrationReadWriteLock() {
	srv, err := embedded.Start()
	if err != nil {
		log.Fatal(err)
	}
	defer srv.Close()
	rw := srv.Client().RWLock("config") // getReadWriteLock("config")

	reader, err := rw.RLock(context.Background()) // readLock().lock()
	if err != nil {
		log.Fatal(err)
	}
	_, err = rw.Lock(reader) // writeLock().lock() on the same thread
	fmt.Println("upgrade refused:", errors.Is(err, relock.ErrUpgrade))
	_, err = rw.TryLock(context.Background()) // writeLock().tryLock() elsewhere
	fmt.Println("writer locked out:", errors.Is(err, relock.ErrLocked))
	if err := rw.RUnlock(reader); err != nil {
		log.Fatal(err)
	}

	writer, err := rw.Lock(context.Background()) // writeLock().lock()
	if err != nil {
		log.Fatal(err)
	}
	writer, _ = rw.RLock(writer) // readLock().lock(): downgrade
	_ = rw.Unlock(writer)        // writeLock().unlock()
	reads, _ := rw.RHoldCount(writer)
	writes, _ := rw.HoldCount(writer)
	fmt.Println("after the downgrade: read holds", reads, "write holds", writes)
	_ = rw.RUnlock(writer)
	// Output:
	// upgrade refused: true
	// writer locked out: true
	// after the downgrade: read holds 1 write holds 0
}

// Lease loss, which Redisson does not report: a hold whose key is deleted behind its back
// (here by forceUnlock) ends its context with ErrLeaseLost at the next renewal, and its
// unlock then fails with ErrNotHeld, as Redisson's would with IllegalMonitorStateException.
func ExampleClient_migrationLeaseLost() {
	srv, err := embedded.Start(relock.WithWatchdogTimeout(150 * time.Millisecond))
	if err != nil {
		log.Fatal(err)
	}
	defer srv.Close()
	mu := srv.Client().Lock("nightly")

	held, err := mu.Lock(context.Background())
	if err != nil {
		log.Fatal(err)
	}
	deleted, err := mu.ForceUnlock(context.Background()) // an operator's forceUnlock()
	fmt.Println("force unlocked:", deleted, err)

	<-held.Done()
	fmt.Println("hold context cause:", context.Cause(held))
	fmt.Println("lease lost:", errors.Is(context.Cause(held), relock.ErrLeaseLost))
	fmt.Println("unlock:", errors.Is(mu.Unlock(held), relock.ErrNotHeld))
	// Output:
	// force unlocked: true <nil>
	// hold context cause: lease lost
	// lease lost: true
	// unlock: true
}

// Redisson's Config settings become options of relock.New: lockWatchdogTimeout,
// timeout, and the cluster's shardedSubscriptionMode.
func ExampleNew_migrationConfig() {
	srv, err := embedded.Start()
	if err != nil {
		log.Fatal(err)
	}
	defer srv.Close()

	c, err := relock.New(srv.Redis(),
		relock.WithWatchdogTimeout(10*time.Second), // config.setLockWatchdogTimeout(10000)
		relock.WithTimeout(3*time.Second),          // config.useSingleServer().setTimeout(3000)
		relock.WithShardedPubSub(false),            // setShardedSubscriptionMode(ShardedSubscriptionMode.OFF)
	)
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()

	mu := c.Lock("orders:42")
	held, err := mu.Lock(context.Background())
	if err != nil {
		log.Fatal(err)
	}
	ttl, _ := mu.TTL(held)
	fmt.Println("lease is the watchdog timeout:", ttl > 9*time.Second && ttl <= 10*time.Second)
	fmt.Println("unlock:", mu.Unlock(held))
	// Output:
	// lease is the watchdog timeout: true
	// unlock: <nil>
}

// checkLockSyncedSlaves: with WithSyncReplicas an acquisition that no replica confirms is
// undone and fails with ErrNotSynced, as Redisson's fails with NoSyncedSlavesException.
// The in-process Redis has no replicas, so none ever confirms.
func ExampleWithSyncReplicas_migration() {
	srv, err := embedded.Start()
	if err != nil {
		log.Fatal(err)
	}
	defer srv.Close()

	c, err := relock.New(srv.Redis(), relock.WithSyncReplicas(1, 50*time.Millisecond))
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()

	mu := c.Lock("orders:42")
	_, err = mu.Lock(context.Background())
	fmt.Println("not synced:", errors.Is(err, relock.ErrNotSynced))
	locked, _ := mu.IsLocked(context.Background())
	fmt.Println("left locked:", locked)
	// Output:
	// not synced: true
	// left locked: false
}
