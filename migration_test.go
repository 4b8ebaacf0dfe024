package relock_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"log"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/relock-go/relock"
	"github.com/relock-go/relock/countdown"
	"github.com/relock-go/relock/embedded"
	"github.com/relock-go/relock/fairlock"
	"github.com/relock-go/relock/multilock"
	"github.com/relock-go/relock/rlock"
	"github.com/relock-go/relock/rwlock"
	"github.com/relock-go/relock/semaphore"
	"github.com/relock-go/relock/spinlock"
)

// migrationDoc is the migration guide whose tables TestMigrationDocAPI checks.
const migrationDoc = "docs/migration-from-redisson.md"

// migrationAPI holds every relock function, method and error that the migration guide's
// tables name in their "relock API" column, keyed as the guide writes them:
// "package.Func", "package.Var" or "package.Type.Method". The values make the list a
// compile-time check: a name that no longer exists stops this file from compiling.
var migrationAPI = map[string]any{
	"relock.New":                          relock.New,
	"relock.Dial":                         relock.Dial,
	"relock.WithReleaseOnClose":           relock.WithReleaseOnClose,
	"relock.WithLogger":                   relock.WithLogger,
	"relock.WithObserver":                 relock.WithObserver,
	"rlock.Mutex.Locker":                  (*rlock.Mutex).Locker,
	"relock.NewOwner":                     relock.NewOwner,
	"relock.WithWatchdogTimeout":          relock.WithWatchdogTimeout,
	"relock.WithTimeout":                  relock.WithTimeout,
	"relock.WithShardedPubSub":            relock.WithShardedPubSub,
	"relock.WithSyncReplicas":             relock.WithSyncReplicas,
	"relock.Client.Lock":                  (*relock.Client).Lock,
	"relock.Client.FairLock":              (*relock.Client).FairLock,
	"relock.Client.RWLock":                (*relock.Client).RWLock,
	"relock.Client.Semaphore":             (*relock.Client).Semaphore,
	"relock.Client.SpinLock":              (*relock.Client).SpinLock,
	"relock.Client.MultiLock":             (*relock.Client).MultiLock,
	"relock.Member":                       relock.Member[*rlock.Mutex],
	"relock.ReadMember":                   relock.ReadMember,
	"relock.WriteMember":                  relock.WriteMember,
	"multilock.MultiLock.Lock":            (*multilock.MultiLock).Lock,
	"multilock.MultiLock.TryLock":         (*multilock.MultiLock).TryLock,
	"multilock.MultiLock.Unlock":          (*multilock.MultiLock).Unlock,
	"multilock.MultiLock.Do":              (*multilock.MultiLock).Do,
	"spinlock.WithBackOff":                spinlock.WithBackOff,
	"spinlock.DefaultFirstBackOff":        spinlock.DefaultFirstBackOff,
	"spinlock.DefaultMostBackOff":         spinlock.DefaultMostBackOff,
	"spinlock.Mutex.Lock":                 (*spinlock.Mutex).Lock,
	"spinlock.Mutex.TryLock":              (*spinlock.Mutex).TryLock,
	"spinlock.Mutex.Unlock":               (*spinlock.Mutex).Unlock,
	"spinlock.Mutex.ForceUnlock":          (*spinlock.Mutex).ForceUnlock,
	"relock.Client.CountDownLatch":        (*relock.Client).CountDownLatch,
	"relock.ErrInvalidCount":              relock.ErrInvalidCount,
	"relock.ErrWrongType":                 relock.ErrWrongType,
	"semaphore.Weighted.TrySetPermits":    (*semaphore.Weighted).TrySetPermits,
	"semaphore.Weighted.Acquire":          (*semaphore.Weighted).Acquire,
	"semaphore.Weighted.TryAcquire":       (*semaphore.Weighted).TryAcquire,
	"semaphore.Weighted.Release":          (*semaphore.Weighted).Release,
	"semaphore.Weighted.AddPermits":       (*semaphore.Weighted).AddPermits,
	"semaphore.Weighted.AvailablePermits": (*semaphore.Weighted).AvailablePermits,
	"semaphore.Weighted.Drain":            (*semaphore.Weighted).Drain,
	"semaphore.Weighted.Name":             (*semaphore.Weighted).Name,
	"semaphore.Weighted.AcquireLease":     (*semaphore.Weighted).AcquireLease,
	"semaphore.Weighted.TryAcquireLease":  (*semaphore.Weighted).TryAcquireLease,
	"semaphore.Weighted.ReleaseLease":     (*semaphore.Weighted).ReleaseLease,
	"semaphore.Weighted.PermitIDs":        (*semaphore.Weighted).PermitIDs,
	"semaphore.WithWaitTimeout":           semaphore.WithWaitTimeout,
	"countdown.Latch.TrySetCount":         (*countdown.Latch).TrySetCount,
	"countdown.Latch.CountDown":           (*countdown.Latch).CountDown,
	"countdown.Latch.Count":               (*countdown.Latch).Count,
	"countdown.Latch.Await":               (*countdown.Latch).Await,
	"countdown.Latch.Name":                (*countdown.Latch).Name,
	"relock.Client.Close":                 (*relock.Client).Close,
	"relock.Client.ID":                    (*relock.Client).ID,
	"relock.ErrNotHeld":                   relock.ErrNotHeld,
	"relock.ErrLeaseLost":                 relock.ErrLeaseLost,
	"relock.ErrLocked":                    relock.ErrLocked,
	"relock.ErrUpgrade":                   relock.ErrUpgrade,
	"relock.ErrNotSynced":                 relock.ErrNotSynced,
	"relock.ErrClosed":                    relock.ErrClosed,

	"rlock.WithLease":         rlock.WithLease,
	"rlock.WithWaitTimeout":   rlock.WithWaitTimeout,
	"rlock.WithFencing":       rlock.WithFencing,
	"rlock.Mutex.Lock":        (*rlock.Mutex).Lock,
	"rlock.Mutex.TryLock":     (*rlock.Mutex).TryLock,
	"rlock.Mutex.Unlock":      (*rlock.Mutex).Unlock,
	"rlock.Mutex.Do":          (*rlock.Mutex).Do,
	"rlock.Mutex.ForceUnlock": (*rlock.Mutex).ForceUnlock,
	"rlock.Mutex.IsLocked":    (*rlock.Mutex).IsLocked,
	"rlock.Mutex.IsHeld":      (*rlock.Mutex).IsHeld,
	"rlock.Mutex.HoldCount":   (*rlock.Mutex).HoldCount,
	"rlock.Mutex.TTL":         (*rlock.Mutex).TTL,
	"rlock.Mutex.Extend":      (*rlock.Mutex).Extend,
	"rlock.Mutex.Name":        (*rlock.Mutex).Name,
	"rlock.Mutex.Token":       (*rlock.Mutex).Token,

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
	migrationName = regexp.MustCompile(`^(relock|rlock|fairlock|rwlock|semaphore|countdown|spinlock|multilock)\.[A-Z][A-Za-z]*(\.[A-Z][A-Za-z]*)?$`)
	// migrationCall finds a call of an exported function or method: "mu.TryLock(".
	migrationCall = regexp.MustCompile(`\b([A-Za-z_]\w*)\.([A-Z]\w*)\(`)
	// migrationQualified finds a relock name used as a value: "relock.ErrLocked".
	migrationQualified = regexp.MustCompile(`\b(relock|rlock|fairlock|rwlock|semaphore|countdown|spinlock|multilock)\.([A-Z]\w*)\b`)
)

