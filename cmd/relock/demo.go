package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/rueidis"
	"golang.org/x/sync/errgroup"

	"github.com/relock-go/relock"
	"github.com/relock-go/relock/embedded"
)

// demoEnv is where the demo runs: Redis connections whose commands are counted, one
// more for looking at the data behind the locks' backs, and the relock clients made on them.
type demoEnv struct {
	where   string
	redis   []rueidis.Client // counted
	side    rueidis.Client   // not counted: the demo's own look at the data
	sent    *atomic.Int64
	closers []func()
}

func demo(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("demo", flag.ContinueOnError)
	addr := fs.String("redis", "", "`host:port` of a Redis server to use instead of the embedded one")
	workers := fs.Int("workers", 8, "workers contending for the lock, spread over two clients")
	rounds := fs.Int("rounds", 25, "times each worker enters the lock")
	pos, err := parse(fs, args, stdout, stderr)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		fmt.Fprintf(stderr, "relock demo: unexpected argument %q\n", pos[0])
		fs.Usage()
		return errUsage
	}
	if *workers < 1 || *rounds < 1 {
		fmt.Fprintln(stderr, "relock demo: --workers and --rounds must be at least 1")
		return errUsage
	}
	env, err := openDemo(*addr)
	if err != nil {
		return err
	}
	defer env.close()
	fmt.Fprintf(stdout, "relock demo on %s\n", env.where)
	start := time.Now()
	scenes := []func() error{
		func() error { return contend(ctx, env, *workers, *rounds, stdout) },
		func() error { return keepAlive(ctx, env, stdout) },
		func() error { return loseLease(ctx, env, stdout) },
		func() error { return fairOrder(ctx, env, "relock-demo:jobs", stdout) },
		func() error { return readWrite(ctx, env, stdout) },
		func() error { return permitsScene(ctx, env, stdout) },
	}
	for _, scene := range scenes {
		if err := scene(); err != nil {
			return err
		}
	}
	fmt.Fprintf(stdout, "\nall %d scenes held their promises in %v; %d commands sent in all\n",
		len(scenes), time.Since(start).Round(time.Millisecond), env.sent.Load())
	return nil
}

// openDemo connects twice, as two processes would, to the embedded Redis or to the
// server at addr.
func openDemo(addr string) (*demoEnv, error) {
	env := &demoEnv{where: "Redis at " + addr, sent: new(atomic.Int64)}
	if addr == "" {
		srv, err := embedded.Start()
		if err != nil {
			return nil, fmt.Errorf("starting the embedded Redis: %w", err)
		}
		env.closers = append(env.closers, srv.Close)
		addr = srv.Addr()
		env.where = "an embedded Redis (miniredis, in this process) at " + addr
	}
	for i := 0; i < 3; i++ {
		rc, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{addr}, DisableCache: true, ForceSingleClient: true})
		if err != nil {
			env.close()
			return nil, fmt.Errorf("connecting to %s: %w", addr, err)
		}
		env.closers = append(env.closers, rc.Close)
		if i == 2 {
			env.side = rc
		} else {
			env.redis = append(env.redis, countingClient{rc, env.sent})
		}
	}
	return env, nil
}

// client returns a new relock client on connection i, closed with the demo.
func (env *demoEnv) client(i int, opts ...relock.Option) (*relock.Client, error) {
	c, err := relock.New(env.redis[i%len(env.redis)], opts...)
	if err != nil {
		return nil, err
	}
	env.closers = append(env.closers, func() { c.Close() })
	return c, nil
}

// pair returns two new clients, one on each connection: two processes sharing locks.
func (env *demoEnv) pair() ([]*relock.Client, error) {
	var clients []*relock.Client
	for i := 0; i < 2; i++ {
		c, err := env.client(i)
		if err != nil {
			return nil, err
		}
		clients = append(clients, c)
	}
	return clients, nil
}

func (env *demoEnv) close() {
	for i := len(env.closers) - 1; i >= 0; i-- {
		env.closers[i]()
	}
}

// countingClient counts the commands sent through Do and DoMulti: every lock operation.
// The subscriber connection (SUBSCRIBE, UNSUBSCRIBE) is not counted.
type countingClient struct {
	rueidis.Client
	sent *atomic.Int64
}

func (c countingClient) Do(ctx context.Context, cmd rueidis.Completed) rueidis.RedisResult {
	c.sent.Add(1)
	return c.Client.Do(ctx, cmd)
}

func (c countingClient) DoMulti(ctx context.Context, cmds ...rueidis.Completed) []rueidis.RedisResult {
	c.sent.Add(int64(len(cmds)))
	return c.Client.DoMulti(ctx, cmds...)
}

