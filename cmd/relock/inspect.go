package main

import (
	"context"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"sort"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/redis/rueidis"

	"github.com/relock-go/relock/internal/keys"
)

// Report is what inspect finds about one lock, read straight from its keys.
type Report struct {
	Name string `json:"name"`
	// NameBase64 is the name's bytes, base64, when they are not UTF-8: JSON text carries
	// only UTF-8, and Name then reads with U+FFFD where those bytes were.
	NameBase64 string `json:"nameBase64,omitempty"`
	// Kind is "rlock", "rwlock", "fairlock", "semaphore", "latch", "count" (a whole number
	// that a semaphore or a latch may hold, with no waiter to tell which), "none", or
	// "foreign" (not relock's data).
	Kind   string `json:"kind"`
	KeyTyp string `json:"keyType,omitempty"` // the key's Redis type when it is not a lock
	// Fields are the field names of a hash that is not a lock (it lacks a lock's shape):
	// all of them, or of a hash of more than maxLockFields, those of one HSCAN page.
	Fields []string `json:"fields,omitempty"`
	// FieldCount is how many fields such a hash holds.
	FieldCount int64        `json:"fieldCount,omitempty"`
	Locked     bool         `json:"locked"`
	TTLMs      int64        `json:"ttlMs"`          // the lock's remaining lease; -1 no expiry, -2 no key
	Mode       string       `json:"mode,omitempty"` // rwlock: "read" or "write"
	Owners     []Owner      `json:"owners"`
	Queue      []QueueEntry `json:"queue,omitempty"` // fairlock: waiters in order
	// Writers are an rwlock's waiting writers under writer preference, which new readers
	// give way to. Without writer preference a waiting writer leaves no trace in the keys.
	Writers []QueueEntry `json:"writersWaiting,omitempty"`
	// Subscribers counts the connections subscribed to an rlock's or rwlock's wake-up
	// channel: one per client (relock's or Redisson's) with waiters parked on the lock.
	// Such waiters keep nothing in the lock's keys, so this is the only trace they leave.
	Subscribers int64 `json:"subscribers"`
	// WaitingClients are an rlock's or rwlock's wake registries: the relock clients with
	// waiters parked on the lock, by wake code, each with the process whose connections
	// carry that code. The plain lock's waiters and the rwlock's writers first, in the
	// order an unlock wakes their clients, then the rwlock's readers.
	WaitingClients []WaitingClient `json:"waitingClients,omitempty"`
	Token          *int64          `json:"fencingToken,omitempty"`
	// Count is the number a semaphore's key (its available permits) or a latch's key (its
	// count) holds; nil for the other kinds.
	Count *int64 `json:"count,omitempty"`
	// PermitWaiters is a semaphore's queue of waiting relock clients, first in line
	// first (each client's other waiters queue behind its first, in its memory).
	PermitWaiters []QueueEntry `json:"permitWaiters,omitempty"`
	// Leased are a semaphore's leased permits (Redisson's RPermitExpirableSemaphore's, and
	// relock's AcquireLease), soonest to run out first.
	Leased []LeasedPermit `json:"leasedPermits,omitempty"`
	// ClientsUnknown says why the clients behind the owners and waiters could not be
	// looked up (CLIENT LIST failed on every node); empty when they were.
	ClientsUnknown string `json:"clientsUnknown,omitempty"`
	cluster        bool   // read from a Redis Cluster: a client may have no named connection
}

// LeasedPermit is one leased permit of a semaphore.
type LeasedPermit struct {
	ID string `json:"id"` // 32 hex digits, as Redisson and relock's PermitIDs spell it
	// ExpiresInMs is how long until the lease runs out (at or below 0: it has, and the
	// next acquisition or count puts it back).
	ExpiresInMs int64 `json:"expiresInMs"`
	// NoExpiry is set for a permit leased without a lease time (Redisson's acquire()).
	NoExpiry bool `json:"noExpiry,omitempty"`
}

