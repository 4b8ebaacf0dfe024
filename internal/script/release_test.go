package script_test

import (
	"context"
	"testing"

	"github.com/redis/rueidis"

	"github.com/relock-go/relock/internal/keys"
	"github.com/relock-go/relock/internal/redistest"
	"github.com/relock-go/relock/internal/script"
)

// Both release scripts that count holds in a plain lock's hash, the reentrant lock's and
// the fair lock's, compare the owner's count with the one the client expects (expect.lua):
// a count the client does not expect releases nothing; a release sent again after its
// reply was lost is answered as done and releases nothing, neither the owner's remaining
// hold nor the next holder's; a release expecting several holds of an owner with none is
// not held, not done; a release with no count expected ("") releases a hold if there is
// one; and no release leaves a key behind.
func TestReleasesCompareTheExpectedCount(t *testing.T) {
	const owner, other = "5df8512c-e096-4359-bc82-07efb0bc9d8e:1", "0c9b8a7d-6e5f-4a3b-9c2d-1e0f9a8b7c6d:1"
	for _, kind := range []struct {
		name             string
		acquire, release func(ctx context.Context, rc rueidis.Client, n keys.Names, who, expected string) rueidis.RedisResult
	}{
		{"rlock",
			func(ctx context.Context, rc rueidis.Client, n keys.Names, who, _ string) rueidis.RedisResult {
				return script.RLockAcquire().Exec(ctx, rc, []string{n.Lock, n.Wake}, []string{"30000", who, "", "", n.Channel, "publish"})
			},
			func(ctx context.Context, rc rueidis.Client, n keys.Names, who, expected string) rueidis.RedisResult {
				return script.RLockUnlock().Exec(ctx, rc, []string{n.Lock, n.Channel, n.Wake}, []string{"0", who, expected, "publish"})
			}},
		{"fair",
			func(ctx context.Context, rc rueidis.Client, n keys.Names, who, _ string) rueidis.RedisResult {
				return script.FairAcquire().Exec(ctx, rc, []string{n.Lock, n.Queue, n.Deadlines}, []string{"30000", who, "20000", "0", "publish", n.FairChannel, "2"})
			},
			func(ctx context.Context, rc rueidis.Client, n keys.Names, who, expected string) rueidis.RedisResult {
				return script.FairRelease().Exec(ctx, rc, []string{n.Lock, n.Queue, n.Deadlines}, []string{"unlock", who, expected, "publish", n.FairChannel, "0"})
			}},
	} {
		t.Run(kind.name, func(t *testing.T) {
			redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
				rc := b.Client(t)
				ctx := context.Background()
				n := keys.Of("replayed")
				acquire := func(who string) {
					t.Helper()
					if v, err := script.AcquireReply(nil, kind.acquire(ctx, rc, n, who, "")); err != nil || v[0] != 1 {
						t.Fatalf("acquire by %s = %v, %v", who, v, err)
					}
				}
				release := func(who, expected string) (int64, error) {
					return kind.release(ctx, rc, n, who, expected).AsInt64()
				}
				count := func(who string) string {
					v, _ := redistest.Do(t, rc, "HGET", n.Lock, who).ToString()
					return v
				}
				acquire(owner)
				acquire(owner) // re-entered: count 2
				for _, wrong := range []string{"1", "5"} {
					if got, err := release(owner, wrong); !rueidis.IsRedisNil(err) {
						t.Fatalf("release expecting %s holds of 2 = %d, %v; want nil (not held with that count)", wrong, got, err)
					}
				}
				if got := count(owner); got != "2" {
					t.Fatalf("count after a release with the wrong count = %q; want 2 (untouched)", got)
				}
				for _, again := range []string{"", " sent again"} {
					if got, err := release(owner, "2"); got != 0 || err != nil {
						t.Fatalf("partial release%s = %d, %v; want 0", again, got, err)
					}
				}
				if got := count(owner); got != "1" {
					t.Fatalf("count after the partial release was sent again = %q; want 1", got)
				}
				if got, err := release(owner, "1"); got != 1 || err != nil {
					t.Fatalf("last release = %d, %v; want 1 (released)", got, err)
				}
				acquire(other) // the next holder
				if got, err := release(owner, "1"); got != 3 || err != nil {
					t.Fatalf("last release sent again = %d, %v; want 3 (ran before, or lost)", got, err)
				}
				if got := count(other); got != "1" {
					t.Fatalf("the next holder's count after the replay = %q; want 1", got)
				}
				// A release expecting more than one hold finds the field gone only when
				// the hold was lost (no release leaves none of two): not held with that
				// count, rather than done.
				if got, err := release(owner, "2"); !rueidis.IsRedisNil(err) {
					t.Fatalf("release expecting 2 holds by an owner with none = %d, %v; want nil (not held with that count)", got, err)
				}
				if got, err := release(owner, ""); !rueidis.IsRedisNil(err) {
					t.Fatalf("release of no hold the client knows, by a non-holder = %d, %v; want nil", got, err)
				}
				if got, err := release(other, ""); got != 1 || err != nil {
					t.Fatalf("release of a hold the client does not know = %d, %v; want 1 (released)", got, err)
				}
				if ks, err := redistest.Do(t, rc, "KEYS", "*").AsStrSlice(); err != nil || len(ks) != 0 {
					t.Fatalf("keys left after every hold was released: %q, %v; want none", ks, err)
				}
			})
		})
	}
}