// contend runs the mutual-exclusion scene: workers on two clients enter one lock over and
// over, re-enter it inside, and bump a counter with an unprotected read-modify-write. Only
// the lock keeps the count exact.
func contend(ctx context.Context, env *demoEnv, workers, rounds int, out io.Writer) error {
	const name = "relock-demo:counter"
	clients, err := env.pair()
	if err != nil {
		return err
	}
	heading(out, "mutual exclusion, re-entry, waiting without polling",
		"%d workers on %d clients each enter lock %q %d times, re-enter it once inside,\n"+
			"and add 1 to a counter with an unprotected read-modify-write.",
		workers, len(clients), name, rounds)

	var (
		counter   int // deliberately unsynchronised: the lock is its only protection
		reentered int
		g         errgroup.Group
	)
	want := workers * rounds
	step := newSteps(out)
	// A worker that makes a quarter of the entries says so while it holds the lock.
	milestone := func(n int) {
		if n*4/want == (n-1)*4/want && n != want {
			return
		}
		var waiting int
		var woken uint64
		for _, c := range clients {
			st := c.PubSubStats()
			waiting += st.Waiting
			woken += st.Woken
		}
		step.printf("%d of %d entries (%d%%); %d workers waiting, %d waits ended by an unlock message so far",
			n, want, n*100/want, waiting, woken)
	}
	start := time.Now()
	for w := 0; w < workers; w++ {
		mu := clients[w%len(clients)].Lock(name)
		g.Go(func() error {
			for r := 0; r < rounds; r++ {
				held, err := mu.Lock(ctx)
				if err != nil {
					return err
				}
				if held, err = mu.Lock(held); err != nil { // re-entry: the same owner
					return err
				}
				if n, err := mu.HoldCount(held); err == nil && n == 2 {
					reentered++
				}
				v := counter
				runtime.Gosched()
				counter = v + 1
				milestone(counter)
				for i := 0; i < 2; i++ {
					if err := mu.Unlock(held); err != nil {
						return err
					}
				}
			}
			return nil
		})
	}
	err = g.Wait()
	elapsed := time.Since(start)
	if err != nil {
		return err
	}

	var woken, timedOut uint64
	for _, c := range clients {
		st := c.PubSubStats()
		woken += st.Woken
		timedOut += st.TimedOut
	}
	verdict := "exact: mutual exclusion held"
	if counter != want {
		verdict = "WRONG: two workers were inside at once"
	}
	fmt.Fprintf(out, "counter         %d of %d (%s)\n", counter, want, verdict)
	fmt.Fprintf(out, "re-entries      %d of %d entries held the lock twice (hold count 2)\n", reentered, want)
	fmt.Fprintf(out, "waits           %d ended by an unlock message, %d by the holder's lease running out\n", woken, timedOut)
	sent := env.sent.Load() // the first scene: every command so far is its own
	fmt.Fprintf(out, "commands        %d sent, %.1f per entry: lock, re-enter, hold count, 2 unlocks, and one\n"+
		"                attempt per wake-up; none while waiting\n", sent, float64(sent)/float64(want))
	fmt.Fprintf(out, "time            %v\n", elapsed.Round(time.Millisecond))
	if counter != want {
		return fmt.Errorf("mutual exclusion broken: counter %d, want %d", counter, want)
	}
	return nil
}

// heading starts a scene's output: a blank line, "== title", then what the scene does
// (intro formatted with args) and another blank line.
func heading(out io.Writer, title, intro string, args ...any) {
	fmt.Fprintf(out, "\n== %s\n", title)
	fmt.Fprintf(out, intro+"\n\n", args...)
}

// maxSteps bounds the progress lines of one scene, whatever its flags.
const maxSteps = 16

// steps prints a scene's progress as it happens, one line a step, with the time since the
// scene began: at most maxSteps lines, then one saying that more were left out. It is
// safe for the scene's goroutines to share.
type steps struct {
	mu    sync.Mutex
	out   io.Writer
	start time.Time
	n     int
}

func newSteps(out io.Writer) *steps { return &steps{out: out, start: time.Now()} }

func (s *steps) printf(format string, args ...any) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.n++
	switch {
	case s.n <= maxSteps:
		at := fmt.Sprintf("+%.2fs", time.Since(s.start).Seconds())
		fmt.Fprintf(s.out, "  %6s  %s\n", at, fmt.Sprintf(format, args...))
	case s.n == maxSteps+1:
		fmt.Fprintf(s.out, "  %6s  (further steps not shown)\n", "...")
	}
}
