package script_test

import (
	"testing"

	"github.com/relock-go/relock/internal/keys"
	"github.com/relock-go/relock/internal/redistest"
)

// Under writer preference a new reader gives way to a live waiting writer also when the
// lock is free at that moment (the writer is on its way to take it, or sleeps until the
// vanished hold before it would have ended), and is told to come back; a reader without
// writer preference takes the free lock.
func TestReaderGivesWayAtAFreeLock(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		rc := b.Client(t)
		for _, c := range []struct {
			prefer string
			want   int64
		}{{"1", 0}, {"0", 1}} {
			name := "give-way-" + c.prefer
			n := keys.Of(name)
			redistest.MustDo(t, rc, "ZADD", n.Writers, "99999999999999", second+":write") // live for ages
			v, err := readAcquire(t, rc, name, first, c.prefer, "1111", "")
			if err != nil || len(v) < 2 || v[0] != c.want {
				t.Fatalf("writer preference %q, a writer waiting, the lock free: %v %v; want the reply to start with %d", c.prefer, v, err, c.want)
			}
			if c.want == 0 && v[1] <= 0 {
				t.Errorf("told to come back in %d ms; want a positive wait", v[1])
			}
		}
	})
}
