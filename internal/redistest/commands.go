package redistest

import (
	"context"
	"strconv"
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

// ExpireTime returns key's expiry in Unix milliseconds (PEXPIRETIME), or -1 (no expiry)
// or -2 (no key) as Redis answers.
func ExpireTime(t testing.TB, rc rueidis.Client, key string) int64 {
	t.Helper()
	ms, err := Do(t, rc, "PEXPIRETIME", key).AsInt64()
	if err != nil {
		t.Fatalf("PEXPIRETIME %s: %v", key, err)
	}
	return ms
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

// Millis returns the server's clock (TIME) in Unix milliseconds, the clock the scripts
// score deadlines by, and fails t if the command fails.
func Millis(t testing.TB, rc rueidis.Client) int64 {
	t.Helper()
	now, err := Do(t, rc, "TIME").AsStrSlice()
	if err != nil || len(now) != 2 {
		t.Fatalf("TIME: %v %v", now, err)
	}
	sec, _ := strconv.ParseInt(now[0], 10, 64)
	usec, _ := strconv.ParseInt(now[1], 10, 64)
	return sec*1000 + usec/1000
}

// Members returns the members of the sorted set at key, lowest score first (none when
// there is no key), and fails t if the command fails.
func Members(t testing.TB, rc rueidis.Client, key string) []string {
	t.Helper()
	m, err := rc.Do(context.Background(), rc.B().Zrange().Key(key).Min("0").Max("-1").Build()).AsStrSlice()
	if err != nil {
		t.Fatalf("ZRANGE %s: %v", key, err)
	}
	return m
}