// migrationReceivers maps what the tables' code calls methods on to the type or package
// of the API it calls: the variables the guide's conventions name (c, mu, fm, rw) and
// the packages. Calls on the standard library's packages and on contexts map to "", and
// are not relock APIs. A receiver missing here fails the test, so that a new one is
// classified rather than skipped.
var migrationReceivers = map[string]string{
	"c":         "relock.Client",
	"mu":        "rlock.Mutex",
	"fm":        "fairlock.Mutex",
	"rw":        "rwlock.RWMutex",
	"relock":    "relock",
	"rlock":     "rlock",
	"fairlock":  "fairlock",
	"rwlock":    "rwlock",
	"context":   "",
	"errors":    "",
	"time":      "",
	"held":      "", // a hold's context: Done, Err
	"s":         "semaphore.Weighted",
	"sl":        "spinlock.Mutex",
	"ml":        "multilock.MultiLock",
	"multilock": "multilock",
	"spinlock":  "spinlock",
	"cdl":       "countdown.Latch",
	"semaphore": "semaphore",
	"countdown": "countdown",
}

// migrationRow is one mapping row of the guide's tables.
type migrationRow struct {
	line  int
	code  string   // the backticked code of the relock column
	notes string   // the backticked code of the other columns but the Redisson one
	apis  []string // the names in the relock API column
}

