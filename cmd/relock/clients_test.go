package main

import (
	"context"
	"encoding/json"
	"net"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/relock-go/relock"
	"github.com/relock-go/relock/internal/redistest"
	"github.com/relock-go/relock/internal/redistest/relocktest"
)

// namedConns returns the addresses of the connections named "relock:<id>:<wake code>" that
// CLIENT LIST shows on every server of b, as the test sees them by itself.
func namedConns(t *testing.T, b *redistest.Backend, id string) []string {
	t.Helper()
	var addrs []string
	for _, c := range listConns(t, b) {
		if strings.HasPrefix(c.name, "relock:"+id+":") {
			addrs = append(addrs, c.addr)
		}
	}
	return addrs
}

// wakeCodeOf returns the wake code in the names of the connections of the client id, as
// CLIENT LIST shows them on every server of b, or "" when none is named after the client.
func wakeCodeOf(t *testing.T, b *redistest.Backend, id string) string {
	t.Helper()
	code := ""
	for _, c := range listConns(t, b) {
		if rest, ok := strings.CutPrefix(c.name, "relock:"+id+":"); ok {
			if code != "" && rest != code {
				t.Fatalf("the connections of client %s carry the wake codes %s and %s", id, code, rest)
			}
			code = rest
		}
	}
	return code
}

type listedConn struct{ addr, name string }

// listConns returns the connections that CLIENT LIST shows on every server of b.
func listConns(t *testing.T, b *redistest.Backend) []listedConn {
	t.Helper()
	servers := []*redistest.Server{b.Server}
	if b.Cluster != nil {
		servers = b.Cluster.Nodes()
	}
	var conns []listedConn
	for _, s := range servers {
		list, err := s.Do(t, "CLIENT", "LIST").ToString()
		if err != nil {
			t.Fatalf("CLIENT LIST on %s: %v", s.Addr(), err)
		}
		for _, line := range strings.Split(list, "\n") {
			var addr, name string
			for _, kv := range strings.Fields(line) {
				switch {
				case strings.HasPrefix(kv, "addr="):
					addr = kv[len("addr="):]
				case strings.HasPrefix(kv, "name="):
					name = kv[len("name="):]
				}
			}
			conns = append(conns, listedConn{addr, name})
		}
	}
	return conns
}

// connArgs are the connection flags that reach b.
func connArgs(b *redistest.Backend) []string {
	if b.Cluster != nil {
		return []string{"--cluster", "--redis", strings.Join(b.Cluster.Addrs(), ",")}
	}
	return []string{"--redis", b.Addr}
}

// inspectBinary runs the built command's inspect on b and, with --json, decodes the report.
func inspectBinary(t *testing.T, b *redistest.Backend, args ...string) (string, *Report) {
	t.Helper()
	stdout, stderr, status := runBinary(t, nil, append(append([]string{"inspect"}, connArgs(b)...), args...)...)
	if status != 0 || stderr != "" {
		t.Fatalf("relock inspect %q: status %d\n%s%s", args, status, stdout, stderr)
	}
	if args[0] != "--json" {
		return stdout, nil
	}
	var r Report
	if err := json.Unmarshal([]byte(stdout), &r); err != nil {
		t.Fatalf("relock inspect %q: %v\n%s", args, err, stdout)
	}
	return stdout, &r
}

// everyNodeKnown waits, on a cluster, until every node's CLUSTER SLOTS lists every node of
// the cluster. Just after the cluster forms, a node may not list a replica yet; inspect's
// client, which takes its nodes from the slot map of the node it asks, would then not look
// at that replica, where a client's subscriber connection may be.
func everyNodeKnown(t *testing.T, b *redistest.Backend) {
	t.Helper()
	if b.Cluster == nil {
		return
	}
	nodes := b.Cluster.Nodes()
	redistest.Eventually(t, 20*time.Second, "a node's slot map does not list every node", func() bool {
		for _, s := range nodes {
			ranges, err := s.Do(t, "CLUSTER", "SLOTS").ToArray()
			if err != nil {
				return false
			}
			listed := map[string]bool{}
			for _, r := range ranges {
				entry, _ := r.ToArray()
				for i := 2; i < len(entry); i++ {
					node, _ := entry[i].ToArray()
					if len(node) >= 2 {
						host, _ := node[0].ToString()
						port, _ := node[1].AsInt64()
						listed[net.JoinHostPort(host, strconv.FormatInt(port, 10))] = true
					}
				}
			}
			for _, n := range nodes {
				if !listed[n.Addr()] {
					return false
				}
			}
		}
		return true
	})
}

