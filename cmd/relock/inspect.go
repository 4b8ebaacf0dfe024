package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/redis/rueidis"

	"github.com/relock-go/relock/internal/keys"
)

// Report is what inspect finds about one lock, read straight from its keys.
type Report struct {
	Name   string       `json:"name"`
	Kind   string       `json:"kind"`              // "rlock", "rwlock", "fairlock", "none", or "foreign"
	KeyTyp string       `json:"keyType,omitempty"` // the key's Redis type when it is not a lock
	Locked bool         `json:"locked"`
	TTLMs  int64        `json:"ttlMs"`          // the lock's remaining lease; -1 no expiry, -2 no key
	Mode   string       `json:"mode,omitempty"` // rwlock: "read" or "write"
	Owners []Owner      `json:"owners"`
	Queue  []QueueEntry `json:"queue,omitempty"` // fairlock: waiters in order
	Token  *int64       `json:"fencingToken,omitempty"`
}

// Owner is one holder of a lock.
type Owner struct {
	Owner string `json:"owner"` // "<client uuid>:<n>"
	Holds int64  `json:"holds"`
	Write bool   `json:"write,omitempty"` // rwlock: a write hold
	// ReadTTLsMs are the remaining leases of an rwlock reader's holds, one per hold.
	ReadTTLsMs []int64 `json:"readTtlsMs,omitempty"`
}

// QueueEntry is one waiter of a fair lock.
type QueueEntry struct {
	Owner string `json:"owner"`
	// ExpiresInMs is how long the entry lives without its waiter refreshing it, by the
	// Redis clock; at or below 0 the waiter is taken for dead and skipped.
	ExpiresInMs int64 `json:"expiresInMs"`
}

// inspectLock reads a lock's keys. Every key of one lock shares a cluster slot, so plain
// commands suffice; the reads are not one snapshot, which an operator's view can afford.
func inspectLock(ctx context.Context, rc rueidis.Client, name string) (*Report, error) {
	if !keys.Valid(name) {
		return nil, fmt.Errorf("%q is not a valid lock name", name)
	}
	r := &Report{Name: name, Owners: []Owner{}}
	do := func(cmd rueidis.Completed) rueidis.RedisResult { return rc.Do(ctx, cmd) }

	typ, err := do(rc.B().Type().Key(name).Build()).ToString()
	if err != nil {
		return nil, err
	}
	queueKey, timeoutKey := keys.Prefixed("redisson_lock_queue", name), keys.Prefixed("redisson_lock_timeout", name)
	queued, err := do(rc.B().Exists().Key(queueKey).Build()).AsInt64()
	if err != nil {
		return nil, err
	}
	if tok, err := do(rc.B().Get().Key(keys.TokenKey(name)).Build()).AsInt64(); err == nil {
		r.Token = &tok
	}
	if r.TTLMs, err = do(rc.B().Pttl().Key(name).Build()).AsInt64(); err != nil {
		return nil, err
	}

	switch typ {
	case "none":
		r.Kind = "none"
	case "hash":
		r.Locked = true
		fields, err := do(rc.B().Hgetall().Key(name).Build()).AsStrMap()
		if err != nil {
			return nil, err
		}
		if mode, ok := fields["mode"]; ok {
			r.Kind, r.Mode = "rwlock", mode
			delete(fields, "mode")
		} else {
			r.Kind = "rlock"
		}
		for _, f := range sortedKeys(fields) {
			n, _ := strconv.ParseInt(fields[f], 10, 64)
			o := Owner{Owner: f, Holds: n}
			if r.Kind == "rwlock" {
				if base, ok := strings.CutSuffix(f, ":write"); ok {
					o.Owner, o.Write = base, true
				} else {
					for k := int64(1); k <= n; k++ {
						ttl, _ := do(rc.B().Pttl().Key(keys.Tagged(name) + ":" + f + ":rwlock_timeout:" + strconv.FormatInt(k, 10)).Build()).AsInt64()
						o.ReadTTLsMs = append(o.ReadTTLsMs, ttl)
					}
				}
			}
			r.Owners = append(r.Owners, o)
		}
	default:
		r.Kind, r.KeyTyp = "foreign", typ
		return r, nil
	}
	if queued == 1 {
		if r.Kind != "rwlock" {
			r.Kind = "fairlock"
		}
		waiters, err := do(rc.B().Lrange().Key(queueKey).Start(0).Stop(-1).Build()).AsStrSlice()
		if err != nil {
			return nil, err
		}
		now, err := redisNowMs(ctx, rc)
		if err != nil {
			return nil, err
		}
		for _, w := range waiters {
			score, err := do(rc.B().Zscore().Key(timeoutKey).Member(w).Build()).AsFloat64()
			if err != nil && !rueidis.IsRedisNil(err) {
				return nil, err
			}
			r.Queue = append(r.Queue, QueueEntry{Owner: w, ExpiresInMs: int64(score) - now})
		}
	}
	return r, nil
}