// Owner is one holder of a lock.
type Owner struct {
	Owner string `json:"owner"` // "<client uuid>:<n>"
	Holds int64  `json:"holds"`
	Write bool   `json:"write,omitempty"` // rwlock: a write hold
	// ReadTTLsMs are the remaining leases of an rwlock reader's holds, one per hold; none
	// for a reader counting more holds than maxReadLeases, which no reader makes.
	ReadTTLsMs []int64 `json:"readTtlsMs,omitempty"`
	// Client is the process behind the owner, as CLIENT LIST shows it; nil when no
	// connection carries its client's name (see ClientConn) or the lookup failed
	// (Report.ClientsUnknown).
	Client *ClientConn `json:"client,omitempty"`
}

// ClientConn is what CLIENT LIST shows of a relock client: the connections named
// "relock:<client id>:<wake code>" (every relock client names its subscriber connection
// so, and a client made by relock.Dial every connection). None means the process is gone
// (its holds run out with their lease, its wake registry entries with the registry) or the
// owner is not a relock client (Redisson's).
type ClientConn struct {
	Addr        string `json:"addr"`        // the oldest such connection's address, as the server sees it
	AgeSeconds  int64  `json:"ageSeconds"`  // how long that connection has been open
	Connections int    `json:"connections"` // how many connections carry the name, on every node
}

// QueueEntry is one waiter of a fair lock, or a waiting writer of an rwlock.
type QueueEntry struct {
	Owner string `json:"owner"`
	// ExpiresInMs is how long the entry lives without its waiter refreshing it, by the
	// Redis clock; at or below 0 the waiter is taken for dead and ignored.
	ExpiresInMs int64 `json:"expiresInMs"`
	// Client is the waiter's process, as for Owner.Client.
	Client *ClientConn `json:"client,omitempty"`
}

// WaitingClient is one entry of a lock's wake registry (lua/wake.lua): a relock client
// that registered its wake code when a waiter of it found the lock held. The entry stays
// until an unlock wakes that client, its last waiter leaves, or the registry expires; that
// of a client that died stays until the registry expires or an unlock, looking for a
// client to wake, drops it.
type WaitingClient struct {
	Code string `json:"code"` // the client's wake code, as registered
	// Readers is set for an rwlock's client with readers waiting (the registry
	// relock_wake_readers:{<name>}); unset, the client has waiters of a plain lock or an
	// rwlock's writers waiting (relock_wake:{<name>}).
	Readers bool `json:"readers,omitempty"`
	// ClientID is the client id in the name of the connections that carry the code, and
	// Client those connections, as for Owner.Client; both empty when none does.
	ClientID string      `json:"clientId,omitempty"`
	Client   *ClientConn `json:"client,omitempty"`
}

// inspectLock reads a lock's keys. Every key of one lock shares a cluster slot, so plain
// commands suffice. The reads are not one snapshot: a lock released (or run out) between
// the look at its type and the read of its lease or holders would show as held with no
// lease or no holder. Such a torn view is read again, a few times; the operator's view can
// afford that, and a lock that changes that fast is shown as last read.
func inspectLock(ctx context.Context, rc rueidis.Client, name string) (*Report, error) {
	const reads = 5
	for i := 1; ; i++ {
		r, err := inspectOnce(ctx, rc, name)
		if err != nil {
			return nil, err
		}
		if i == reads || !r.torn() {
			r.findClients(ctx, rc)
			return r, nil
		}
	}
}

// torn reports whether the report saw a lock that was gone before all of it was read.
func (r *Report) torn() bool {
	return r.Locked && (r.TTLMs == -2 || len(r.Owners) == 0)
}

