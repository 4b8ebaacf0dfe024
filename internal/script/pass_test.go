package script_test

import (
	"context"
	"slices"
	"testing"

	"github.com/relock-go/relock/internal/keys"
	"github.com/relock-go/relock/internal/redistest"
	"github.com/relock-go/relock/internal/script"
)

// A wake-up passed on goes to the next registered client that listens: its code is taken
// out of the registry and published on the lock's channel, followed by the message passed
// ("0", Redisson's unlock message), which wakes one waiter of each Redisson client.
func TestPassWakesTheNextRegisteredClient(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		rc := b.Client(t)
		n := keys.Of("pass-on")
		redistest.MustDo(t, rc, "ZADD", n.Wake, "1", "1111", "2", "2222")
		b.Listen(t, n.Presence("1111"))
		ch := b.Listen(t, n.Channel)
		v, err := script.Pass().Exec(context.Background(), rc, []string{n.Wake, n.Channel}, []string{"0", "publish"}).AsInt64()
		if err != nil || v != 1 {
			t.Fatalf("pass = %d, %v; want 1", v, err)
		}
		if got := heard(t, rc, ch, n.Channel); !slices.Equal(got, []string{"1111", "0"}) {
			t.Fatalf("the lock's channel heard %q; want the next client's code, then 0", got)
		}
		if left := redistest.Members(t, rc, n.Wake); !slices.Equal(left, []string{"2222"}) {
			t.Fatalf("registry %v after the pass; want only 2222 left", left)
		}
	})
}
