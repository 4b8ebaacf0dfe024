package main

import (
	"bufio"
	"context"
	"crypto/rand"
	"fmt"
	"net"
	"strconv"
	"sync"
	"time"

	"github.com/relock-go/relock"
	"github.com/relock-go/relock/internal/hub"
	"github.com/relock-go/relock/internal/keys"
	"github.com/relock-go/relock/internal/script"
)

// --- Ceiling: the server alone
//
// The server is driven with pipelined raw RESP over plain TCP connections, so that no
// client library limits it: what is left is how much server CPU one lock+unlock cycle costs
// and how many cycles one server core runs per second. Each cycle has its own owner, and
// the cycles of one connection spread over ceilingNames lock names of its own, so that no
// acquisition meets another connection's hold.

const (
	ceilingConns = 4
	ceilingDepth = 64   // cycles written per batch on a connection before its replies are read
	ceilingNames = 1024 // lock names per connection
	// ceilingMaxBatches bounds a connection's loop by count as well as by time.
	ceilingMaxBatches = 1 << 20
)

// casDelete is the compare-and-delete release of the SET NX libraries.
const casDelete = "if redis.call('get',KEYS[1])==ARGV[1] then return redis.call('del',KEYS[1]) end return 0"

// ceilingVariant is one kind of cycle.
type ceilingVariant struct {
	name string
	// scripts are the Lua sources the cycle calls by SHA; they are loaded before the window.
	scripts []string
	// cycle appends one cycle's two commands for lock name i of connection conn, with
	// owner the cycle's own owner (or token) and seq the cycle's number on the connection.
	cycle func(b []byte, c *ceilingConn, i int, owner string) []byte
	// ok tells whether the two replies are those of a lock taken and released.
	ok func(acquire, release reply) bool
}

// ceilingConn is one connection's state, its lock names laid out once.
type ceilingConn struct {
	names []keys.Names
	shas  []string // SHA1 of each of the variant's scripts, in order
}

// Relock's cycle runs with a relock client's default lease, the watchdog timeout, and a
// wake code of the shape a client has.
var relockLeaseMs = strconv.FormatInt(relock.DefaultWatchdogTimeout.Milliseconds(), 10)

const ceilingWakeCode = "1152921504606847975"

// relockCeilingCycle appends relock's exact rlock cycle for the lock n: EVALSHA of the
// acquire script, then EVALSHA of the unlock script, with the KEYS and ARGV the engine sends
// (internal/engine/plain.go, Plain.acquire and Plain.release; engine.go, Lock.release).
//
// This is the one place the ceiling knows relock's calls: when the engine's calls change,
// change them here to match plain.go.
func relockCeilingCycle(b []byte, n keys.Names, owner string) []byte {
	// Plain.acquire, not fenced, by Lock (which may wait), a first attempt: KEYS = {lock,
	// wake registry}, ARGV = {lease ms, owner, the client's wake code, "" (first
	// attempt), the lock's channel, publish command}.
	b = appendCommand(b, "EVALSHA", script.RLockAcquire().SHA1, "2", n.Lock, n.Wake, relockLeaseMs, owner, ceilingWakeCode, "", n.Channel, "publish")
	// Plain.release: KEYS = {lock, channel, wake registry}, ARGV = {wake-one message,
	// owner, the hold count the client expects (one), publish command}.
	return appendCommand(b, "EVALSHA", script.RLockUnlock().SHA1, "3", n.Lock, n.Channel, n.Wake,
		hub.WakeOne, owner, "1", "publish")
}

var ceilingVariants = []ceilingVariant{
	{
		name:    "relock rlock (acquire + unlock scripts)",
		scripts: []string{script.RLockAcquire().Source, script.RLockUnlock().Source},
		cycle: func(b []byte, c *ceilingConn, i int, owner string) []byte {
			return relockCeilingCycle(b, c.names[i], owner)
		},
		ok: func(a, r reply) bool {
			return a.isInt(1) && r.isInt(1) // the acquire's reply: the hold count alone, 1 (see package lua)
		},
	},
	{
		name:    "SET NX PX + compare-and-delete script",
		scripts: []string{casDelete},
		cycle: func(b []byte, c *ceilingConn, i int, owner string) []byte {
			b = appendCommand(b, "SET", c.names[i].Lock, owner, "NX", "PX", "30000")
			return appendCommand(b, "EVALSHA", c.shas[0], "1", c.names[i].Lock, owner)
		},
		ok: func(a, r reply) bool { return a.kind == '+' && a.str == "OK" && r.isInt(1) },
	},
}