func inspectOnce(ctx context.Context, rc rueidis.Client, name string) (r *Report, err error) {
	if err := keys.Check(name); err != nil {
		return nil, fmt.Errorf("%q: %w", name, err)
	}
	// An error names the lock and the key it came from: a lock's auxiliary key that holds
	// other data (WRONGTYPE) is otherwise a mystery to the operator. at is the key of the
	// first read that failed here; the helpers below name theirs (keyErr).
	var at string
	defer func() {
		switch {
		case err == nil:
		case at != "":
			err = fmt.Errorf("reading lock %s: %w", strconv.Quote(name), keyErr(at, err))
		default:
			err = fmt.Errorf("reading lock %s: %w", strconv.Quote(name), err)
		}
	}()
	r = &Report{Name: name, Owners: []Owner{}}
	if !utf8.ValidString(name) {
		r.NameBase64 = base64.StdEncoding.EncodeToString([]byte(name))
	}
	do := func(cmd rueidis.Completed) rueidis.RedisResult {
		var key string
		if c := cmd.Commands(); len(c) > 1 {
			key = c[1]
		}
		res := rc.Do(ctx, cmd)
		if res.Error() != nil && at == "" {
			at = key
		}
		return res
	}

	typ, err := do(rc.B().Type().Key(name).Build()).ToString()
	if err != nil {
		return nil, err
	}
	names := keys.Of(name)
	queueKey, timeoutKey := names.Queue, names.Deadlines
	queued, err := do(rc.B().Exists().Key(queueKey).Build()).AsInt64()
	if err != nil {
		return nil, err
	}
	// The fencing counter is shown when it is one; anything else there is not the lock's.
	if tok, err := rc.Do(ctx, rc.B().Get().Key(names.Token).Build()).AsInt64(); err == nil {
		r.Token = &tok
	}
	if r.TTLMs, err = do(rc.B().Pttl().Key(name).Build()).AsInt64(); err != nil {
		return nil, err
	}

	switch typ {
	case "none":
		r.Kind = "none"
		// Between a writer's turn coming and its taking the lock, the waiting writers are
		// all that is left of an rwlock.
		if r.Writers, err = waitingWriters(ctx, rc, name); err != nil {
			return nil, err
		}
		if len(r.Writers) > 0 {
			r.Kind = "rwlock"
			break
		}
		// A semaphore with no count yet can have clients queued for permits.
		if err := counted(ctx, rc, r); err != nil {
			return nil, err
		}
		if r.Kind == "semaphore" {
			return r, nil
		}
		r.Kind, r.Count, r.Subscribers = "none", nil, 0
		// A free lock may still have waiters parked: a key deleted behind its holder's back,
		// or a lease run out, sends no message, and they try when the lease they last saw
		// ends. Show them, as for a held lock.
		if r.WaitingClients, err = waitingClients(ctx, rc, names, true); err != nil {
			return nil, err
		}
		for _, channel := range []string{names.Channel, names.RWChannel} {
			n, err := subscribers(ctx, rc, channel)
			if err != nil {
				return nil, err
			}
			r.Subscribers += n
		}
	case "hash":
		r.Locked = true
		// A lock's hash has a field per holder. One far larger is an application's, and is
		// not read whole: HGETALL of millions of fields would block the server.
		n, err := do(rc.B().Hlen().Key(name).Build()).AsInt64()
		if err != nil {
			return nil, err
		}
		if n > maxLockFields {
			page, err := do(rc.B().Hscan().Key(name).Cursor(0).Count(sampledFields).Build()).AsScanEntry()
			if err != nil {
				return nil, err
			}
			sample := make(map[string]string, len(page.Elements)/2)
			for i := 0; i+1 < len(page.Elements); i += 2 {
				sample[page.Elements[i]] = page.Elements[i+1]
			}
			if len(sample) == 0 || shape(sample) == "" {
				r.Kind, r.KeyTyp, r.Locked, r.FieldCount = "foreign", "hash", false, n
				r.Fields = sortedKeys(sample)
				return r, nil
			}
		}
		fields, err := do(rc.B().Hgetall().Key(name).Build()).AsStrMap()
		if err != nil {
			return nil, err
		}
		r.Kind = shape(fields)
		if r.Kind == "" {
			// Application data, not a lock: say what it is and touch nothing.
			r.Kind, r.KeyTyp, r.Locked = "foreign", "hash", false
			r.Fields = sortedKeys(fields)
			r.FieldCount = int64(len(fields))
			return r, nil
		}
		if r.Kind == "rwlock" {
			r.Mode = fields["mode"]
			delete(fields, "mode")
		}
		for _, f := range sortedKeys(fields) {
			n, _ := strconv.ParseInt(fields[f], 10, 64)
			o := Owner{Owner: f, Holds: n}
			if r.Kind == "rwlock" {
				if base, ok := keys.IsWriteField(f); ok {
					o.Owner, o.Write = base, true
				} else if n <= maxReadLeases {
					// A count above that is no reader's (tampered data, or debris), and
					// walking its keys would not end: the count alone is shown.
					for k := int64(1); k <= n; k++ {
						ttl, err := do(rc.B().Pttl().Key(names.ReadTimeout(f, k)).Build()).AsInt64()
						if err != nil {
							return nil, err
						}
						o.ReadTTLsMs = append(o.ReadTTLsMs, ttl)
					}
				}
			}
			r.Owners = append(r.Owners, o)
		}
		channel := names.Channel
		if r.Kind == "rwlock" {
			channel = names.RWChannel
			if r.Writers, err = waitingWriters(ctx, rc, name); err != nil {
				return nil, err
			}
		}
		if r.Subscribers, err = subscribers(ctx, rc, channel); err != nil {
			return nil, err
		}
	case "string":
		v, err := do(rc.B().Get().Key(name).Build()).ToString()
		if err != nil && !rueidis.IsRedisNil(err) {
			return nil, err
		}
		n, perr := strconv.ParseInt(v, 10, 64)
		if perr == nil && strconv.FormatInt(n, 10) != v {
			perr = strconv.ErrSyntax // not a count as Redis writes one: not a semaphore's or a latch's
		}
		if err != nil || perr != nil {
			r.Kind, r.KeyTyp = "foreign", typ
			return r, nil
		}
		r.Count = &n
		return r, counted(ctx, rc, r)
	default:
		r.Kind, r.KeyTyp = "foreign", typ
		return r, nil
	}
	if r.Kind == "rlock" || r.Kind == "rwlock" {
		if r.WaitingClients, err = waitingClients(ctx, rc, names, r.Kind == "rwlock"); err != nil {
			return nil, err
		}
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
			r.Queue = append(r.Queue, QueueEntry{Owner: w, ExpiresInMs: until(score, now)})
		}
	}
	return r, nil
}

