package redistest

import "testing"

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
