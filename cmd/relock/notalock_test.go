package main

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/relock-go/relock/internal/redistest"
	"github.com/relock-go/relock/internal/redistest/relocktest"
)

// An application's hash under a lock's name is not a lock: inspect says so and what the
// key holds, and unlock --force leaves it intact and fails. Guards against the operator's
// tool reporting such a hash as a held rlock (its fields "email ×0", "name ×0") and
// deleting it, and against a hash that merely has a lock-like field or a "mode" passing
// for a lock.
func TestNotALockHash(t *testing.T) {
	const uuid = "5df8512c-e096-4359-bc82-07efb0bc9d8e"
	hashes := []struct {
		key    string
		fields []string
	}{
		{"user:42", []string{"name", "alice", "email", "a@x"}},
		{"counts", []string{uuid + ":1", "0"}},                    // a count that holds nothing
		{"words", []string{uuid + ":1", "one"}},                   // a count that is no number
		{"modes", []string{"mode", "read", "name", "alice"}},      // a mode with other data
		{"mode-only", []string{"mode", "write"}},                  // a mode and no holder, which no lock leaves
		{"odd-mode", []string{"mode", "fast", uuid + ":1", "1"}},  // a mode that is not a lock's
		{"writes", []string{uuid + ":1:write", "1"}},              // a writer without a mode
		{"short-id", []string{"0d2c8f0e:1", "1", "email", "a@x"}}, // an id that is no UUID
	}
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		rc := b.Client(t)
		ctx := context.Background()
		for _, h := range hashes {
			if err := rc.Do(ctx, rc.B().Hset().Key(h.key).FieldValue().FieldValue(h.fields[0], h.fields[1]).Build()).Error(); err != nil {
				t.Fatal(err)
			}
			for i := 2; i < len(h.fields); i += 2 {
				if err := rc.Do(ctx, rc.B().Hset().Key(h.key).FieldValue().FieldValue(h.fields[i], h.fields[i+1]).Build()).Error(); err != nil {
					t.Fatal(err)
				}
			}
			before := redistest.Snapshot(t, rc, h.key)
			n := len(h.fields) / 2
			holds := fmt.Sprintf("the key holds a hash of %d fields that is not a lock's", n)
			if n == 1 {
				holds = "the key holds a hash of 1 field that is not a lock's"
			}

			stdout, stderr, status := runBinary(t, nil, "inspect", "--redis", b.Addr, h.key)
			if status != 0 || !strings.Contains(stdout, h.key+": not a lock") || !strings.Contains(stdout, holds) ||
				!strings.Contains(stdout, h.fields[0]) || strings.Contains(stdout, "held") {
				t.Errorf("relock inspect %s: status %d\n%s%s", h.key, status, stdout, stderr)
			}
			stdout, stderr, status = runBinary(t, nil, "inspect", "--json", "--redis", b.Addr, h.key)
			var r struct {
				Kind    string   `json:"kind"`
				KeyType string   `json:"keyType"`
				Fields  []string `json:"fields"`
				Locked  bool     `json:"locked"`
			}
			if err := json.Unmarshal([]byte(stdout), &r); err != nil || status != 0 || r.Kind != "foreign" || r.KeyType != "hash" || len(r.Fields) != n || r.Locked {
				t.Errorf("relock inspect --json %s: status %d, %+v, %v\n%s%s", h.key, status, r, err, stdout, stderr)
			}

			stdout, stderr, status = runBinary(t, nil, "unlock", "--force", "-y", "--redis", b.Addr, h.key)
			if status == 0 || !strings.Contains(stderr, "not a lock ("+holds+")") || !strings.Contains(stderr, "nothing was changed") || strings.Contains(stdout, "force-unlocked") {
				t.Errorf("relock unlock --force -y %s: status %d; want a failure\n%s%s", h.key, status, stdout, stderr)
			}
			if after := redistest.Snapshot(t, rc, h.key); after != before {
				t.Errorf("unlock --force changed %s:\nbefore %s\nafter  %s", h.key, before, after)
			}
		}
	})
}