// redisNowMs is the server's clock in milliseconds: queue deadlines are in Redis time.
func redisNowMs(ctx context.Context, rc rueidis.Client) (int64, error) {
	t, err := rc.Do(ctx, rc.B().Time().Build()).AsStrSlice()
	if err != nil || len(t) != 2 {
		return 0, fmt.Errorf("TIME: %v", err)
	}
	sec, _ := strconv.ParseInt(t[0], 10, 64)
	usec, _ := strconv.ParseInt(t[1], 10, 64)
	return sec*1000 + usec/1000, nil
}

func sortedKeys(m map[string]string) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}

// print writes the report as text, or as one JSON object.
func (r *Report) print(w io.Writer, asJSON bool) error {
	if asJSON {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(r)
	}
	switch {
	case r.Kind == "foreign":
		fmt.Fprintf(w, "%s: not a lock (the key holds a %s)\n", r.Name, r.KeyTyp)
		return nil
	case !r.Locked && len(r.Queue) == 0:
		fmt.Fprintf(w, "%s: free\n", r.Name)
	default:
		state := "held"
		if !r.Locked {
			state = "free, waiters queued"
		}
		fmt.Fprintf(w, "%s: %s, %s", r.Name, r.Kind, state)
		if r.Mode != "" {
			fmt.Fprintf(w, " (%s mode)", r.Mode)
		}
		if r.Locked {
			fmt.Fprintf(w, ", lease %s left", ms(r.TTLMs))
		}
		fmt.Fprintln(w)
	}
	for _, o := range r.Owners {
		role := "holds"
		if r.Kind == "rwlock" {
			role = "reads"
			if o.Write {
				role = "writes"
			}
		}
		fmt.Fprintf(w, "  %-44s %s ×%d", o.Owner, role, o.Holds)
		if len(o.ReadTTLsMs) > 0 {
			parts := make([]string, len(o.ReadTTLsMs))
			for i, t := range o.ReadTTLsMs {
				parts[i] = ms(t)
			}
			fmt.Fprintf(w, "  (leases %s)", strings.Join(parts, ", "))
		}
		fmt.Fprintln(w)
	}
	for i, q := range r.Queue {
		state := "live, entry expires in " + ms(q.ExpiresInMs)
		if q.ExpiresInMs <= 0 {
			state = "dead (entry expired), will be skipped"
		}
		fmt.Fprintf(w, "  queue %-2d %-44s %s\n", i+1, q.Owner, state)
	}
	if r.Token != nil {
		fmt.Fprintf(w, "  fencing token  %d (last handed out)\n", *r.Token)
	}
	return nil
}

func ms(v int64) string {
	switch v {
	case -1:
		return "no expiry"
	case -2:
		return "gone"
	}
	return (time.Duration(v) * time.Millisecond).String()
}