// maxReadLeases is the most holds of one reader whose leases inspect reads, one timeout
// key each: a reader re-enters its hold far less often (as rwlock_unlock.lua takes it).
const maxReadLeases = 1000

// maxLockFields is the most fields inspect expects of a lock's hash (one per holder);
// a hash with more is read whole only when a page of it has a lock's shape.
// sampledFields is the size of that page.
const maxLockFields, sampledFields = 10000, 100

// noExpiry is the score Redisson gives a permit leased without a lease time.
const noExpiry = 922337203685477

// counted completes the report of a key that holds a whole number, or of no key: a
// semaphore when clients queue for its permits or wait on its channel, a latch when
// clients wait on its channel, else "count" (either, with nobody waiting).
func counted(ctx context.Context, rc rueidis.Client, r *Report) error {
	sem := keys.SemaphoreOf(r.Name)
	zs, err := rc.Do(ctx, rc.B().Zrange().Key(sem.Queue).Min("0").Max("-1").Build()).AsStrSlice()
	if err != nil {
		return keyErr(sem.Queue, err)
	}
	leased, err := rc.Do(ctx, rc.B().Zrange().Key(sem.Leases).Min("0").Max("-1").Withscores().Build()).AsZScores()
	if err != nil {
		return keyErr(sem.Leases, err)
	}
	var now int64 // Redis's clock, read once for the queue's deadlines and the leases
	if len(zs) > 0 || len(leased) > 0 {
		if now, err = redisNowMs(ctx, rc); err != nil {
			return err
		}
	}
	for _, client := range zs {
		score, err := rc.Do(ctx, rc.B().Zscore().Key(sem.Deadlines).Member(client).Build()).AsFloat64()
		if err != nil && !rueidis.IsRedisNil(err) {
			return keyErr(sem.Deadlines, err)
		}
		r.PermitWaiters = append(r.PermitWaiters, QueueEntry{Owner: client, ExpiresInMs: until(score, now)})
	}
	for _, z := range leased {
		p := LeasedPermit{ID: hex.EncodeToString([]byte(z.Member)), ExpiresInMs: until(z.Score, now)}
		if z.Score >= noExpiry {
			p.ExpiresInMs, p.NoExpiry = 0, true
		}
		r.Leased = append(r.Leased, p)
	}
	semSubs, err := subscribers(ctx, rc, sem.Channel)
	if err != nil {
		return err
	}
	var latchSubs int64
	if keys.CheckLatch(r.Name) == nil {
		if latchSubs, err = subscribers(ctx, rc, keys.LatchOf(r.Name).Channel); err != nil {
			return err
		}
	}
	switch {
	case len(r.PermitWaiters) > 0 || len(r.Leased) > 0 || semSubs > 0:
		r.Kind, r.Subscribers = "semaphore", semSubs
	case latchSubs > 0:
		r.Kind, r.Subscribers = "latch", latchSubs
	default:
		r.Kind = "count"
	}
	return nil
}