// A key of another type under a lock's name is not a lock either: a list, a set, a zset, a
// stream, and strings that are no count as Redis writes one. inspect and watch say what
// the key holds, and unlock --force -y fails and leaves it intact, its expiry included.
// Guards against the tool taking such a key for a free lock ("not held; nothing to do",
// status 0) or handing it to a lock's ForceUnlock.
func TestNotALockOtherTypes(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		rc := b.Client(t)
		for _, k := range []struct {
			typ   string
			write []string
		}{
			{"list", []string{"RPUSH", "jobs:list", "a", "b"}},
			{"set", []string{"SADD", "jobs:set", "a"}},
			{"zset", []string{"ZADD", "jobs:zset", "1", "a"}},
			{"stream", []string{"XADD", "jobs:stream", "1-1", "f", "v"}},
			{"string", []string{"SET", "jobs:word", "hello"}},
			{"string", []string{"SET", "jobs:padded", "007"}},
			{"string", []string{"SET", "jobs:signed", "+5"}},
			{"string", []string{"SET", "jobs:spaced", " 42"}},
			{"string", []string{"SET", "jobs:huge", "1e400"}},
		} {
			key := k.write[1]
			redistest.MustDo(t, rc, k.write...)
			redistest.MustDo(t, rc, "PEXPIRE", key, "600000")
			before := redistest.Snapshot(t, rc, key)
			said := fmt.Sprintf("%s: not a lock (the key holds a %s)", key, k.typ)

			stdout, stderr, status := runBinary(t, nil, "inspect", "--redis", b.Addr, key)
			if status != 0 || !strings.Contains(stdout, said) {
				t.Errorf("relock inspect %s: status %d; want %q\n%s%s", key, status, said, stdout, stderr)
			}
			stdout, stderr, status = runBinary(t, nil, "inspect", "--json", "--redis", b.Addr, key)
			var r struct {
				Kind    string `json:"kind"`
				KeyType string `json:"keyType"`
				Locked  bool   `json:"locked"`
			}
			if err := json.Unmarshal([]byte(stdout), &r); err != nil || status != 0 || r.Kind != "foreign" || r.KeyType != k.typ || r.Locked {
				t.Errorf("relock inspect --json %s: status %d, %+v, %v\n%s%s", key, status, r, err, stdout, stderr)
			}
			stdout, stderr, status = runBinary(t, nil, "watch", "--count", "1", "--redis", b.Addr, key)
			if status != 0 || !strings.Contains(stdout, said) {
				t.Errorf("relock watch --count 1 %s: status %d; want %q\n%s%s", key, status, said, stdout, stderr)
			}
			stdout, stderr, status = runBinary(t, nil, "unlock", "--force", "-y", "--redis", b.Addr, key)
			if status != 1 || !strings.Contains(stderr, "is not a lock (the key holds a "+k.typ+")") || !strings.Contains(stderr, "nothing was changed") {
				t.Errorf("relock unlock --force -y %s: status %d; want 1, saying what the key holds\n%s%s", key, status, stdout, stderr)
			}
			if after := redistest.Snapshot(t, rc, key); after != before {
				t.Errorf("relock changed %s:\nbefore %s\nafter  %s", key, before, after)
			}
		}
	})
}

// A name that is refused says why, in inspect and in unlock --force, which exit with
// status 1 and change nothing. Guards against the bare "is not a valid lock name", and
// against "{x}" reaching the keys of the lock "x".
func TestInvalidNameSaysWhy(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		c := relocktest.New(t, b)
		held, err := c.Lock("x").Lock(redistest.Context(t, time.Minute))
		if err != nil {
			t.Fatal(err)
		}
		defer c.Lock("x").Unlock(held)
		for name, reason := range map[string]string{
			"bad{name":                   "unbalanced brace: '{' at 3 has no '}'",
			"a}b":                        "'}' at 1 without a '{'",
			"a{}b":                       "empty hash tag",
			"{x}":                        `its keys would be those of the lock "x"; name it "x" or "{x}:lock"`,
			"redisson_lock_queue:{jobs}": `starts with "redisson_lock_queue:"`,
		} {
			for _, args := range [][]string{{"inspect"}, {"unlock", "--force", "-y"}} {
				args = append(args, "--redis", b.Addr, name)
				stdout, stderr, status := runBinary(t, nil, args...)
				if status != 1 || !strings.Contains(stderr, reason) || !strings.Contains(stderr, fmt.Sprintf("%q", name)) {
					t.Errorf("relock %q: status %d; want 1 and %q naming the lock\n%s%s", args, status, reason, stdout, stderr)
				}
			}
		}
		if n, err := c.Lock("x").HoldCount(held); n != 1 || err != nil {
			t.Errorf("lock x after unlock --force {x}: hold count %d, %v; want still held", n, err)
		}
	})
}

