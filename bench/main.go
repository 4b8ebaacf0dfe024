// Command bench compares relock with other Go Redis lock libraries on one redis-server:
// uncontended cycles, contended handoffs, fairness among waiters, and relock's batched
// watchdog; and relock's semaphore with a polling one. Every library runs each scenario in
// turn, interleaved over several rounds, so that machine drift hits all of them alike. For
// relock alone it also measures the server's ceiling (its lock cycle driven as raw RESP,
// with no client in the way; -ceiling runs only that), thousands of waiters parked on one
// lock, and how its costs grow with waiters, processes and holds. -semaphore runs only the
// semaphore section.
//
//	cd bench && go run . -quick -out ../docs
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"
)

type config struct {
	quick   bool
	ceiling bool // only the ceiling scenario
	semOnly bool // only the semaphore scenarios
	out     string
	addr    string
	rounds  int
	s1Dur   time.Duration
	s2Dur   time.Duration
	s5Ticks uint64
	// handoffs is how many handoffs each library must make in the step-aside run, over
	// all rounds; a round's window stretches to handoffStretch to get its share.
	handoffs       int64
	handoffStretch time.Duration
	ceilDur        time.Duration // a ceiling window
	scaleDur       time.Duration // a scale point's window
	// manyProcs×manyWaiters waiters park in the many-waiters run.
	manyProcs, manyWaiters int
}

