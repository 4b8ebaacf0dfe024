package redistest

import (
	"context"
	"testing"

	"github.com/redis/rueidis"
)

// CommandCounter reads INFO commandstats of a backend: of its one server, or
// summed over the masters of a cluster, where the lock traffic goes.
type CommandCounter struct {
	name    string
	clients []rueidis.Client
}

// Commands returns a CommandCounter for b, with its connections made now, so
// that their handshakes (HELLO) come before any count it takes. It fails t for
// miniredis, which has no INFO commandstats.
func (b *Backend) Commands(t testing.TB) *CommandCounter {
	t.Helper()
	var addrs []string
	switch {
	case b.Cluster != nil:
		for _, m := range b.Cluster.Masters() {
			addrs = append(addrs, m.Addr())
		}
	case b.Server != nil:
		addrs = []string{b.Addr}
	default:
		t.Fatalf("redistest: %s has no INFO commandstats", b.Name)
	}
	cc := &CommandCounter{name: b.Name}
	for _, addr := range addrs {
		c, err := rueidis.NewClient(clientOption(addr))
		if err != nil {
			t.Fatalf("redistest: connect to %s: %v", addr, err)
		}
		t.Cleanup(c.Close)
		cc.clients = append(cc.clients, c)
	}
	return cc
}

// Calls returns the calls per command (lowercased, subcommands as
// "client|kill") since the servers started, summed over the servers. The
// counts include the INFO commands of earlier Calls.
func (cc *CommandCounter) Calls(t testing.TB) map[string]int64 {
	t.Helper()
	total := make(map[string]int64)
	for _, c := range cc.clients {
		ctx, cancel := context.WithTimeout(context.Background(), doTimeout)
		text, err := c.Do(ctx, c.B().Info().Section("commandstats").Build()).ToString()
		cancel()
		if err != nil {
			t.Fatalf("redistest: INFO commandstats on %s: %v", cc.name, err)
		}
		stats, err := parseCommandStats(text)
		if err != nil {
			t.Fatalf("redistest: INFO commandstats on %s: %v", cc.name, err)
		}
		for cmd, n := range stats {
			total[cmd] += n
		}
	}
	return total
}
