package script_test

import (
	"context"
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
