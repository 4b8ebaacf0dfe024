package semaphore_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/relock-go/relock/internal/redistest"
	"github.com/relock-go/relock/internal/redistest/relocktest"
)

// While the server refuses commands unrun until it is ready (LOADING after a restart,
// CLUSTERDOWN or TRYAGAIN in a failover), the semaphore's acquisitions and releases try
// again within the client's timeout instead of failing, as a lock's calls do: the refusal
// says the script never ran, so the count moves once per call.
func TestRetryWhileServerNotReady(t *testing.T) {
	for _, refusal := range []string{"LOADING Redis is loading the dataset in memory", "CLUSTERDOWN The cluster is down", "TRYAGAIN Multiple keys request during rehashing of slot"} {
		t.Run(strings.Fields(refusal)[0], func(t *testing.T) {
			b := redistest.Mini(t)
			c := relocktest.New(t, b)
			side := b.Client(t)
			s := c.Semaphore("not-ready")
			mustSet(t, s, 4)
			// Refuse for a while, well within the client's 3s timeout.
			refuseFor := func() {
				b.Mini.SetError(refusal)
				time.AfterFunc(300*time.Millisecond, func() { b.Mini.SetError("") })
			}
			ctx := redistest.Context(t, time.Minute)

			refuseFor()
			if err := s.Acquire(ctx, 1); err != nil {
				t.Fatalf("Acquire while the server said %q: %v", refusal, err)
			}
			wantValue(t, side, "not-ready", "3")

			refuseFor()
			if ok, err := s.TryAcquire(ctx, 1); !ok || err != nil {
				t.Fatalf("TryAcquire while the server said %q = %v, %v; want true, nil", refusal, ok, err)
			}
			wantValue(t, side, "not-ready", "2")

			refuseFor()
			if err := s.Release(ctx, 2); err != nil {
				t.Fatalf("Release while the server said %q: %v", refusal, err)
			}
			wantValue(t, side, "not-ready", "4")

			refuseFor()
			held, err := s.AcquireLease(ctx, 3)
			if err != nil {
				t.Fatalf("AcquireLease while the server said %q: %v", refusal, err)
			}
			wantValue(t, side, "not-ready", "1")

			refuseFor()
			if err := s.ReleaseLease(held); err != nil {
				t.Fatalf("ReleaseLease while the server said %q: %v", refusal, err)
			}
			wantValue(t, side, "not-ready", "4")
			if !errors.Is(held.Err(), context.Canceled) || context.Cause(held) != context.Canceled {
				t.Fatalf("the released lease's context: %v (cause %v); want context.Canceled with no cause of its own", held.Err(), context.Cause(held))
			}
		})
	}
}