func main() {
	if spec := os.Getenv(workerEnv); spec != "" {
		if err := runWorker(spec); err != nil {
			fmt.Fprintln(os.Stderr, "bench worker:", err)
			os.Exit(1)
		}
		return
	}
	var cfg config
	flag.BoolVar(&cfg.quick, "quick", false, "short run: 2 rounds of short windows, under 4 minutes in all")
	flag.BoolVar(&cfg.ceiling, "ceiling", false, "run only the ceiling scenario: the server driven with pipelined raw RESP")
	flag.BoolVar(&cfg.semOnly, "semaphore", false, "run only the semaphore scenarios: relock's semaphore and a polling one")
	flag.StringVar(&cfg.out, "out", "", "directory to write benchmarks.md into (none: stdout only)")
	flag.StringVar(&cfg.addr, "addr", "", "host:port of a Redis to use (it is FLUSHALLed); default: start redis-server on a free loopback port")
	flag.Parse()
	if cfg.ceiling && cfg.out != "" {
		fmt.Fprintln(os.Stderr, "bench: -ceiling prints the ceiling alone and writes no report; leave out -out")
		os.Exit(2)
	}
	if cfg.semOnly && (cfg.out != "" || cfg.ceiling) {
		fmt.Fprintln(os.Stderr, "bench: -semaphore prints the semaphore section alone and writes no report; leave out -out and -ceiling")
		os.Exit(2)
	}
	cfg.manyProcs, cfg.manyWaiters = 4, 1250
	cfg.handoffStretch = 15 * time.Second
	if cfg.quick {
		cfg.rounds, cfg.s1Dur, cfg.s2Dur, cfg.s5Ticks = 2, 600*time.Millisecond, 600*time.Millisecond, 2
		cfg.handoffs, cfg.ceilDur, cfg.scaleDur = 200, time.Second, time.Second
	} else {
		cfg.rounds, cfg.s1Dur, cfg.s2Dur, cfg.s5Ticks = 5, 3*time.Second, 3*time.Second, 3
		cfg.handoffs, cfg.ceilDur, cfg.scaleDur = 500, 3*time.Second, 2*time.Second
	}
	if err := run(cfg); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

func run(cfg config) (err error) {
	addr := cfg.addr
	if addr == "" {
		srv, a, err := startServer()
		if err != nil {
			return err
		}
		defer srv.stop()
		// Kill the server on an interrupt too; the run itself then fails and returns.
		sig := make(chan os.Signal, 1)
		signal.Notify(sig, os.Interrupt, syscall.SIGTERM)
		done := make(chan struct{})
		defer close(done)
		go func() {
			select {
			case <-sig:
				srv.stop()
				os.Exit(130)
			case <-done:
			}
		}()
		addr = a
	}
	adm, err := newAdmin(addr)
	if err != nil {
		return err
	}
	defer adm.close()
	ctx := context.Background()
	if err := adm.flush(ctx); err != nil {
		return err
	}
	env, err := environment(ctx, adm, cfg)
	if err != nil {
		return err
	}
	libs := libraries()
	rep := &report{env: env, cfg: cfg, libs: libs}
	started := time.Now()
	if cfg.ceiling {
		if rep.ceiling, err = ceilings(addr, adm, cfg); err != nil {
			return err
		}
	} else if cfg.semOnly {
		if rep.sem, err = runSemaphores(addr, adm, cfg); err != nil {
			return fmt.Errorf("semaphore: %w", err)
		}
	} else if err := runAll(rep, addr, adm); err != nil {
		return err
	}
	rep.took = time.Since(started)
	fmt.Fprintf(os.Stderr, "whole run %v\n", rep.took.Round(time.Second))

	if cfg.out != "" {
		img := filepath.Join(cfg.out, "img")
		if err := os.MkdirAll(img, 0o755); err != nil {
			return err
		}
		if rep.images, err = rep.charts(img); err != nil {
			return err
		}
	}
	md := rep.markdown()
	fmt.Print(md)
	if cfg.out != "" {
		if err := os.WriteFile(filepath.Join(cfg.out, "benchmarks.md"), []byte(md), 0o644); err != nil {
			return err
		}
	}
	return nil
}

// runAll runs every scenario into rep.
func runAll(rep *report, addr string, adm *admin) error {
	cfg, libs, ctx := rep.cfg, rep.libs, context.Background()
	// S1
	s1 := make([][]s1Round, len(libs))
	for round := range cfg.rounds {
		for i, lib := range libs {
			r, err := runS1(lib, addr, adm, cfg.s1Dur, round)
			if err != nil {
				return fmt.Errorf("S1 %s: %w", lib.name, err)
			}
			s1[i] = append(s1[i], r)
			fmt.Fprintf(os.Stderr, "S1 round %d %-20s %8.0f cycles/s\n", round+1, lib.name, float64(r.cycles)/r.elapsed.Seconds())
		}
		if err := adm.flush(ctx); err != nil {
			return err
		}
	}
	rep.s1 = s1

	// S2 and S3: critical sections empty and 1 ms, then the handoff runs, in which the
	// goroutine that unlocked steps aside; interleaved the same way. The handoff runs
	// stretch until each library has its share of cfg.handoffs.
	var hot, idle []time.Duration
	for mi, m := range s2Modes {
		w := fixed(cfg.s2Dur)
		if m.stepAside {
			w.stretch = max(cfg.s2Dur, cfg.handoffStretch)
			w.handoffs = (cfg.handoffs+int64(cfg.rounds)-1)/int64(cfg.rounds) + 1
		}
		res := make([][]s2Round, len(libs))
		for round := range cfg.rounds {
			if m.stepAside {
				// The round-trip units, sampled in every round so that they see the
				// same machine as the handoffs they measure.
				h, err := adm.roundTrips(ctx, 200, 0)
				if err != nil {
					return err
				}
				i, err := adm.roundTrips(ctx, 200, m.cs)
				if err != nil {
					return err
				}
				hot, idle = append(hot, h...), append(idle, i...)
			}
			for i, lib := range libs {
				r, err := runS2(lib, addr, adm, s2Waiters, w, m.cs, m.stepAside, fmt.Sprintf("%d:%v:%v:%s", round, m.cs, m.stepAside, lib.name))
				if err != nil {
					return fmt.Errorf("S2 %s (%s): %w", lib.name, m.name, err)
				}
				res[i] = append(res[i], r)
				fmt.Fprintf(os.Stderr, "S2 %s round %d %-20s %8.0f acq/s %5d handoffs\n", m.name, round+1, lib.name,
					float64(r.acq)/r.elapsed.Seconds(), len(r.handoffs))
			}
			if err := adm.flush(ctx); err != nil {
				return err
			}
		}
		rep.s2[mi] = res
	}
	sortDurations(hot)
	sortDurations(idle)
	rep.env.rtt, rep.env.idleRTT = percentile(hot, 50), percentile(idle, 50)

	// S2 across processes (no stepping aside: the processes share no baton).
	rep.mp = make([][][]s2Round, len(mpConfigs))
	for ci, c := range mpConfigs {
		res := make([][]s2Round, len(libs))
		for round := range cfg.rounds {
			for i, lib := range libs {
				r, err := runS2Multi(i, addr, adm, cfg.s2Dur, c, fmt.Sprintf("%d:%d:%v:%s", round, c.procs, c.cs, lib.name))
				if err != nil {
					return fmt.Errorf("S2 multi-process %s (%v): %w", lib.name, c, err)
				}
				res[i] = append(res[i], r)
				fmt.Fprintf(os.Stderr, "S2 %v round %d %-20s %8.0f acq/s\n", c, round+1, lib.name, float64(r.acq)/r.elapsed.Seconds())
			}
			if err := adm.flush(ctx); err != nil {
				return err
			}
		}
		rep.mp[ci] = res
	}

	// S4: read-heavy, relock's read-write lock and its mutex, interleaved.
	for ci, cs := range []time.Duration{0, time.Millisecond} {
		for round := range cfg.rounds {
			for vi, rw := range []bool{true, false} {
				r, err := runS4(addr, rw, cfg.s2Dur, cs, round)
				if err != nil {
					return fmt.Errorf("S4 (rw %v, cs %v): %w", rw, cs, err)
				}
				rep.s4[ci][vi] = append(rep.s4[ci][vi], r)
				fmt.Fprintf(os.Stderr, "S4 cs=%v round %d rw=%-5v %8.0f ops/s\n", cs, round+1, rw, float64(r.reads+r.writes)/r.elapsed.Seconds())
			}
			if err := adm.flush(ctx); err != nil {
				return err
			}
		}
	}

	// The semaphore: relock's against a polling one.
	var err error
	if rep.sem, err = runSemaphores(addr, adm, cfg); err != nil {
		return fmt.Errorf("semaphore: %w", err)
	}

	// The ceiling: the server alone, driven with raw RESP.
	if rep.ceiling, err = ceilings(addr, adm, cfg); err != nil {
		return err
	}

	// Many waiters parked on one held lock.
	if rep.many, err = runManyWaiters(addr, cfg.manyProcs, cfg.manyWaiters); err != nil {
		return fmt.Errorf("many waiters: %w", err)
	}
	fmt.Fprintf(os.Stderr, "many waiters: %.1f calls per process per lease, %d of %d acquired\n",
		rep.many.callsPerProcLease(), rep.many.acquired, cfg.manyProcs*cfg.manyWaiters)
	if err := adm.flush(ctx); err != nil {
		return err
	}

	// Scale, whose renewal points include S5's 10,000 holds.
	if rep.scale, err = runScale(addr, adm, cfg.scaleDur, cfg.s5Ticks); err != nil {
		return fmt.Errorf("scale: %w", err)
	}
	return nil
}

// ceilings runs the ceiling variants, interleaved over the rounds.
func ceilings(addr string, adm *admin, cfg config) ([][]ceilingRound, error) {
	res := make([][]ceilingRound, len(ceilingVariants))
	for round := range cfg.rounds {
		for vi, v := range ceilingVariants {
			r, err := runCeiling(v, addr, adm, cfg.ceilDur, round)
			if err != nil {
				return nil, fmt.Errorf("ceiling: %w", err)
			}
			res[vi] = append(res[vi], r)
			fmt.Fprintf(os.Stderr, "ceiling round %d %-42s %8.0f cycles/s %5.1f server µs/cycle\n", round+1, v.name,
				float64(r.cycles)/r.elapsed.Seconds(), per(float64(r.serverCPU)/float64(time.Microsecond), r.cycles))
		}
		if err := adm.flush(context.Background()); err != nil {
			return nil, err
		}
	}
	return res, nil
}
