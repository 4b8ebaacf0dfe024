package main

import (
	"context"
	"testing"
	"time"

	"github.com/relock-go/relock/internal/redistest"
)

// inspect's reads of a lock are not one snapshot, and a view torn by a release between
// them is read again rather than shown: a lock released after its lease was read is not
// shown held by nobody, and one released and taken by another owner after its lease was
// read is not shown held with its lease gone. Guards against a torn view shown as it was
// read.
func TestInspectReadsATornViewAgain(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		side := b.Client(t)
		const first, second = "8ce4dd22-0910-49c7-b869-e88df461c8f0:1", "5b0e0f4c-93d1-4d7e-a0f2-1a3c6f1b2d9e:7"
		take := func(name, owner string) {
			_ = side.DoMulti(context.Background(),
				side.B().Hset().Key(name).FieldValue().FieldValue(owner, "1").Build(),
				side.B().Pexpire().Key(name).Milliseconds(60000).Build())
		}
		// meanwhile runs each step when inspect's command that the step's markers name
		// comes, and then sends that command: what happens between inspect's reads.
		type step struct {
			markers []string
			then    func()
		}
		meanwhile := func(ctx context.Context, late *redistest.LateRequests, steps ...step) (check func(err error)) {
			var arrivals []<-chan struct{}
			var sends []func()
			for _, s := range steps {
				arrived, send := late.Hold(s.markers...)
				arrivals, sends = append(arrivals, arrived), append(sends, send)
			}
			go func() {
				for i, s := range steps {
					select {
					case <-arrivals[i]:
					case <-ctx.Done():
						return
					}
					s.then()
					sends[i]()
				}
			}()
			return func(err error) {
				t.Helper()
				for i, s := range steps {
					redistest.Arrived(t, arrivals[i], "inspect's "+s.markers[0], err)
				}
			}
		}

		t.Run("released before its holders are read", func(t *testing.T) {
			ctx := redistest.Context(t, 30*time.Second)
			take("torn-free", first)
			late := redistest.NewLateRequests(b.Client(t))
			check := meanwhile(ctx, late, step{[]string{"HGETALL", "torn-free"}, func() {
				_ = side.Do(context.Background(), side.B().Del().Key("torn-free").Build())
			}})
			r, err := inspectLock(ctx, late, "torn-free")
			check(err)
			if err != nil {
				t.Fatal(err)
			}
			if r.Kind != "none" || r.Locked || len(r.Owners) != 0 || r.TTLMs != -2 {
				t.Errorf("inspect of a lock released between its reads: %+v; want it free, with no key", r)
			}
		})

		t.Run("taken by another owner after its lease was read", func(t *testing.T) {
			ctx := redistest.Context(t, 30*time.Second)
			take("torn-taken", first)
			late := redistest.NewLateRequests(b.Client(t))
			check := meanwhile(ctx, late,
				step{[]string{"PTTL", "torn-taken"}, func() {
					_ = side.Do(context.Background(), side.B().Del().Key("torn-taken").Build())
				}},
				step{[]string{"HLEN", "torn-taken"}, func() { take("torn-taken", second) }})
			r, err := inspectLock(ctx, late, "torn-taken")
			check(err)
			if err != nil {
				t.Fatal(err)
			}
			if r.Kind != "rlock" || !r.Locked || len(r.Owners) != 1 || r.Owners[0].Owner != second || r.TTLMs <= 0 {
				t.Errorf("inspect of a lock taken by %s between its reads: %+v; want it held by %s, with its lease", second, r, second)
			}
		})
	})
}