// tracedClient returns a relock client on b whose one named connection is its subscriber
// connection. On the cluster it takes classic pub/sub: its subscriber connection goes to
// one node of its choice. (With sharded pub/sub, the default there, its one named
// connection is an idle one of its own: see TestInspectShardedClientsFound.)
func tracedClient(t *testing.T, b *redistest.Backend, opts ...relock.Option) *relock.Client {
	if b.Cluster != nil {
		opts = append(opts, relock.WithShardedPubSub(false))
	}
	return relocktest.New(t, b, opts...)
}

// An owner traces to its process: for each holder and waiter, inspect shows the address and
// age of the connection that carries its client's name, relock:<client id>:<wake code>,
// wherever it is (in a cluster, on any node: a client's subscriber connection goes to one
// node of its choice); and it says so plainly when no connection carries the name (the
// process is gone, and its holds run out with their lease).
func TestInspectShowsClients(t *testing.T) {
	redistest.RealWithCluster(t, func(t *testing.T, b *redistest.Backend) {
		everyNodeKnown(t, b)
		ctx := redistest.Context(t, 2*time.Minute)
		start := time.Now()
		names := []string{"orders"}
		if b.Cluster != nil {
			names = b.Cluster.NamesOnEveryMaster(t, "orders-")
		}
		// One client for each lock: each has its one named connection, its subscriber.
		clients := make([]*relock.Client, len(names))
		for i, name := range names {
			clients[i] = tracedClient(t, b)
			holdLock(t, clients[i], name)
		}
		for _, c := range clients {
			redistest.Eventually(t, 20*time.Second, "a client's connection is not named after it", func() bool {
				return len(namedConns(t, b, c.ID())) == 1
			})
		}
		for i, name := range names {
			want := namedConns(t, b, clients[i].ID())[0]
			_, r := inspectBinary(t, b, "--json", name)
			if len(r.Owners) != 1 || r.ClientsUnknown != "" {
				t.Fatalf("inspect --json %s: %+v", name, r)
			}
			got := r.Owners[0].Client
			if got == nil || got.Addr != want || got.Connections != 1 ||
				got.AgeSeconds < 0 || got.AgeSeconds > int64(time.Since(start)/time.Second)+1 {
				t.Errorf("inspect --json %s: the holder's client is %+v; want addr %s, 1 connection, an age within the test's", name, got, want)
			}
			out, _ := inspectBinary(t, b, name)
			line := regexp.MustCompile(`\n  ` + regexp.QuoteMeta(clients[i].ID()) + `:\d+ +holds ×1  client ` + regexp.QuoteMeta(want) + `, connected \d+s\n`)
			if !line.MatchString(out) || strings.Contains(out, "not connected") {
				t.Errorf("inspect %s does not show the holder's client at %s:\n%s", name, want, out)
			}
		}

		// A fair lock's waiter is traced to its own client, not the holder's.
		holder, waiter := tracedClient(t, b), tracedClient(t, b)
		fl := holder.FairLock("jobs")
		fh, err := fl.Lock(ctx)
		if err != nil {
			t.Fatal(err)
		}
		waited := async(func() error {
			wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
			defer cancel()
			h, err := waiter.FairLock("jobs").Lock(wctx)
			if err != nil {
				return err
			}
			return waiter.FairLock("jobs").Unlock(h)
		})
		var r *Report
		redistest.Eventually(t, 20*time.Second, "the waiter is not queued, or its client not named", func() bool {
			_, r = inspectBinary(t, b, "--json", "jobs")
			return len(r.Queue) == 1 && len(namedConns(t, b, waiter.ID())) == 1 && len(namedConns(t, b, holder.ID())) == 1
		})
		wantHolder, wantWaiter := namedConns(t, b, holder.ID())[0], namedConns(t, b, waiter.ID())[0]
		if len(r.Owners) != 1 || r.Owners[0].Client == nil || r.Owners[0].Client.Addr != wantHolder ||
			r.Queue[0].Client == nil || r.Queue[0].Client.Addr != wantWaiter {
			t.Errorf("inspect --json jobs: %+v; want the holder's client at %s and the waiter's at %s", r, wantHolder, wantWaiter)
		}
		out, _ := inspectBinary(t, b, "jobs")
		if !regexp.MustCompile(`\n  queue 1  ` + regexp.QuoteMeta(waiter.ID()) + `:\d+ +live, entry expires in [^;\n]+; client ` + regexp.QuoteMeta(wantWaiter) + `, connected \d+s\n`).MatchString(out) {
			t.Errorf("inspect jobs does not show the waiter's client at %s:\n%s", wantWaiter, out)
		}
		if err := fl.Unlock(fh); err != nil {
			t.Fatal(err)
		}
		await(t, "the fair waiter", waited)

		// A process that went away without releasing: its hold stays until its lease runs
		// out, and no connection carries its name any more.
		gone := tracedClient(t, b, relock.WithReleaseOnClose(false))
		holdLock(t, gone, "stale")
		redistest.Eventually(t, 20*time.Second, "the client's connection is not named after it", func() bool {
			return len(namedConns(t, b, gone.ID())) == 1
		})
		if _, r := inspectBinary(t, b, "--json", "stale"); len(r.Owners) != 1 || r.Owners[0].Client == nil {
			t.Errorf("inspect --json stale before the client closes: %+v; want its client", r)
		}
		if err := gone.Close(); err != nil {
			t.Fatal(err)
		}
		redistest.Eventually(t, 20*time.Second, "the closed client's connection is still listed", func() bool {
			return len(namedConns(t, b, gone.ID())) == 0
		})
		if _, r := inspectBinary(t, b, "--json", "stale"); !r.Locked || len(r.Owners) != 1 || r.Owners[0].Client != nil || r.ClientsUnknown != "" {
			t.Errorf("inspect --json stale after its client closed: %+v; want the owner with no client", r)
		}
		column, note := "client not connected", "\n  not connected: no connection is named relock:<client id>:<wake code>;"
		if b.Cluster != nil {
			column, note = "client not found", "\n  not found: no connection on any node is named relock:<client id>:<wake code>;"
		}
		out, _ = inspectBinary(t, b, "stale")
		if !regexp.MustCompile(`\n  `+regexp.QuoteMeta(gone.ID())+`:\d+ +holds ×1  `+column+`\n`).MatchString(out) ||
			!strings.Contains(out, note) {
			t.Errorf("inspect stale after its client closed does not say it is not connected:\n%s", out)
		}
	})
}

