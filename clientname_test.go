package relock_test

import (
	"strings"
	"testing"
	"time"

	"github.com/relock-go/relock"
	"github.com/relock-go/relock/internal/redistest"
	"github.com/relock-go/relock/internal/redistest/relocktest"
)

// An owner "<id>:<n>" must be traceable to a process: a client made by New keeps a
// connection named "relock:<id>:<wake code>" in CLIENT LIST (its subscriber connection;
// on a cluster with sharded pub/sub, whose connections cannot be named, an idle one of its
// own), and a client made by Dial names every connection it opens so.
func TestConnectionsCarryTheClientID(t *testing.T) {
	redistest.RealWithCluster(t, func(t *testing.T, b *redistest.Backend) {
		servers := []*redistest.Server{b.Server}
		if b.Cluster != nil {
			servers = b.Cluster.Nodes()
		}
		named := func(id string) int {
			n := 0
			for _, s := range servers {
				list, err := s.Do(t, "CLIENT", "LIST").ToString()
				if err != nil {
					t.Fatal(err)
				}
				n += strings.Count(list, " name=relock:"+id+":")
			}
			return n
		}
		c := relocktest.New(t, b)
		redistest.Eventually(t, 10*time.Second, "no connection named after the client made by New", func() bool {
			return named(c.ID()) == 1
		})

		d, err := relock.Dial("redis://" + b.Addr)
		if err != nil {
			t.Fatal(err)
		}
		defer d.Close()
		if _, err := d.Lock("named").TryLock(t.Context()); err != nil { // a command connection
			t.Fatal(err)
		}
		redistest.Eventually(t, 10*time.Second, "the Dial client's connections are not all named after it", func() bool {
			return named(d.ID()) >= 2 // its command connection and its subscriber
		})
	})
}

// Close closes the rueidis client that Dial made (Dial: "a rueidis client of its own that
// Close closes"): once the relock client is closed, none of its connections is left open.
func TestDialCloseClosesItsConnections(t *testing.T) {
	redistest.Real(t, func(t *testing.T, b *redistest.Backend) {
		named := func(id string) int {
			list, err := b.Server.Do(t, "CLIENT", "LIST").ToString()
			if err != nil {
				t.Fatal(err)
			}
			return strings.Count(list, " name=relock:"+id+":")
		}
		d, err := relock.Dial("redis://" + b.Addr)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := d.Lock("dialclose").TryLock(t.Context()); err != nil { // a command connection
			t.Fatal(err)
		}
		redistest.Eventually(t, 10*time.Second, "the Dial client's connections are not named after it", func() bool {
			return named(d.ID()) >= 2 // its command connection and its subscriber
		})
		if err := d.Close(); err != nil {
			t.Fatal(err)
		}
		redistest.Eventually(t, 10*time.Second, "connections of the Dial client left open after its Close", func() bool {
			return named(d.ID()) == 0
		})
	})
}

// A Dial that fails on an invalid option leaves no connection open: the rueidis client it
// made is closed before the error returns.
func TestDialRefusedLeavesNoConnection(t *testing.T) {
	redistest.Real(t, func(t *testing.T, b *redistest.Backend) {
		d, err := relock.Dial("redis://"+b.Addr, relock.WithTimeout(0))
		if err == nil || d != nil {
			t.Fatalf("Dial with WithTimeout(0) = %v, %v; want nil and an error", d, err)
		}
		redistest.Eventually(t, 10*time.Second, "a connection of the refused Dial left open", func() bool {
			list, err := b.Server.Do(t, "CLIENT", "LIST").ToString()
			if err != nil {
				t.Fatal(err)
			}
			return !strings.Contains(list, " name=relock:")
		})
	})
}
