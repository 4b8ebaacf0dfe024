package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/redis/rueidis"

	"github.com/relock-go/relock/internal/core"
	"github.com/relock-go/relock/internal/keys"
)

// findClients looks up, in CLIENT LIST, the process behind each owner and waiter of the
// report: the connections whose name, relock:<client id>:<wake code> (core.ConnName),
// carries its client id or, for a client in a wake registry, its wake code. In a cluster a
// client's connections may be on any node (its subscriber connection on one, its commands
// on others), so every node is asked; a node that does not answer costs what it would
// have shown. When no node answers, r.ClientsUnknown says why, and no owner or waiting
// client shows a client.
func (r *Report) findClients(ctx context.Context, rc rueidis.Client) {
	type entry struct {
		owner string
		slot  **ClientConn
	}
	var entries []entry
	for i := range r.Owners {
		entries = append(entries, entry{r.Owners[i].Owner, &r.Owners[i].Client})
	}
	for _, qs := range [][]QueueEntry{r.Queue, r.Writers, r.PermitWaiters} {
		for i := range qs {
			entries = append(entries, entry{qs[i].Owner, &qs[i].Client})
		}
	}
	ids, codes := map[string]bool{}, map[string]bool{}
	for _, e := range entries {
		if id, ok := clientID(e.owner); ok {
			ids[id] = true
		}
	}
	for _, w := range r.WaitingClients {
		codes[w.Code] = true
	}
	if len(entries) == 0 && len(codes) == 0 {
		return
	}
	r.cluster = rc.Mode() == rueidis.ClientModeCluster
	conns, err := clientList(ctx, rc, ids, codes)
	if err != nil {
		r.ClientsUnknown = err.Error()
		return
	}
	for _, e := range entries {
		if id, ok := clientID(e.owner); ok {
			*e.slot = conns.byID[id] // nil: no connection carries the id
		}
	}
	for i := range r.WaitingClients {
		w := &r.WaitingClients[i]
		if c := conns.byCode[w.Code]; c != nil {
			w.ClientID, w.Client = conns.codeID[w.Code], c
		}
	}
}

// clientID is the client id of an owner "<client id>:<n>", or of a semaphore's waiting
// client, which is its id alone, when it has one.
func clientID(owner string) (string, bool) {
	id, _, _ := strings.Cut(owner, ":")
	return id, keys.IsUUID(id)
}

// clientConns are the relock clients' connections that clientList found.
type clientConns struct {
	byID   map[string]*ClientConn // by client id, for the ids asked for
	byCode map[string]*ClientConn // by wake code, for the codes asked for
	codeID map[string]string      // the client id in the name of a code's connections
}

// clientList runs CLIENT LIST on every node of rc and returns, for each of ids and codes
// that a connection's name carries (see core.ParseConnName), its oldest such connection
// and how many it has. It fails only when no node answered.
func clientList(ctx context.Context, rc rueidis.Client, ids, codes map[string]bool) (clientConns, error) {
	found := clientConns{byID: map[string]*ClientConn{}, byCode: map[string]*ClientConn{}, codeID: map[string]string{}}
	nodes := rc.Nodes()
	addrs := make([]string, 0, len(nodes))
	for addr := range nodes {
		addrs = append(addrs, addr)
	}
	sort.Strings(addrs) // the same failure named each time, whichever node fails first
	if rc.Mode() != rueidis.ClientModeCluster && len(addrs) == 1 {
		if master, ok := replicaOf(ctx, nodes[addrs[0]]); ok {
			return clientConns{}, fmt.Errorf("%s is a replica, whose connections are not its master's: inspect the master, %s", addrs[0], master)
		}
	}
	var errs []error
	answered := 0
	for _, addr := range addrs {
		node := nodes[addr]
		text, err := node.Do(ctx, node.B().ClientList().Build()).ToString()
		if err != nil {
			errs = append(errs, fmt.Errorf("CLIENT LIST on %s: %w", addr, err))
			continue
		}
		answered++
		for _, line := range strings.Split(text, "\n") {
			f := clientFields(line)
			id, code, ok := core.ParseConnName(f["name"])
			if !ok || !ids[id] && !codes[code] {
				continue
			}
			age, err := strconv.ParseInt(f["age"], 10, 64)
			if err != nil {
				continue // not a line of CLIENT LIST as documented: nothing to show from it
			}
			if ids[id] {
				count(found.byID, id, f["addr"], age)
			}
			if codes[code] {
				count(found.byCode, code, f["addr"], age)
				if _, seen := found.codeID[code]; !seen {
					found.codeID[code] = id
				}
			}
		}
	}
	if answered == 0 {
		if len(errs) == 0 {
			return clientConns{}, errors.New("CLIENT LIST: no node to ask")
		}
		return clientConns{}, errs[0]
	}
	return found, nil
}