// A client made by relock.Dial names every connection it opens, on a cluster on every node
// it talks to: inspect counts them all and shows the oldest.
func TestInspectCountsADialClientsConnections(t *testing.T) {
	redistest.RealWithCluster(t, func(t *testing.T, b *redistest.Backend) {
		everyNodeKnown(t, b)
		c, err := relock.Dial("redis://" + b.Addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		name := "orders"
		if b.Cluster != nil {
			name = b.Cluster.NamesOnEveryMaster(t, "orders-")[1] // not on the node dialled
		}
		holdLock(t, c, name)
		// rueidis opens connections as it needs them: compare a report with the
		// connections the test sees just before and just after it.
		var addrs []string
		var r *Report
		counted := redistest.Await(20*time.Second, func() bool {
			before := namedConns(t, b, c.ID())
			_, r = inspectBinary(t, b, "--json", name)
			addrs = namedConns(t, b, c.ID())
			return len(addrs) >= 2 && strings.Join(before, " ") == strings.Join(addrs, " ") &&
				len(r.Owners) == 1 && r.Owners[0].Client != nil && r.Owners[0].Client.Connections == len(addrs)
		})
		if !counted {
			owners, _ := json.Marshal(r.Owners)
			t.Fatalf("inspect --json %s: owners %s; want a client with the %d connections %q", name, owners, len(addrs), addrs)
		}
		if !slices.Contains(addrs, r.Owners[0].Client.Addr) {
			t.Errorf("inspect --json %s: the client's address %q is none of its connections' %q", name, r.Owners[0].Client.Addr, addrs)
		}
		out, _ := inspectBinary(t, b, name)
		if !regexp.MustCompile(`holds ×1  client \S+, connected \d+s \(\d+ connections\)\n`).MatchString(out) {
			t.Errorf("inspect %s does not count the Dial client's connections:\n%s", name, out)
		}
	})
}

// On a cluster with sharded pub/sub (its default on Redis 7 and newer), the subscriptions
// of a client made by relock.New run on the rueidis client's own connections, which carry
// no name; the client keeps an idle connection named after it, so inspect still finds a
// live holder.
func TestInspectShardedClientsFound(t *testing.T) {
	redistest.RealWithCluster(t, func(t *testing.T, b *redistest.Backend) {
		if b.Cluster == nil {
			t.Skip("sharded pub/sub is for clusters")
		}
		c := relocktest.New(t, b)
		holdLock(t, c, "orders")
		var out string
		redistest.Eventually(t, 20*time.Second, "inspect never found the sharded client's connection", func() bool {
			out, _ = inspectBinary(t, b, "orders")
			return regexp.MustCompile(`holds ×1  client 127\.0\.0\.1:\d+, connected \d+s\n`).MatchString(out)
		})
		if strings.Contains(out, "not found") {
			t.Errorf("inspect on a cluster, a relock.New holder with sharded pub/sub:\n%s", out)
		}
	})
}

// A server without CLIENT LIST (miniredis), or a user not allowed it, still gets the view:
// every client shows as unknown, and why, once.
func TestInspectClientsUnknown(t *testing.T) {
	b := redistest.Mini(t)
	c := relocktest.New(t, b)
	holdLock(t, c, "orders")
	out, err := relockCmd(t, b.Addr, "", "inspect", "orders")
	if err != nil || !regexp.MustCompile(`holds ×1  client unknown\n(.*\n)*  clients unknown: CLIENT LIST on \S+: .+\n$`).MatchString(out) {
		t.Errorf("inspect on a server without CLIENT LIST: %v\n%s", err, out)
	}
	r := inspectJSON(t, b.Addr, "orders")
	if len(r.Owners) != 1 || r.Owners[0].Client != nil || !strings.Contains(r.ClientsUnknown, "CLIENT LIST") {
		t.Errorf("inspect --json on a server without CLIENT LIST: %+v", r)
	}
}

// A line of CLIENT LIST that is not as documented is skipped, never a panic.
func TestClientFieldsOddLines(t *testing.T) {
	for _, line := range []string{"", "=", "name", "name=", "addr==x name=relock:", "  \t ", "age=x name=relock:abc"} {
		_ = clientFields(line)
	}
	f := clientFields("id=3 addr=127.0.0.1:5000 laddr=127.0.0.1:6379 fd=8 name=relock:abc age=12 idle=0")
	if f["addr"] != "127.0.0.1:5000" || f["name"] != "relock:abc" || f["age"] != "12" {
		t.Errorf("clientFields: %v", f)
	}
}

// Of the connections that carry a client's name, inspect shows the oldest: its address, and
// its age, which is how long the process has been connected. Here a second connection
// takes the name seconds after the first. Guards against the newest connection shown,
// which would make a long-lived holder look newly come.
func TestInspectShowsTheOldestConnection(t *testing.T) {
	redistest.Real(t, func(t *testing.T, b *redistest.Backend) {
		c := tracedClient(t, b)
		holdLock(t, c, "orders")
		first, code := traced(t, b, c)
		var r *Report
		redistest.Eventually(t, 20*time.Second, "the client's connection is not 2s old", func() bool {
			_, r = inspectBinary(t, b, "--json", "orders")
			return len(r.Owners) == 1 && r.Owners[0].Client != nil && r.Owners[0].Client.AgeSeconds >= 2
		})
		later := b.ClientWith(t, func(o *rueidis.ClientOption) { o.ClientName = "relock:" + c.ID() + ":" + code })
		redistest.MustDo(t, later, "PING")
		redistest.Eventually(t, 20*time.Second, "the second connection does not carry the name", func() bool {
			return len(namedConns(t, b, c.ID())) == 2
		})
		_, r = inspectBinary(t, b, "--json", "orders")
		if got := r.Owners[0].Client; got == nil || got.Addr != first || got.AgeSeconds < 2 || got.Connections != 2 {
			t.Errorf("inspect --json orders: the holder's client is %+v; want the oldest connection, %s, at least 2s old, of 2", got, first)
		}
	})
}

// inspect pointed at a replica shows the lock as the replica has it, but the replica's
// connections are not the master's, where the holder's are: the client column says the
// clients are unknown, and the note says why (a replica) and where to look (its master),
// rather than calling a live holder "not connected", which reads as a process that is gone.
func TestInspectOnAReplicaSaysClientsUnknown(t *testing.T) {
	master := redistest.StartServer(t)
	_, port, _ := strings.Cut(master.Addr(), ":")
	replica := redistest.StartServer(t, "--replicaof", "127.0.0.1", port)
	b := &redistest.Backend{Name: "redis", Addr: master.Addr(), Server: master}
	c := tracedClient(t, b)
	holdLock(t, c, "on-replica")
	rb := &redistest.Backend{Name: "redis", Addr: replica.Addr(), Server: replica}
	side := rb.Client(t)
	redistest.Eventually(t, 20*time.Second, "the replica has the lock", func() bool {
		n, err := redistest.Do(t, side, "EXISTS", "on-replica").AsInt64()
		return err == nil && n == 1
	})
	if _, r := inspectBinary(t, b, "--json", "on-replica"); len(r.Owners) != 1 || r.Owners[0].Client == nil {
		t.Fatalf("inspect --json on the master: %+v; want its owner with a client", r)
	}
	_, r := inspectBinary(t, rb, "--json", "on-replica")
	if !r.Locked || len(r.Owners) != 1 || r.Owners[0].Client != nil ||
		!strings.Contains(r.ClientsUnknown, "replica") || !strings.Contains(r.ClientsUnknown, master.Addr()) {
		t.Errorf("inspect --json on the replica: %+v; want the owner, no client, and clients unknown naming the replica's master %s", r, master.Addr())
	}
	out, _ := inspectBinary(t, rb, "on-replica")
	if !strings.Contains(out, "client unknown") || strings.Contains(out, "not connected") {
		t.Errorf("inspect on the replica:\n%s\nwant the client column unknown, never \"not connected\"", out)
	}
}
