// Package embedded runs relock on an in-process Redis (miniredis), for demos, examples and
// tests that should need no server. It is not for production: miniredis is a single-node
// Redis double without persistence or replication.
//
// The root package never imports miniredis; only programs that import this package carry it.
package embedded

import (
	"sync"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/rueidis"

	"github.com/relock-go/relock"
	"github.com/relock-go/relock/internal/lockerr"
)

// Server is an in-process Redis with a relock client on it. A Server that Start did not
// make (a zero value or a nil pointer) has no Redis: Client returns a nil client, whose
// every lock's calls fail with relock.ErrInvalidOption, Redis nil, Addr "", NewClient
// that error, and Close does nothing.
type Server struct {
	mr     *miniredis.Miniredis
	addr   string // mr's, kept: miniredis cannot tell it once closed
	rc     rueidis.Client
	client *relock.Client
	mu     sync.Mutex
	extra  []extra // clients made by NewClient; guarded by mu
	closed bool    // guarded by mu
}

type extra struct {
	c  *relock.Client
	rc rueidis.Client
}

// Start starts an in-process Redis on a free 127.0.0.1 port and returns a relock client on
// it, made with opts. Close the Server when done.
func Start(opts ...relock.Option) (*Server, error) {
	mr := miniredis.NewMiniRedis()
	// Leases must run out by themselves, as on a real server; by default miniredis only
	// moves TTLs when told to.
	mr.ClockTTL(true)
	if err := mr.Start(); err != nil {
		return nil, err
	}
	rc, err := NewRedisClient(mr.Addr())
	if err != nil {
		mr.Close()
		return nil, err
	}
	c, err := relock.New(rc, opts...)
	if err != nil {
		rc.Close()
		mr.Close()
		return nil, err
	}
	return &Server{mr: mr, addr: mr.Addr(), rc: rc, client: c}, nil
}

// NewRedisClient returns a rueidis client for a miniredis at addr, with the options that
// miniredis needs: no client-side caching (it has no CLIENT TRACKING) and a single-node
// client (it answers CLUSTER SLOTS, which would make rueidis take it for a cluster).
func NewRedisClient(addr string) (rueidis.Client, error) {
	return rueidis.NewClient(rueidis.ClientOption{
		InitAddress:       []string{addr},
		DisableCache:      true,
		ForceSingleClient: true,
	})
}

// made reports whether Start made s.
func (s *Server) made() bool { return s != nil && s.mr != nil }

// Client returns the relock client on the in-process Redis.
func (s *Server) Client() *relock.Client {
	if !s.made() {
		return nil
	}
	return s.client
}

// Redis returns the rueidis client the relock client uses, for looking at the data.
func (s *Server) Redis() rueidis.Client {
	if !s.made() {
		return nil
	}
	return s.rc
}

// Addr returns the in-process Redis's address, host:port on 127.0.0.1.
func (s *Server) Addr() string {
	if !s.made() {
		return ""
	}
	return s.addr
}

// NewClient returns another relock client on the same in-process Redis, with its own
// connections and client id, as a second process would have. It is closed with the Server;
// after Close, NewClient fails with relock.ErrClosed.
func (s *Server) NewClient(opts ...relock.Option) (*relock.Client, error) {
	if !s.made() {
		return nil, lockerr.New("newclient", "", lockerr.ErrNotMade)
	}
	// Held while the client is made, so that a Close meanwhile cannot miss it.
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, lockerr.New("newclient", "", lockerr.ErrClosed)
	}
	rc, err := NewRedisClient(s.addr)
	if err != nil {
		return nil, err
	}
	c, err := relock.New(rc, opts...)
	if err != nil {
		rc.Close()
		return nil, err
	}
	s.extra = append(s.extra, extra{c, rc})
	return c, nil
}

// Close closes the relock clients, their Redis connections and the in-process Redis.
// Closing again is harmless.
func (s *Server) Close() {
	if !s.made() {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closed = true
	for _, e := range s.extra {
		e.c.Close()
		e.rc.Close()
	}
	s.client.Close()
	s.rc.Close()
	s.mr.Close()
}
