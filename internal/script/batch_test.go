package script_test

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/relock-go/relock/internal/redistest"
	"github.com/relock-go/relock/internal/script"
)

// Batch sends its calls with EVALSHA and sends again, with EVAL, those that met NOSCRIPT
// (a flushed or restarted server); it returns each call's own result in the order of the
// calls, and how many calls it sent again.
func TestBatchSendsNoScriptCallsAgain(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		rc := b.Client(t)
		ctx := redistest.Context(t, time.Minute)
		holdAt(t, rc, "{batch}:held", 2)
		redistest.MustDo(t, rc, "SCRIPT", "FLUSH")
		// The first and the last call's script is unknown to the server; the middle one's
		// is loaded.
		redistest.MustDo(t, rc, "SCRIPT", "LOAD", script.RLockRenew().Source)
		state := func(key string) script.Call {
			return script.Call{Script: script.RLockState(), Keys: []string{key}, Args: []string{holder, "rlock"}}
		}
		calls := []script.Call{
			state("{batch}:held"),
			{Script: script.RLockRenew(), Keys: []string{"{batch}:absent"}, Args: []string{"60000", holder}},
			state("{batch}:absent"),
		}
		results, resent := script.Batch(ctx, rc, calls)
		if resent != 2 {
			t.Errorf("%d calls sent again, want the 2 that met NOSCRIPT", resent)
		}
		if len(results) != len(calls) {
			t.Fatalf("%d results, want one per call", len(results))
		}
		for i, want := range [][]int64{{1, 2}, {0}, {0, 0}} {
			got, err := results[i].AsIntSlice()
			if len(got) > len(want) {
				got = got[:len(want)] // a state's PTTL
			}
			if err != nil || !slices.Equal(got, want) {
				t.Errorf("call %d: %v, %v; want %v", i, got, err, want)
			}
		}

		// With every script known, one round trip and nothing sent again.
		results, resent = script.Batch(ctx, rc, calls)
		if resent != 0 || len(results) != len(calls) {
			t.Errorf("with the scripts loaded: %d results, %d sent again; want 3 and 0", len(results), resent)
		}
		if got, err := results[0].AsIntSlice(); err != nil || len(got) < 2 || got[1] != 2 {
			t.Errorf("call 0 with the scripts loaded: %v, %v", got, err)
		}
	})
}

// Batch sends again only the calls that met NOSCRIPT: a call the server ran and answered
// with another error (here a lease that is not a number) is not run a second time, and
// counts in no resend; the other calls keep their own results.
func TestBatchSendsAgainOnlyTheCallsThatMetNoScript(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		rc := b.Client(t)
		ctx := redistest.Context(t, time.Minute)
		holdAt(t, rc, "{again}:held", 1)
		redistest.MustDo(t, rc, "SCRIPT", "LOAD", script.RLockRenew().Source)
		calls := []script.Call{
			{Script: script.RLockRenew(), Keys: []string{"{again}:held"}, Args: []string{"not a number", holder}},
			{Script: script.RLockRenew(), Keys: []string{"{again}:held"}, Args: []string{"60000", holder}},
		}
		results, resent := script.Batch(ctx, rc, calls)
		if resent != 0 {
			t.Errorf("%d calls sent again; want none, no call met NOSCRIPT", resent)
		}
		if len(results) != len(calls) {
			t.Fatalf("%d results, want one per call", len(results))
		}
		if _, ok := rueidis.IsRedisErr(results[0].Error()); !ok {
			t.Errorf("the call with a bad lease: %v; want the server's error", results[0].Error())
		}
		if got, err := results[1].AsIntSlice(); err != nil || !slices.Equal(got, []int64{1}) {
			t.Errorf("the good call: %v, %v; want [1]", got, err)
		}
	})
}

// Batch returns by the time its context ends, whatever holds a call up: here a dial of the
// server's connection that the context does not bound (as the client's own redial after a
// connection fails), to a server that does not answer. The call answers the context's
// error, and is not sent once the dial goes on: a renewal the watchdog gave up on at its
// round's deadline must not land later.
func TestBatchEndsWithItsContextWhileTheServerIsBeingDialled(t *testing.T) {
	redistest.Real(t, func(t *testing.T, b *redistest.Backend) {
		var d redistest.Dials
		rc := b.ClientWith(t, func(o *rueidis.ClientOption) {
			d.Tune(o)
			o.PipelineMultiplex = -1 // one connection, so that the call waits for its dial
		})
		const key = "{dialled}:held"
		redistest.MustDo(t, rc, "HSET", key, holder, "1")
		redistest.MustDo(t, rc, "PEXPIRE", key, "60000")
		resume := d.RedialPaused(t, rc, b.Server) // resumed at the test's cleanup
		call := script.Call{Script: script.RLockRenew(), Keys: []string{key}, Args: []string{"600000", holder}}
		ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
		defer cancel()
		returned := make(chan []rueidis.RedisResult, 1)
		go func() {
			results, _ := script.Batch(ctx, rc, []script.Call{call})
			returned <- results
		}()
		results := redistest.Recv(t, returned, 5*time.Second, "Batch's return, its context of 300ms long over")
		if len(results) != 1 {
			t.Fatalf("%d results; want one, for the one call", len(results))
		}
		if err := results[0].Error(); !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("the call held up answered %v; want the context's error, context.DeadlineExceeded", err)
		}
		resume()
		if redistest.Await(time.Second, func() bool { return redistest.PTTL(t, rc, key) > 60000 }) {
			t.Errorf("the renewal of 600s landed once the dial went on (PTTL %dms); want it not sent", redistest.PTTL(t, rc, key))
		}
	})
}

// holdAt writes a hold of holder, counted count times, at key, for a minute.
func holdAt(t *testing.T, rc rueidis.Client, key string, count int) {
	t.Helper()
	redistest.MustDo(t, rc, "HSET", key, holder, strconv.Itoa(count))
	redistest.MustDo(t, rc, "PEXPIRE", key, "60000")
}