// shape tells a lock's hash from other data: "rlock" when every field is an owner
// "<uuid>:<n>" with a positive hold count, "rwlock" when there is also a field mode (read
// or write) and writers' fields "<uuid>:<n>:write", and "" for anything else, a hash of
// mode alone too (a lock has a holder). The scripts check the same shape before they touch
// a hash (lua/shape.lua).
func shape(fields map[string]string) string {
	if _, ok := fields["mode"]; ok && len(fields) == 1 {
		return ""
	}
	kind := "rlock"
	if mode, ok := fields["mode"]; ok {
		if mode != "read" && mode != "write" {
			return ""
		}
		kind = "rwlock"
	}
	for f, v := range fields {
		if f == "mode" {
			continue
		}
		if n, err := strconv.ParseInt(v, 10, 64); err != nil || n <= 0 || v != strconv.FormatInt(n, 10) {
			return ""
		}
		if base, ok := keys.IsWriteField(f); ok && kind == "rwlock" {
			f = base
		}
		if !keys.IsOwner(f) {
			return ""
		}
	}
	return kind
}

// waitingWriters reads an rwlock's zset of waiting writers ("<owner>:write" → deadline in
// Redis time), in the order of their deadlines.
func waitingWriters(ctx context.Context, rc rueidis.Client, name string) ([]QueueEntry, error) {
	zs, err := rc.Do(ctx, rc.B().Zrange().Key(keys.Of(name).Writers).Min("0").Max("-1").Withscores().Build()).AsZScores()
	if err != nil {
		return nil, keyErr(keys.Of(name).Writers, err)
	}
	if len(zs) == 0 {
		return nil, nil
	}
	now, err := redisNowMs(ctx, rc)
	if err != nil {
		return nil, err
	}
	ws := make([]QueueEntry, len(zs))
	for i, z := range zs {
		owner, _ := keys.IsWriteField(z.Member)
		ws[i] = QueueEntry{Owner: owner, ExpiresInMs: until(z.Score, now)}
	}
	return ws, nil
}

// waitingClients reads a lock's wake registry in the order of its scores, which is the
// order its clients registered and an unlock wakes them, and with readers an rwlock's
// registry of clients with readers waiting.
func waitingClients(ctx context.Context, rc rueidis.Client, names keys.Names, readers bool) ([]WaitingClient, error) {
	registries := []string{names.Wake}
	if readers {
		registries = append(registries, names.Readers)
	}
	var ws []WaitingClient
	for _, key := range registries {
		codes, err := rc.Do(ctx, rc.B().Zrange().Key(key).Min("0").Max("-1").Build()).AsStrSlice()
		if err != nil {
			return nil, keyErr(key, err)
		}
		for _, code := range codes {
			ws = append(ws, WaitingClient{Code: code, Readers: key == names.Readers})
		}
	}
	return ws, nil
}

// subscribers counts the connections subscribed to channel. Sharded subscriptions (a
// cluster on Redis 7 or newer) live on the node that owns the channel's slot, where the
// command is routed; classic ones on whichever node the client chose, so in a cluster
// every node is asked. A server without sharded pub/sub (older ones, miniredis) refuses
// SHARDNUMSUB, which then counts nothing.
func subscribers(ctx context.Context, rc rueidis.Client, channel string) (int64, error) {
	var n int64
	sharded, err := numsub(rc.Do(ctx, rc.B().PubsubShardnumsub().Channel(channel).Build()))
	if _, refused := rueidis.IsRedisErr(err); err != nil && !refused {
		return 0, err
	}
	n += sharded
	if rc.Mode() != rueidis.ClientModeCluster {
		classic, err := numsub(rc.Do(ctx, rc.B().PubsubNumsub().Channel(channel).Build()))
		return n + classic, err
	}
	// A node that does not answer (a failed replica the topology still lists) costs its
	// count, not the whole view: an operator looks at locks most when a cluster is unwell.
	for _, node := range rc.Nodes() {
		if classic, err := numsub(node.Do(ctx, node.B().PubsubNumsub().Channel(channel).Build())); err == nil {
			n += classic
		}
	}
	return n, nil
}

