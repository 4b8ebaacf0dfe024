package script_test

import (
	"context"
	"fmt"
	"log"
	"strings"

	"github.com/redis/rueidis"

	"github.com/relock-go/relock/embedded"
	"github.com/relock-go/relock/internal/script"
)

// The scripts are the whole protocol on the Redis side; a lock package calls them with a
// lock's keys and an owner. Here the reentrant lock's acquire and unlock by hand: a second
// owner is told how long the lock may stay held, and an unlock retried after its reply was
// lost is answered from the unlock latch instead of releasing the next holder's lock.
func ExampleScript() {
	srv, err := embedded.Start()
	if err != nil {
		log.Fatal(err)
	}
	defer srv.Close()
	rc := srv.Redis()
	ctx := context.Background()

	acquire := func(owner string) []int64 {
		reply, err := script.RLockAcquire().Exec(ctx, rc, []string{"orders"}, []string{"30000", owner}).AsIntSlice()
		if err != nil {
			log.Fatal(err)
		}
		return reply
	}
	unlock := func(owner, requestID string) rueidis.RedisResult {
		return script.RLockUnlock().Exec(ctx, rc,
			[]string{"orders", "redisson_lock__channel:{orders}", "redisson_unlock_latch:{orders}:" + requestID},
			[]string{"0", owner, "6000", "publish"})
	}

	// Owners are "<client uuid>:<n>": a hash whose fields have another shape is not a lock.
	const a, b = "6f1d0c2e-3b4a-4c5d-8e9f-0a1b2c3d4e5f:1", "0c9b8a7d-6e5f-4a3b-9c2d-1e0f9a8b7c6d:1"
	fmt.Println("a acquires:", acquire(a))
	w := acquire(b)
	fmt.Println("b must wait:", w[0] == 0, "at most the lease:", w[1] > 0 && w[1] <= 30000)

	n, _ := unlock(a, "req-1").AsInt64()
	fmt.Println("a releases:", n)
	fmt.Println("b acquires:", acquire(b))

	n, _ = unlock(a, "req-1").AsInt64() // the same request, sent again
	fmt.Println("a's retried unlock answers:", n)
	held, _ := rc.Do(ctx, rc.B().Hexists().Key("orders").Field(b).Build()).AsBool()
	fmt.Println("b still holds:", held)

	_, err = unlock(a, "req-2").AsInt64()
	fmt.Println("a's new unlock finds no hold:", rueidis.IsRedisNil(err))
	// Output:
	// a acquires: [1 1 0]
	// b must wait: true at most the lease: true
	// a releases: 1
	// b acquires: [1 1 0]
	// a's retried unlock answers: 1
	// b still holds: true
	// a's new unlock finds no hold: true
}

// Source and SHA1 let a caller send many calls of a script in one round trip, as the
// watchdog does: EVALSHA for each, then EVAL for those the server answered NOSCRIPT (it
// has not seen the script since it started, or since SCRIPT FLUSH).
func ExampleScript_pipeline() {
	srv, err := embedded.Start()
	if err != nil {
		log.Fatal(err)
	}
	defer srv.Close()
	rc := srv.Redis()
	ctx := context.Background()
	const owner = "6f1d0c2e-3b4a-4c5d-8e9f-0a1b2c3d4e5f:1"
	if _, err := script.RLockAcquire().Exec(ctx, rc, []string{"orders"}, []string{"30000", owner}).AsIntSlice(); err != nil {
		log.Fatal(err)
	}

	state := script.RLockState()
	names := []string{"orders", "invoices"}
	build := func(name string, sha bool) rueidis.Completed {
		if sha {
			return rc.B().Evalsha().Sha1(state.SHA1).Numkeys(1).Key(name).Arg(owner, "rlock").Build()
		}
		return rc.B().Eval().Script(state.Source).Numkeys(1).Key(name).Arg(owner, "rlock").Build()
	}
	cmds := make(rueidis.Commands, len(names))
	for i, name := range names {
		cmds[i] = build(name, true)
	}
	results := rc.DoMulti(ctx, cmds...)
	for i, r := range results {
		if err, ok := rueidis.IsRedisErr(r.Error()); ok && strings.HasPrefix(err.Error(), "NOSCRIPT") {
			fmt.Println(names[i], "answered NOSCRIPT: sent again as EVAL")
			results[i] = rc.Do(ctx, build(names[i], false))
		}
	}
	for i, r := range results {
		st, err := r.AsIntSlice()
		if err != nil {
			log.Fatal(err)
		}
		fmt.Printf("%s: exists %d, the owner holds %d\n", names[i], st[0], st[1])
	}
	// Output:
	// orders answered NOSCRIPT: sent again as EVAL
	// invoices answered NOSCRIPT: sent again as EVAL
	// orders: exists 1, the owner holds 1
	// invoices: exists 0, the owner holds 0
}