// migrationDocRows reads the guide's tables whose last column is "relock API". A row must
// name at least one API or say "—"; every backticked entry of that column must look like
// a qualified Go name.
func migrationDocRows(t *testing.T) []migrationRow {
	t.Helper()
	f, err := os.Open(migrationDoc)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()

	var rows []migrationRow
	inTable, header := false, false
	spans := func(cell string) string {
		var code []string
		for _, m := range migrationCode.FindAllStringSubmatch(cell, -1) {
			code = append(code, m[1])
		}
		return strings.Join(code, "\n")
	}
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
			if header && (len(cells) != 4 || strings.TrimSpace(cells[1]) != "relock") {
				t.Fatalf("%s:%d: a mapping table's columns are the Redisson name, relock, notes and relock API: %q", migrationDoc, n, line)
			}
			continue
		case !header:
			continue
		case strings.Trim(line, "|-: ") == "":
			continue // the separator row
		}
		if len(cells) != 4 {
			t.Errorf("%s:%d: %d cells, want 4: %q", migrationDoc, n, len(cells), line)
			continue
		}
		row := migrationRow{line: n, code: spans(cells[1]), notes: spans(cells[2])}
		found := migrationCode.FindAllStringSubmatch(last, -1)
		if len(found) == 0 && last != "—" {
			t.Errorf("%s:%d: the relock API column holds neither a backticked name nor —: %q", migrationDoc, n, last)
		}
		for _, m := range found {
			if !migrationName.MatchString(m[1]) {
				t.Errorf("%s:%d: %q is not a qualified name such as `rlock.Mutex.TryLock`", migrationDoc, n, m[1])
				continue
			}
			row.apis = append(row.apis, m[1])
		}
		rows = append(rows, row)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return rows
}

// migrationCalls returns the relock APIs that code calls, as "package.Func" or
// "package.Type.Method", and the receivers it does not know.
func migrationCalls(code string) (apis, unknown []string) {
	for _, m := range migrationCall.FindAllStringSubmatch(code, -1) {
		owner, ok := migrationReceivers[m[1]]
		switch {
		case !ok:
			unknown = append(unknown, m[1]+"."+m[2])
		case owner != "":
			apis = append(apis, owner+"."+m[2])
		}
	}
	return apis, unknown
}

// TestMigrationDocAPI checks the migration guide's tables against the code and against
// themselves: every relock name in a table's "relock API" column must be in migrationAPI
// (and so exist, or this file would not compile), and every entry of migrationAPI must be
// used by the guide; within a row, every relock function or method that the relock column
// calls must be among the row's APIs, and every API the row names must be used in its
// code or notes, so that the column neither misses nor invents what the code does.
func TestMigrationDocAPI(t *testing.T) {
	rows := migrationDocRows(t)
	if len(rows) < 50 {
		t.Fatalf("found %d mapping rows in %s; the tables or their \"relock API\" header are missing", len(rows), migrationDoc)
	}
	names := map[string]int{}
	for _, row := range rows {
		for _, name := range row.apis {
			if _, ok := names[name]; !ok {
				names[name] = row.line
			}
		}

		calls, unknown := migrationCalls(row.code)
		for _, u := range unknown {
			t.Errorf("%s:%d: the relock column calls %s( on a receiver that migrationReceivers does not know", migrationDoc, row.line, u)
		}
		for _, call := range calls {
			if !slices.Contains(row.apis, call) {
				t.Errorf("%s:%d: the relock column calls %s, which the row's relock API column does not name %v", migrationDoc, row.line, call, row.apis)
			}
		}

		used := map[string]bool{}
		noteCalls, unknown := migrationCalls(row.notes)
		for _, u := range unknown {
			t.Errorf("%s:%d: the notes call %s( on a receiver that migrationReceivers does not know", migrationDoc, row.line, u)
		}
		for _, api := range append(calls, noteCalls...) {
			used[api] = true
		}
		for _, m := range migrationQualified.FindAllStringSubmatch(row.code+"\n"+row.notes, -1) {
			used[m[0]] = true
		}
		for _, api := range row.apis {
			if !used[api] {
				t.Errorf("%s:%d: the row names %s, which neither its relock code nor its notes use", migrationDoc, row.line, api)
			}
		}
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
	t.Logf("%d mapping rows name %d relock APIs", len(rows), len(names))
}

// migrationExamples parses this file and returns the source of each Example function's
// body, by name.
func migrationExamples(t *testing.T) map[string]string {
	t.Helper()
	const self = "migration_test.go"
	src, err := os.ReadFile(self)
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, self, src, parser.ParseComments)
	if err != nil {
		t.Fatal(err)
	}
	bodies := map[string]string{}
	for _, d := range f.Decls {
		if fn, ok := d.(*ast.FuncDecl); ok && strings.HasPrefix(fn.Name.Name, "Example") && fn.Body != nil {
			bodies[fn.Name.Name] = string(src[fset.Position(fn.Body.Lbrace).Offset+1 : fset.Position(fn.Body.Rbrace).Offset])
		}
	}
	return bodies
}