// numsub reads the count of a one-channel NUMSUB or SHARDNUMSUB reply: [channel, count].
func numsub(res rueidis.RedisResult) (int64, error) {
	reply, err := res.ToArray()
	if err != nil {
		return 0, err
	}
	if len(reply) != 2 {
		return 0, fmt.Errorf("NUMSUB: %d elements in the reply, want 2", len(reply))
	}
	return reply[1].AsInt64()
}

// farthest is the most milliseconds from now that a deadline is shown as: as much as a
// time.Duration holds (about 292 years), which ms prints.
const farthest = math.MaxInt64 / 1_000_000

// until is how many milliseconds from now (Redis's clock, in milliseconds) a deadline
// scored score is, within ±farthest. A score is any double, -inf and +inf too (data written
// by hand), which int64 does not hold: such a deadline is long past or far ahead.
func until(score float64, now int64) int64 {
	switch d := score - float64(now); {
	case d >= farthest:
		return farthest
	case d <= -farthest:
		return -farthest
	}
	return int64(score) - now
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

// foreign says what a key that is not a lock holds: "a list", "a hash of 2 fields that
// is not a lock's".
func (r *Report) foreign() string {
	switch {
	case r.KeyTyp != "hash":
		return "a " + r.KeyTyp
	case r.FieldCount == 1:
		return "a hash of 1 field that is not a lock's"
	}
	return fmt.Sprintf("a hash of %d fields that is not a lock's", r.FieldCount)
}

// print writes the report as text, or as one JSON object.
func (r *Report) print(w io.Writer, asJSON bool) error {
	if asJSON {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(r)
	}
	switch {
	case r.Kind == "foreign" && r.KeyTyp == "hash":
		fields := preview(r.Fields, 5, r.FieldCount)
		for i, f := range fields {
			fields[i] = shown(f)
		}
		fmt.Fprintf(w, "%s: not a lock (the key holds %s: %s)\n", shown(r.Name), r.foreign(), strings.Join(fields, ", "))
		return nil
	case r.Kind == "foreign":
		fmt.Fprintf(w, "%s: not a lock (the key holds %s)\n", shown(r.Name), r.foreign())
		return nil
	case r.Kind == "none" && (r.Subscribers > 0 || len(r.WaitingClients) > 0):
		fmt.Fprintf(w, "%s: free: no such key; waiters are parked, and try when the lease they last saw runs out\n", shown(r.Name))
	case r.Kind == "none":
		fmt.Fprintf(w, "%s: free: no such key\n", shown(r.Name))
	case r.Kind == "count":
		fmt.Fprintf(w, "%s: %d (a semaphore's available permits or a count-down latch's count; nobody waits)\n", shown(r.Name), *r.Count)
		return nil
	case r.Kind == "semaphore":
		n := int64(0)
		if r.Count != nil {
			n = *r.Count
		}
		fmt.Fprintf(w, "%s: semaphore, %d permits available\n", shown(r.Name), n)
	case r.Kind == "latch":
		fmt.Fprintf(w, "%s: count-down latch, count %d\n", shown(r.Name), *r.Count)
	case !r.Locked && len(r.Queue) == 0 && len(r.Writers) == 0:
		fmt.Fprintf(w, "%s: free\n", shown(r.Name))
	default:
		state := "held"
		if !r.Locked {
			state = "free, waiters queued"
		}
		fmt.Fprintf(w, "%s: %s, %s", shown(r.Name), r.Kind, state)
		if r.Mode != "" {
			fmt.Fprintf(w, " (%s mode)", r.Mode)
		}
		switch {
		case r.Locked && r.TTLMs == -1:
			fmt.Fprint(w, ", no expiry") // PERSIST by hand: neither relock nor Redisson makes one
		case r.Locked:
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
		fmt.Fprintf(w, "  %-44s %s ×%d", shown(o.Owner), role, o.Holds)
		if len(o.ReadTTLsMs) > 0 {
			parts := make([]string, len(o.ReadTTLsMs))
			for i, t := range o.ReadTTLsMs {
				parts[i] = ms(t)
			}
			fmt.Fprintf(w, "  (leases %s)", strings.Join(parts, ", "))
		}
		fmt.Fprintf(w, "  %s\n", r.clientText(o.Client))
	}
	for i, q := range r.Queue {
		state := "live, entry expires in " + ms(q.ExpiresInMs)
		if q.ExpiresInMs <= 0 {
			state = "dead (entry expired), will be skipped"
		}
		fmt.Fprintf(w, "  queue %-2d %-44s %s; %s\n", i+1, shown(q.Owner), state, r.clientText(q.Client))
	}
	for _, q := range r.Writers {
		state := "waits (new readers give way), entry expires in " + ms(q.ExpiresInMs)
		if q.ExpiresInMs <= 0 {
			state = "dead (entry expired), ignored"
		}
		fmt.Fprintf(w, "  writer   %-44s %s; %s\n", shown(q.Owner), state, r.clientText(q.Client))
	}
	for _, p := range r.Leased {
		state := "runs out in " + ms(p.ExpiresInMs)
		switch {
		case p.NoExpiry:
			state = "leased without expiry"
		case p.ExpiresInMs <= 0:
			state = "ran out; the next acquisition or count puts it back"
		}
		fmt.Fprintf(w, "  leased permit %s  %s\n", p.ID, state)
	}
	for i, q := range r.PermitWaiters {
		state := "live, entry expires in " + ms(q.ExpiresInMs)
		if q.ExpiresInMs <= 0 {
			state = "dead (entry expired), will be skipped"
		}
		fmt.Fprintf(w, "  queue %-2d relock client %-30s %s; %s\n", i+1, shown(q.Owner), state, r.clientText(q.Client))
	}
	if r.Subscribers > 0 {
		what := "the lock's wake-up channel"
		switch r.Kind {
		case "semaphore":
			what = "the semaphore's channel"
		case "latch":
			what = "the latch's channel"
		}
		fmt.Fprintf(w, "  waiting clients  %d (subscribed to %s)\n", r.Subscribers, what)
	}
	for _, c := range r.WaitingClients {
		waiters := "waiters"
		if r.Kind == "rwlock" {
			waiters = "writers"
			if c.Readers {
				waiters = "readers"
			}
		}
		who := "wake code " + shown(c.Code)
		if c.ClientID != "" {
			who = "relock client " + shown(c.ClientID) + " (" + who + ")"
		}
		fmt.Fprintf(w, "  parked %s of %s; %s\n", waiters, who, r.clientText(c.Client))
	}
	if r.Token != nil {
		fmt.Fprintf(w, "  fencing token  %d (last handed out)\n", *r.Token)
	}
	for _, note := range r.clientNotes() {
		fmt.Fprintf(w, "  %s\n", note)
	}
	return nil
}

// preview returns the first n of names, and how many more of all there are, in a new
// slice.
func preview(names []string, n int, all int64) []string {
	if len(names) > n {
		names = names[:n:n]
	}
	names = append([]string(nil), names...)
	if more := all - int64(len(names)); more > 0 {
		names = append(names, fmt.Sprintf("and %d more", more))
	}
	return names
}

// shown is how text read from Redis (a name, a field) is printed: as it is when it is
// UTF-8 whose every character is printable, else quoted with Go's escapes, so that an
// escape sequence or a carriage return in a key cannot move the cursor, clear the screen
// or hide a line, and a byte that is not UTF-8 is shown as the byte it is (\xff) rather
// than as whatever the terminal makes of it. Text that begins with a double quote is
// quoted too: as it is, it would read as the quoted spelling of other text.
func shown(s string) string {
	if !utf8.ValidString(s) || strings.HasPrefix(s, `"`) {
		return strconv.Quote(s)
	}
	for _, r := range s {
		if !unicode.IsPrint(r) {
			return strconv.Quote(s)
		}
	}
	return s
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

// keyErr names the key a read of it failed on.
func keyErr(key string, err error) error {
	return fmt.Errorf("key %s: %w", strconv.Quote(key), err)
}
