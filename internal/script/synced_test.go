package script_test

import (
	"testing"
	"time"

	"github.com/relock-go/relock/internal/redistest"
	"github.com/relock-go/relock/internal/script"
)

// Synced sends a call whose script the server does not know (a flushed or restarted
// server) again with EVAL, followed by WAIT again, and returns the call's result and
// WAIT's answer: here no replica, after WAIT's timeout.
func TestSyncedSendsNoScriptCallAgain(t *testing.T) {
	redistest.Real(t, func(t *testing.T, b *redistest.Backend) {
		rc := b.Client(t)
		ctx := redistest.Context(t, time.Minute)
		holdAt(t, rc, "{synced}:held", 2)
		redistest.MustDo(t, rc, "SCRIPT", "FLUSH")
		call := script.Call{Script: script.RLockState(), Keys: []string{"{synced}:held"}, Args: []string{holder, "rlock"}}
		result, replicas := script.Synced(ctx, rc, call, 1, 10)
		if got, err := result.AsIntSlice(); err != nil || len(got) < 2 || got[0] != 1 || got[1] != 2 {
			t.Errorf("the call's result: %v, %v; want the holder's state, count 2", got, err)
		}
		if n, err := replicas.AsInt64(); err != nil || n != 0 {
			t.Errorf("WAIT's answer: %d, %v; want 0 replicas", n, err)
		}
	})
}
