package main

import (
	"context"
	"crypto/tls"
	"net"
	"strconv"
	"strings"
	"sync"

	goredislib "github.com/redis/go-redis/v9"
	"github.com/redis/rueidis"
)

// endpoint is where a library's client connects, and what counts the commands it sends.
// The server's INFO commandstats cannot tell the commands a client sent from those its
// Lua scripts ran, so the client side counts: every connection a library opens is wrapped
// in a countingConn, which reads the command names off the RESP requests it writes.
type endpoint struct {
	addr string
	sent *sentCommands // nil: not counted
}

// rueidisOption is a rueidis.ClientOption for e.
func (e endpoint) rueidisOption() rueidis.ClientOption {
	opt := rueidis.ClientOption{InitAddress: []string{e.addr}}
	if e.sent != nil {
		opt.DialCtxFn = func(ctx context.Context, dst string, d *net.Dialer, _ *tls.Config) (net.Conn, error) {
			c, err := d.DialContext(ctx, "tcp", dst)
			if err != nil {
				return nil, err
			}
			return e.sent.wrap(c), nil
		}
	}
	return opt
}

// goredisOptions is a go-redis Options for e.
func (e endpoint) goredisOptions() *goredislib.Options {
	opt := &goredislib.Options{Addr: e.addr}
	if e.sent != nil {
		opt.Dialer = func(ctx context.Context, network, addr string) (net.Conn, error) {
			var d net.Dialer
			c, err := d.DialContext(ctx, network, addr)
			if err != nil {
				return nil, err
			}
			return e.sent.wrap(c), nil
		}
	}
	return opt
}

// sentCommands counts the commands sent on the connections it wrapped, by lowercased name.
// An EVALSHA of a script that scripts names is counted as "evalsha <its name>", so that a
// run can tell a script's attempts from the other scripts' calls.
type sentCommands struct {
	mu      sync.Mutex
	counts  map[string]int64
	scripts map[string]string // SHA1 (lowercase hex) -> name; nil: none named
}

func newSentCommands() *sentCommands { return &sentCommands{counts: map[string]int64{}} }

// newSentScripts is newSentCommands naming the EVALSHAs of scripts (SHA1 -> name).
func newSentScripts(scripts map[string]string) *sentCommands {
	return &sentCommands{counts: map[string]int64{}, scripts: scripts}
}

func (s *sentCommands) wrap(c net.Conn) net.Conn { return &countingConn{Conn: c, s: s} }

// snapshot returns the counts so far, less the connection set-up and keep-alive commands
// (HELLO, CLIENT, PING, SELECT, AUTH), which are not the price of a lock operation.
func (s *sentCommands) snapshot() map[string]int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make(map[string]int64, len(s.counts))
	for name, n := range s.counts {
		switch name {
		case "hello", "client", "ping", "select", "auth":
			continue
		}
		out[name] = n
	}
	return out
}

func (s *sentCommands) add(names []string) {
	s.mu.Lock()
	for _, n := range names {
		s.counts[n]++
	}
	s.mu.Unlock()
}

// countingConn parses the requests written to it: a request is an array of bulk strings
// ("*<n>\r\n" then n times "$<len>\r\n<bytes>\r\n"), and its first element names the
// command. A request may span writes, so the unparsed tail is kept for the next write.
type countingConn struct {
	net.Conn
	s       *sentCommands
	pending []byte
}

func (c *countingConn) Write(p []byte) (int, error) {
	c.pending = append(c.pending, p...)
	var names []string
	for {
		name, arg, used, ok := parseRequestArg(c.pending)
		if !ok {
			break
		}
		if c.s.scripts != nil && name == "evalsha" {
			if label, named := c.s.scripts[strings.ToLower(arg)]; named {
				name += " " + label
			}
		}
		names = append(names, name)
		c.pending = c.pending[used:]
	}
	if len(c.pending) == 0 {
		c.pending = c.pending[:0:0] // let a large buffer go
	}
	if len(names) > 0 {
		c.s.add(names)
	}
	return c.Conn.Write(p)
}

// parseRequest parses one whole request at the start of b and returns its lowercased
// command name and its length; ok is false while the request is incomplete. Bytes that
// are not a request are skipped one line at a time, so a miscount cannot stall the parse.
func parseRequest(b []byte) (name string, used int, ok bool) {
	name, _, used, ok = parseRequestArg(b)
	return name, used, ok
}

// parseRequestArg is parseRequest that also returns the request's first argument as it
// was sent ("" when there is none).
func parseRequestArg(b []byte) (name, arg string, used int, ok bool) {
	line, rest, found := cutLine(b)
	if !found {
		return "", "", 0, false
	}
	used = len(b) - len(rest)
	if len(line) < 2 || line[0] != '*' {
		return "?", "", used, true
	}
	n, err := strconv.Atoi(string(line[1:]))
	if err != nil || n < 1 {
		return "?", "", used, true
	}
	for i := 0; i < n; i++ {
		hdr, after, found := cutLine(b[used:])
		if !found {
			return "", "", 0, false
		}
		if len(hdr) < 2 || hdr[0] != '$' {
			return "?", "", used, true
		}
		size, err := strconv.Atoi(string(hdr[1:]))
		if err != nil || size < 0 {
			return "?", "", used, true
		}
		start := len(b) - len(after)
		if len(b) < start+size+2 {
			return "", "", 0, false
		}
		switch i {
		case 0:
			name = strings.ToLower(string(b[start : start+size]))
		case 1:
			arg = string(b[start : start+size])
		}
		used = start + size + 2
	}
	return name, arg, used, true
}

// cutLine returns b up to its first CRLF and what follows it.
func cutLine(b []byte) (line, rest []byte, found bool) {
	for i := 0; i+1 < len(b); i++ {
		if b[i] == '\r' && b[i+1] == '\n' {
			return b[:i], b[i+2:], true
		}
	}
	return nil, nil, false
}