// replicaOf tells whether node is a replica (ROLE), and the address of its master. A node
// that does not answer ROLE is taken for a master.
func replicaOf(ctx context.Context, node rueidis.Client) (master string, ok bool) {
	role, err := node.Do(ctx, node.B().Role().Build()).ToArray()
	if err != nil || len(role) < 3 {
		return "", false
	}
	if kind, err := role[0].ToString(); err != nil || kind != "slave" && kind != "replica" {
		return "", false
	}
	host, err := role[1].ToString()
	if err != nil {
		return "", false
	}
	port, err := role[2].AsInt64()
	if err != nil {
		return "", false
	}
	return net.JoinHostPort(host, strconv.FormatInt(port, 10)), true
}

// count adds a connection at addr, open for age seconds, to key's in m: one more
// connection, and its address when it is the oldest so far.
func count(m map[string]*ClientConn, key, addr string, age int64) {
	c := m[key]
	if c == nil {
		c = &ClientConn{AgeSeconds: -1}
		m[key] = c
	}
	c.Connections++
	if age > c.AgeSeconds {
		c.Addr, c.AgeSeconds = addr, age
	}
}

// clientFields splits a line of CLIENT LIST, "id=7 addr=127.0.0.1:5000 ... name=x ...",
// into its fields. Redis refuses a client name with a space, so no value has one.
func clientFields(line string) map[string]string {
	f := map[string]string{}
	for _, kv := range strings.Fields(line) {
		if k, v, ok := strings.Cut(kv, "="); ok {
			f[k] = v
		}
	}
	return f
}

// clientText is the text view of the process behind an owner, a waiter or a waiting
// client.
func (r *Report) clientText(c *ClientConn) string {
	switch {
	case c != nil:
		s := fmt.Sprintf("client %s, connected %v", shown(c.Addr), time.Duration(c.AgeSeconds)*time.Second)
		if c.Connections > 1 {
			s += fmt.Sprintf(" (%d connections)", c.Connections)
		}
		return s
	case r.ClientsUnknown != "":
		return "client unknown"
	case r.cluster:
		return "client not found"
	default:
		return "client not connected"
	}
}

// clientNotes are the lines under a report that explain its client column: why the
// clients are unknown, or what "not connected" means.
func (r *Report) clientNotes() []string {
	if r.ClientsUnknown != "" {
		return []string{"clients unknown: " + shown(r.ClientsUnknown)}
	}
	missing := false
	for _, o := range r.Owners {
		missing = missing || o.Client == nil
	}
	for _, q := range slices.Concat(r.Queue, r.Writers, r.PermitWaiters) {
		missing = missing || q.Client == nil
	}
	for _, w := range r.WaitingClients {
		missing = missing || w.Client == nil
	}
	switch {
	case !missing:
		return nil
	case r.cluster:
		return []string{
			"not found: no connection on any node is named relock:<client id>:<wake code>; a relock",
			"  process that is gone (its holds run out with their lease, its wake registry entries with",
			"  the registry), a client that is not relock's (Redisson), or a node that the cluster's",
			"  slot map did not list when inspect asked",
		}
	default:
		return []string{
			"not connected: no connection is named relock:<client id>:<wake code>; a relock process that",
			"  is gone (its holds run out with their lease, its wake registry entries with the registry)",
			"  or a client that is not relock's (Redisson)",
		}
	}
}
