package script_test

import (
	"context"
	"slices"
	"testing"

	"github.com/relock-go/relock/internal/keys"
	"github.com/relock-go/relock/internal/redistest"
	"github.com/relock-go/relock/internal/script"
)

// A count down of an open latch, or of a count at or below zero, answers 0: the count
// left, never below zero.
func TestLatchCountDownAnswersZeroWhenOpen(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		rc := b.Client(t)
		k := keys.LatchOf("latch-spent")
		for _, v := range []string{"", "0", "-3"} {
			if v != "" {
				redistest.MustDo(t, rc, "SET", k.Count, v)
			}
			got, err := script.LatchCountDown().Exec(context.Background(), rc, []string{k.Count, k.Channel}, []string{"publish"}).AsInt64()
			if err != nil || got != 0 {
				t.Fatalf("count down of a count of %q = %d, %v; want 0", v, got, err)
			}
		}
	})
}

// A latch's messages are Redisson's: setting a count publishes "1" (a new count), and the
// count down that opens it publishes "0", which opens it for every waiter, Redisson's
// included; a count down that leaves a count publishes nothing (lua/latch_set.lua,
// lua/latch_count_down.lua).
func TestLatchMessagesAsRedisson(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		rc := b.Client(t)
		k := keys.LatchOf("latch-messages")
		l := b.Listen(t, k.Channel)
		if v, err := script.LatchSet().Exec(context.Background(), rc, []string{k.Count, k.Channel}, []string{"2", "publish"}).AsInt64(); err != nil || v != 1 {
			t.Fatalf("set a count of 2 = %d, %v; want 1", v, err)
		}
		for _, want := range []int64{1, 0} {
			if v, err := script.LatchCountDown().Exec(context.Background(), rc, []string{k.Count, k.Channel}, []string{"publish"}).AsInt64(); err != nil || v != want {
				t.Fatalf("count down = %d, %v; want %d", v, err, want)
			}
		}
		if got := heard(t, rc, l, k.Channel); !slices.Equal(got, []string{"1", "0"}) {
			t.Fatalf("the channel heard %q after a count of 2 was set and counted down twice; want [\"1\" \"0\"]", got)
		}
	})
}