// A Redisson hold whose thread id is negative or zero (Redisson's async API takes any Java
// long) is a lock to the operator's tool as to the library: inspect shows it held by that
// owner, and unlock --force -y frees it. Guards against the tool calling it "not a lock".
func TestRedissonThreadIDsInspected(t *testing.T) {
	const uuid = "5df8512c-e096-4359-bc82-07efb0bc9d8e"
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		rc := b.Client(t)
		for _, id := range []string{"-42", "0"} {
			owner := uuid + ":" + id
			redistest.MustDo(t, rc, "HSET", "java-held", owner, "1")
			redistest.MustDo(t, rc, "PEXPIRE", "java-held", "30000")
			stdout, stderr, status := runBinary(t, nil, "inspect", "--json", "--redis", b.Addr, "java-held")
			var r struct {
				Kind   string `json:"kind"`
				Locked bool   `json:"locked"`
				Owners []struct {
					Owner string `json:"owner"`
					Holds int64  `json:"holds"`
				} `json:"owners"`
			}
			if err := json.Unmarshal([]byte(stdout), &r); err != nil || status != 0 || r.Kind != "rlock" || !r.Locked ||
				len(r.Owners) != 1 || r.Owners[0].Owner != owner || r.Owners[0].Holds != 1 {
				t.Errorf("relock inspect --json of a hold of thread %s: status %d, %+v, %v\n%s%s", id, status, r, err, stdout, stderr)
			}
			stdout, stderr, status = runBinary(t, nil, "unlock", "--force", "-y", "--redis", b.Addr, "java-held")
			if status != 0 || !strings.Contains(stdout, "force-unlocked") {
				t.Errorf("relock unlock --force -y of a hold of thread %s: status %d\n%s%s", id, status, stdout, stderr)
			}
			if n, _ := redistest.Do(t, rc, "EXISTS", "java-held").AsInt64(); n != 0 {
				t.Errorf("the hold of thread %s is still there after unlock --force", id)
			}
		}
	})
}

// A large application hash under the name inspect is given (a typo at 3 a.m.: "users"
// for "users:lock") is told apart from a lock without being read whole: HGETALL of
// millions of fields blocks the server for every client while it runs, and inspect's own
// time bound does not stop it there. inspect says how many fields the key holds and names
// a few; unlock --force refuses it and changes nothing. Guards against inspect sending
// HGETALL for a hash far larger than any lock.
func TestNotALockLargeHash(t *testing.T) {
	s := redistest.StartServer(t)
	const fields = 50000
	s.Do(t, "EVAL", "for i = 1, tonumber(ARGV[1]) do redis.call('hset', KEYS[1], 'user:' .. i, i) end", "1", "users", fmt.Sprint(fields))
	before := s.CommandStats(t)["hgetall"]

	stdout, stderr, status := runBinary(t, nil, "inspect", "--redis", s.Addr(), "users")
	if said := fmt.Sprintf("users: not a lock (the key holds a hash of %d fields that is not a lock's: user:", fields); status != 0 || !strings.HasPrefix(stdout, said) || !strings.HasSuffix(stdout, fmt.Sprintf(", and %d more)\n", fields-5)) {
		t.Errorf("relock inspect users: status %d; want %q\n%s%s", status, said, stdout, stderr)
	}
	stdout, stderr, status = runBinary(t, nil, "inspect", "--json", "--redis", s.Addr(), "users")
	var r struct {
		Kind       string   `json:"kind"`
		Fields     []string `json:"fields"`
		FieldCount int      `json:"fieldCount"`
	}
	if err := json.Unmarshal([]byte(stdout), &r); err != nil || status != 0 || r.Kind != "foreign" || r.FieldCount != fields || len(r.Fields) == 0 || len(r.Fields) > 1000 {
		t.Errorf("relock inspect --json users: status %d, kind %q, fieldCount %d, %d field names, %v; want foreign, %d fields, a few named\n%.120s%s",
			status, r.Kind, r.FieldCount, len(r.Fields), err, fields, stdout, stderr)
	}
	stdout, stderr, status = runBinary(t, nil, "unlock", "--force", "-y", "--redis", s.Addr(), "users")
	if status != 1 || !strings.Contains(stderr, fmt.Sprintf("not a lock (the key holds a hash of %d fields", fields)) {
		t.Errorf("relock unlock --force -y users: status %d; want 1, a refusal\n%.300s%s", status, stdout, stderr)
	}
	if n, err := s.Do(t, "HLEN", "users").AsInt64(); err != nil || n != fields {
		t.Errorf("HLEN users after unlock --force: %d, %v; want %d", n, err, fields)
	}
	if after := s.CommandStats(t)["hgetall"]; after != before {
		t.Errorf("inspect and unlock --force sent HGETALL %d times for a hash of %d fields; want none", after-before, fields)
	}
}