type ceilingRound struct {
	cycles, failed int64
	elapsed        time.Duration
	serverCPU      time.Duration
	commands       map[string]int64 // as the server counts them, scripts' commands included
}

// uuid returns a random UUID in its text form, the first part of a relock owner.
func uuid() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	b[6], b[8] = b[6]&0x0f|0x40, b[8]&0x3f|0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:])
}

// dialRESP opens a plain TCP connection to addr.
func dialRESP(addr string) (net.Conn, *bufio.Reader, error) {
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		return nil, nil, err
	}
	return c, bufio.NewReaderSize(c, 64<<10), nil
}

// loadScripts loads srcs with SCRIPT LOAD on conn and returns their SHA1s.
func loadScripts(c net.Conn, r *bufio.Reader, srcs []string) ([]string, error) {
	var b []byte
	for _, s := range srcs {
		b = appendCommand(b, "SCRIPT", "LOAD", s)
	}
	if _, err := c.Write(b); err != nil {
		return nil, err
	}
	shas := make([]string, len(srcs))
	for i := range srcs {
		rep, err := readReply(r)
		if err != nil {
			return nil, err
		}
		if rep.kind != '$' || rep.n != 40 {
			return nil, fmt.Errorf("SCRIPT LOAD answered %v", rep)
		}
		shas[i] = rep.str
	}
	return shas, nil
}

// runCeiling drives the server with v's cycles on ceilingConns connections for dur.
func runCeiling(v ceilingVariant, addr string, adm *admin, dur time.Duration, round int) (ceilingRound, error) {
	type connState struct {
		net.Conn
		r *bufio.Reader
		ceilingConn
		owner          string // "<uuid>:": the cycle's number follows
		cycles, failed int64
		err            error
	}
	conns := make([]*connState, ceilingConns)
	defer func() {
		for _, c := range conns {
			if c != nil {
				_ = c.Close()
			}
		}
	}()
	for ci := range conns {
		nc, r, err := dialRESP(addr)
		if err != nil {
			return ceilingRound{}, err
		}
		c := &connState{Conn: nc, r: r, owner: uuid() + ":"}
		conns[ci] = c
		if c.shas, err = loadScripts(nc, r, v.scripts); err != nil {
			return ceilingRound{}, fmt.Errorf("%s: %w", v.name, err)
		}
		c.names = make([]keys.Names, ceilingNames)
		for i := range c.names {
			c.names[i] = keys.Of(fmt.Sprintf("ceiling:%d:%d:%d", round, ci, i))
		}
	}
	bg := context.Background()
	c0, err := adm.commands(bg)
	if err != nil {
		return ceilingRound{}, err
	}
	cpu0, err := adm.cpu(bg)
	if err != nil {
		return ceilingRound{}, err
	}
	start := time.Now()
	end := start.Add(dur)
	var wg sync.WaitGroup
	for _, c := range conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			// A server that stops answering ends the run instead of hanging it.
			_ = c.SetDeadline(end.Add(10 * time.Second))
			buf := make([]byte, 0, 64<<10)
			seq := 0
			for n := 0; n < ceilingMaxBatches && time.Now().Before(end); n++ {
				buf = buf[:0]
				for range ceilingDepth {
					seq++
					buf = v.cycle(buf, &c.ceilingConn, seq%ceilingNames, c.owner+strconv.Itoa(seq))
				}
				if _, c.err = c.Write(buf); c.err != nil {
					return
				}
				for range ceilingDepth {
					a, err := readReply(c.r)
					if err != nil {
						c.err = err
						return
					}
					r, err := readReply(c.r)
					if err != nil {
						c.err = err
						return
					}
					if v.ok(a, r) {
						c.cycles++
					} else {
						c.failed++
					}
				}
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	cpu1, err := adm.cpu(bg)
	if err != nil {
		return ceilingRound{}, err
	}
	c1, err := adm.commands(bg)
	if err != nil {
		return ceilingRound{}, err
	}
	r := ceilingRound{elapsed: elapsed, serverCPU: cpu1 - cpu0, commands: commandDelta(c0, c1)}
	// The CPU reads were INFO calls inside the window: the cycles' cost has none.
	delete(r.commands, "info")
	for _, c := range conns {
		if c.err != nil {
			return ceilingRound{}, fmt.Errorf("%s: %w", v.name, c.err)
		}
		r.cycles += c.cycles
		r.failed += c.failed
	}
	return r, nil
}
