package script_test

import (
	"slices"
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
		redistest.MustDo(t, rc, "HSET", "{batch}:held", holder, "2")
		redistest.MustDo(t, rc, "PEXPIRE", "{batch}:held", "60000")
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
		redistest.MustDo(t, rc, "HSET", "{again}:held", holder, "1")
		redistest.MustDo(t, rc, "PEXPIRE", "{again}:held", "60000")
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
