package redistest

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/redis/rueidis"
)

// Subscribers returns the subscribers s counts on channel: by classic SUBSCRIBE for sub
// "NUMSUB", by SSUBSCRIBE for "SHARDNUMSUB" (PUBSUB <sub> channel). Both counts are
// local to the node asked. It fails t if the command fails.
func (s *Server) Subscribers(t testing.TB, sub, channel string) int64 {
	t.Helper()
	v, err := s.Do(t, "PUBSUB", sub, channel).ToArray()
	if err != nil || len(v) != 2 {
		t.Fatalf("PUBSUB %s %s on %s: %v %v", sub, channel, s.Addr(), v, err)
	}
	n, err := v[1].AsInt64()
	if err != nil {
		t.Fatalf("PUBSUB %s %s on %s: %v", sub, channel, s.Addr(), err)
	}
	return n
}

// Listener is a subscription of its own to one channel, as another client's (Redisson's)
// would be: it records every message it hears.
type Listener struct {
	mu   sync.Mutex
	msgs []string
}

// Listen subscribes a connection of its own to channel on b and returns once Redis has
// confirmed it, at most 10s (it fails t otherwise). On a cluster it subscribes with
// SSUBSCRIBE, since locks there publish with SPUBLISH. The connection closes at t's end.
func (b *Backend) Listen(t testing.TB, channel string) *Listener {
	t.Helper()
	l := &Listener{}
	subscribed := make(chan struct{})
	var once sync.Once
	dc, cancel := b.Client(t).Dedicate()
	t.Cleanup(cancel)
	dc.SetPubSubHooks(rueidis.PubSubHooks{
		OnMessage: func(m rueidis.PubSubMessage) {
			l.mu.Lock()
			l.msgs = append(l.msgs, m.Message)
			l.mu.Unlock()
		},
		OnSubscription: func(rueidis.PubSubSubscription) { once.Do(func() { close(subscribed) }) },
	})
	subscribe := dc.B().Subscribe().Channel(channel).Build()
	if b.Cluster != nil {
		subscribe = dc.B().Ssubscribe().Channel(channel).Build()
	}
	ctx, done := context.WithTimeout(context.Background(), doTimeout)
	defer done()
	if err := dc.Do(ctx, subscribe).Error(); err != nil {
		t.Fatalf("redistest: subscribe %s: %v", channel, err)
	}
	Recv(t, subscribed, 10*time.Second, "the confirmation of the subscription to "+channel)
	return l
}

// Messages returns the messages heard so far, in order.
func (l *Listener) Messages() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.msgs)
}
