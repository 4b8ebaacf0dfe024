package redistest

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/redis/rueidis"
)

// Subscribers returns the subscribers the node behind rc (a client of the test's own,
// Backend.Client) counts on channel: by classic SUBSCRIBE for sub "NUMSUB", by SSUBSCRIBE
// for "SHARDNUMSUB" (PUBSUB <sub> channel). It fails t if the command fails.
func Subscribers(t testing.TB, rc rueidis.Client, sub, channel string) int64 {
	t.Helper()
	return subscribers(t, Do(t, rc, "PUBSUB", sub, channel), "PUBSUB "+sub+" "+channel)
}

// Subscribers returns the subscribers s counts on channel, as the package's Subscribers
// does. Both counts are local to the node asked.
func (s *Server) Subscribers(t testing.TB, sub, channel string) int64 {
	t.Helper()
	return subscribers(t, s.Do(t, "PUBSUB", sub, channel), "PUBSUB "+sub+" "+channel+" on "+s.Addr())
}

// subscribers reads the count of a PUBSUB NUMSUB or SHARDNUMSUB reply for one channel.
func subscribers(t testing.TB, r rueidis.RedisResult, asked string) int64 {
	t.Helper()
	v, err := r.ToArray()
	if err != nil || len(v) != 2 {
		t.Fatalf("%s: %v %v", asked, v, err)
	}
	n, err := v[1].AsInt64()
	if err != nil {
		t.Fatalf("%s: %v", asked, err)
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
