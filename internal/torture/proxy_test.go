//go:build linux

package torture

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/relock-go/relock/internal/redistest"
)

// The proxy's blackhole holds requests and replies without closing the connection; they
// go through once it is lifted.
func TestProxyBlackhole(t *testing.T) {
	s := redistest.StartServer(t)
	p := redistest.StartProxy(t, s.Addr())
	rc, err := rueidis.NewClient(workerOption(p.Addr()))
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	ping := func(d time.Duration) error {
		ctx, cancel := context.WithTimeout(context.Background(), d)
		defer cancel()
		return rc.Do(ctx, rc.B().Ping().Build()).Error()
	}
	if err := ping(time.Second); err != nil {
		t.Fatalf("PING through the proxy: %v", err)
	}
	p.Blackhole()
	if !p.Blackholed() {
		t.Fatal("Blackholed() = false after Blackhole")
	}
	if err := ping(200 * time.Millisecond); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("PING through a blackholed proxy: %v, want a timeout", err)
	}
	p.Unblackhole()
	if err := ping(2 * time.Second); err != nil {
		t.Fatalf("PING after Unblackhole: %v", err)
	}
}