// codeLines returns the lines of code with their indentation and inner runs of spaces
// dropped (gofmt aligns comments differently in a function body), blank lines left out.
func codeLines(code string) []string {
	var lines []string
	for l := range strings.Lines(code) {
		if l = strings.Join(strings.Fields(l), " "); l != "" {
			lines = append(lines, l)
		}
	}
	return lines
}

// TestMigrationDocCode keeps the guide's Go code compiling: every ```go block must be the
// body, or a run of lines of the body, of an Example function in this file, which the
// compiler checks with the rest of the tests (and go test runs when it has an Output
// comment). Every Example the guide names must exist here too.
func TestMigrationDocCode(t *testing.T) {
	doc, err := os.ReadFile(migrationDoc)
	if err != nil {
		t.Fatal(err)
	}
	examples := migrationExamples(t)

	blocks := 0
	rest := string(doc)
	for {
		_, after, ok := strings.Cut(rest, "```go\n")
		if !ok {
			break
		}
		block, tail, ok := strings.Cut(after, "```")
		if !ok {
			t.Fatalf("%s: a ```go block is not closed", migrationDoc)
		}
		rest = tail
		blocks++
		want := codeLines(block)
		found := false
		for _, body := range examples {
			got := codeLines(body)
			for i := 0; i+len(want) <= len(got) && !found; i++ {
				found = slices.Equal(got[i:i+len(want)], want)
			}
		}
		if !found {
			t.Errorf("%s: this ```go block is not the code of an Example in migration_test.go, so nothing shows it compiles:\n%s", migrationDoc, block)
		}
	}
	if blocks == 0 {
		t.Errorf("%s has no ```go block; the test would check nothing", migrationDoc)
	}

	for _, name := range regexp.MustCompile("`(Example\\w+)`").FindAllStringSubmatch(string(doc), -1) {
		if _, ok := examples[name[1]]; !ok {
			t.Errorf("%s names %s, which migration_test.go does not define", migrationDoc, name[1])
		}
	}
}

// The guide's first block, kept compiling here. It needs a Redis at redis:6379, so it has
// no output to check: go test compiles it without running it.
func ExampleNew_migrationClient() {
	ctx := context.Background()

	rc, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{"redis:6379"}})
	if err != nil {
		log.Fatal(err)
	}
	defer rc.Close() // after c.Close: deferred calls run last first
	c, err := relock.New(rc, relock.WithWatchdogTimeout(30*time.Second))
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()

	mu := c.Lock("orders:42") // redisson.getLock("orders:42")
	held, err := mu.Lock(ctx) // lock.lock()
	if err != nil {
		log.Fatal(err)
	}
	defer mu.Unlock(held) // lock.unlock() in a finally block
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

	done := make(chan error, 1)
	go func() { done <- mu.Unlock(held) }()
	select {
	case err := <-done:
		fmt.Println("unlock from another goroutine:", err)
	case <-time.After(30 * time.Second):
		log.Fatal("the unlock from another goroutine did not return")
	}
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
	exampleWait("the waiter parked", func() bool { return c.PubSubStats().Waiting == 1 })
	interrupt() // Thread.interrupt()
	select {
	case err := <-errc:
		fmt.Println("waiter interrupted:", errors.Is(err, context.Canceled))
	case <-time.After(30 * time.Second):
		log.Fatal("the interrupted waiter did not return")
	}
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
	srv, err := embedded.Start(relock.WithWatchdogTimeout(900 * time.Millisecond))
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

	select {
	case <-held.Done():
	case <-time.After(30 * time.Second):
		log.Fatal("the lost hold's context did not end")
	}
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
