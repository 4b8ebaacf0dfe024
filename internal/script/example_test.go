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
// owner is told how long the lock may stay held, and an unlock sent again after its reply
// was lost (the same hold count expected) is answered as done instead of releasing a hold
// again, the owner's own or the next holder's.
func ExampleScript() {
	srv, err := embedded.Start()
	if err != nil {
		log.Fatal(err)
	}
	defer srv.Close()
	rc := srv.Redis()
	ctx := context.Background()

	acquire := func(owner string) []int64 {
		reply, err := script.AcquireReply(nil, script.RLockAcquire().Exec(ctx, rc, []string{"orders", "relock_wake:{orders}"}, []string{"30000", owner, "", "0"}))
		if err != nil {
			log.Fatal(err)
		}
		return reply
	}
	// unlock releases one of owner's holds, which the client knows to number expected.
	unlock := func(owner, expected string) rueidis.RedisResult {
		return script.RLockUnlock().Exec(ctx, rc,
			[]string{"orders", "redisson_lock__channel:{orders}", "relock_wake:{orders}"}, []string{"0", owner, expected, "publish"})
	}

	// Owners are "<client uuid>:<n>": a hash whose fields have another shape is not a lock.
	const a, b = "6f1d0c2e-3b4a-4c5d-8e9f-0a1b2c3d4e5f:1", "0c9b8a7d-6e5f-4a3b-9c2d-1e0f9a8b7c6d:1"
	fmt.Println("a acquires:", acquire(a))
	fmt.Println("a re-enters:", acquire(a))
	w := acquire(b)
	fmt.Println("b must wait:", w[0] == 0, "at most the lease:", w[1] > 0 && w[1] <= 30000)

	n, _ := unlock(a, "2").AsInt64()
	fmt.Println("a releases one of two holds:", n)
	n, _ = unlock(a, "2").AsInt64() // the same release, sent again
	count, _ := rc.Do(ctx, rc.B().Hget().Key("orders").Field(a).Build()).AsInt64()
	fmt.Println("sent again, it answers:", n, "and a still holds:", count)

	n, _ = unlock(a, "1").AsInt64()
	fmt.Println("a releases its last hold:", n)
	fmt.Println("b acquires:", acquire(b))
	n, _ = unlock(a, "1").AsInt64() // the same release, sent again
	held, _ := rc.Do(ctx, rc.B().Hexists().Key("orders").Field(b).Build()).AsBool()
	fmt.Println("sent again, it answers:", n, "and b still holds:", held)
	// Output:
	// a acquires: [1 1 0]
	// a re-enters: [1 2 0]
	// b must wait: true at most the lease: true
	// a releases one of two holds: 0
	// sent again, it answers: 0 and a still holds: 1
	// a releases its last hold: 1
	// b acquires: [1 1 0]
	// sent again, it answers: 3 and b still holds: true
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
	if _, err := script.AcquireReply(nil, script.RLockAcquire().Exec(ctx, rc, []string{"orders", "relock_wake:{orders}"}, []string{"30000", owner, "", "0"})); err != nil {
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
