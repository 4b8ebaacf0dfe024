// Command bench compares relock with other Go Redis lock libraries on one redis-server:
// uncontended cycles, contended handoffs, fairness among waiters, and relock's batched
// watchdog. Every library runs each scenario in turn, interleaved over several rounds, so
// that machine drift hits all of them alike.
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
	out     string
	addr    string
	rounds  int
	s1Dur   time.Duration
	s2Dur   time.Duration
	s5Ticks uint64
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
	flag.BoolVar(&cfg.quick, "quick", false, "short run: 2 rounds of short windows, under 2 minutes in all")
	flag.StringVar(&cfg.out, "out", "", "directory to write benchmarks.md into (none: stdout only)")
	flag.StringVar(&cfg.addr, "addr", "", "host:port of a Redis to use (it is FLUSHALLed); default: start redis-server on a free loopback port")
	flag.Parse()
	if cfg.quick {
		cfg.rounds, cfg.s1Dur, cfg.s2Dur, cfg.s5Ticks = 2, 600*time.Millisecond, 600*time.Millisecond, 3
	} else {
		cfg.rounds, cfg.s1Dur, cfg.s2Dur, cfg.s5Ticks = 5, 3*time.Second, 3*time.Second, 3
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

	// S1
	s1 := make([][]s1Round, len(libs))
	for round := range cfg.rounds {
		for i, lib := range libs {
			r, err := runS1(lib, addr, cfg.s1Dur, round)
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

	// S2 and S3: critical sections empty and 1 ms, interleaved the same way.
	for ci, cs := range []time.Duration{0, time.Millisecond} {
		res := make([][]s2Round, len(libs))
		for round := range cfg.rounds {
			for i, lib := range libs {
				r, err := runS2(lib, addr, adm, cfg.s2Dur, cs, round)
				if err != nil {
					return fmt.Errorf("S2 %s (cs %v): %w", lib.name, cs, err)
				}
				res[i] = append(res[i], r)
				fmt.Fprintf(os.Stderr, "S2 cs=%v round %d %-20s %8.0f acq/s\n", cs, round+1, lib.name, float64(r.acq)/r.elapsed.Seconds())
			}
			if err := adm.flush(ctx); err != nil {
				return err
			}
		}
		rep.s2[ci] = res
	}

	// S4: S2 across processes.
	for ci, cs := range []time.Duration{0, time.Millisecond} {
		res := make([][]s2Round, len(libs))
		for round := range cfg.rounds {
			for i, lib := range libs {
				r, err := runS2Multi(i, addr, adm, cfg.s2Dur, cs, round)
				if err != nil {
					return fmt.Errorf("S2 multi-process %s (cs %v): %w", lib.name, cs, err)
				}
				res[i] = append(res[i], r)
				fmt.Fprintf(os.Stderr, "S2x%d cs=%v round %d %-20s %8.0f acq/s\n", mpProcs, cs, round+1, lib.name, float64(r.acq)/r.elapsed.Seconds())
			}
			if err := adm.flush(ctx); err != nil {
				return err
			}
		}
		rep.mp[ci] = res
	}

	// S5
	s5, err := runS5(addr, 10000, cfg.s5Ticks)
	if err != nil {
		return fmt.Errorf("S5: %w", err)
	}
	rep.s5 = s5
	if err := adm.flush(ctx); err != nil {
		return err
	}
	rep.took = time.Since(started)

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
