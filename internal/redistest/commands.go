package redistest

import (
	"context"
	"testing"

	"github.com/redis/rueidis"
)

// Do runs one raw command (its name and arguments as strings) through rc and returns
// the result for the test to check: unlike MustDo it fails nothing itself. rc is a
// client of the test's own (Backend.Client), so that the command takes no connection
// from the clients under test.
func Do(t testing.TB, rc rueidis.Client, args ...string) rueidis.RedisResult {
	t.Helper()
	return rc.Do(context.Background(), rc.B().Arbitrary(args...).Build())
}

// MustDo runs one raw command through rc, as Do, and fails t if it returns an error,
// a Redis error reply included.
func MustDo(t testing.TB, rc rueidis.Client, args ...string) {
	t.Helper()
	if err := Do(t, rc, args...).Error(); err != nil {
		t.Fatalf("%q: %v", args, err)
	}
}

// PTTL returns key's PTTL in milliseconds (-1: no expiry, -2: no such key), and fails
// t if the command fails.
func PTTL(t testing.TB, rc rueidis.Client, key string) int64 {
	t.Helper()
	ms, err := Do(t, rc, "PTTL", key).AsInt64()
	if err != nil {
		t.Fatalf("PTTL %s: %v", key, err)
	}
	return ms
}
