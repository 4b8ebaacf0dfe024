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

	"github.com/relock-go/relock"
	"github.com/relock-go/relock/embedded"
)

// demoEnv is where the demo runs: its relock clients and the count of commands they sent.
type demoEnv struct {
	where   string
	clients []*relock.Client
	sent    *atomic.Int64
	close   func()
}

func demo(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("demo", flag.ContinueOnError)
	addr := fs.String("redis", "", "`host:port` of a Redis server to use instead of the embedded one")
	workers := fs.Int("workers", 8, "workers contending for the lock, spread over two clients")
	rounds := fs.Int("rounds", 25, "times each worker enters the lock")
	if err := parse(fs, args, stderr); err != nil {
		return err
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
	return contend(ctx, env, *workers, *rounds, stdout)
}

// openDemo makes two relock clients, as two processes would have, on the embedded Redis
// or on the server at addr.
func openDemo(addr string) (*demoEnv, error) {
	env := &demoEnv{where: "Redis at " + addr, sent: new(atomic.Int64)}
	var closers []func()
	env.close = func() {
		for i := len(closers) - 1; i >= 0; i-- {
			closers[i]()
		}
	}
	if addr == "" {
		srv, err := embedded.Start()
		if err != nil {
			return nil, fmt.Errorf("starting the embedded Redis: %w", err)
		}
		closers = append(closers, srv.Close)
		addr = srv.Addr()
		env.where = "an embedded Redis at " + addr
	}
	for i := 0; i < 2; i++ {
		rc, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{addr}, DisableCache: true, ForceSingleClient: true})
		if err != nil {
			env.close()
			return nil, fmt.Errorf("connecting to %s: %w", addr, err)
		}
		closers = append(closers, rc.Close)
		c, err := relock.New(countingClient{rc, env.sent})
		if err != nil {
			env.close()
			return nil, err
		}
		closers = append(closers, func() { c.Close() })
		env.clients = append(env.clients, c)
	}
	return env, nil
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
	fmt.Fprintf(out, "relock demo on %s\n", env.where)
	fmt.Fprintf(out, "%d workers on %d clients each enter lock %q %d times, re-enter it once inside,\n"+
		"and add 1 to a counter with an unprotected read-modify-write.\n\n",
		workers, len(env.clients), name, rounds)

	var (
		counter   int // deliberately unsynchronised: the lock is its only protection
		reentered int
		wg        sync.WaitGroup
		errOnce   sync.Once
		firstErr  error
	)
	fail := func(err error) { errOnce.Do(func() { firstErr = err }) }
	start := time.Now()
	for w := 0; w < workers; w++ {
		mu := env.clients[w%len(env.clients)].Lock(name)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for r := 0; r < rounds; r++ {
				held, err := mu.Lock(ctx)
				if err != nil {
					fail(err)
					return
				}
				if held, err = mu.Lock(held); err != nil { // re-entry: the same owner
					fail(err)
					return
				}
				if n, err := mu.HoldCount(held); err == nil && n == 2 {
					reentered++
				}
				v := counter
				runtime.Gosched()
				counter = v + 1
				for i := 0; i < 2; i++ {
					if err := mu.Unlock(held); err != nil {
						fail(err)
						return
					}
				}
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	if firstErr != nil {
		return firstErr
	}

	var woken, timedOut uint64
	for _, c := range env.clients {
		st := c.Stats()
		woken += st.Woken
		timedOut += st.TimedOut
	}
	want := workers * rounds
	verdict := "exact: mutual exclusion held"
	if counter != want {
		verdict = "WRONG: two workers were inside at once"
	}
	fmt.Fprintf(out, "counter         %d of %d (%s)\n", counter, want, verdict)
	fmt.Fprintf(out, "re-entries      %d of %d entries held the lock twice (hold count 2)\n", reentered, want)
	fmt.Fprintf(out, "waits           %d ended by an unlock message, %d by the holder's lease running out\n", woken, timedOut)
	sent := env.sent.Load()
	fmt.Fprintf(out, "commands        %d sent, %.1f per entry: lock, re-enter, hold count, 2 unlocks, and one\n"+
		"                attempt per wake-up; none while waiting\n", sent, float64(sent)/float64(want))
	fmt.Fprintf(out, "time            %v\n", elapsed.Round(time.Millisecond))
	if counter != want {
		return fmt.Errorf("mutual exclusion broken: counter %d, want %d", counter, want)
	}
	return nil
}
