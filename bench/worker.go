package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"time"
)

// workerEnv names the environment variable that makes this program a worker process of
// the multi-process scenario: it holds a workerSpec in JSON.
const workerEnv = "RELOCK_BENCH_WORKER"

const (
	mpProcs   = 4
	mpWaiters = 4
)

type workerSpec struct {
	Lib     int    `json:"lib"`
	Addr    string `json:"addr"`
	Key     string `json:"key"`
	CS      int64  `json:"cs"`    // critical section, ns
	Start   int64  `json:"start"` // wall clock, ns
	End     int64  `json:"end"`
	Base    int    `json:"base"` // first waiter id
	Waiters int    `json:"waiters"`
}

type workerResult struct {
	Events []event          `json:"events"`
	Errors int64            `json:"errors"`
	Sent   map[string]int64 `json:"sent"` // commands sent during the window
}

// runWorker is the whole life of a worker process: contend as spec says, print the events.
func runWorker(spec string) error {
	var w workerSpec
	if err := json.Unmarshal([]byte(spec), &w); err != nil {
		return err
	}
	libs := libraries()
	if w.Lib < 0 || w.Lib >= len(libs) {
		return fmt.Errorf("worker: no library %d", w.Lib)
	}
	sent := newSentCommands()
	inst, err := libs[w.Lib].open(endpoint{addr: w.Addr, sent: sent})
	if err != nil {
		return err
	}
	defer inst.Close()
	if err := warm(inst, fmt.Sprintf("%s:warm:%d", w.Key, w.Base)); err != nil {
		return err
	}
	handles := make([]locker, w.Waiters)
	for i := range handles {
		handles[i] = inst.Handle(w.Key)
	}
	time.Sleep(time.Until(time.Unix(0, w.Start)))
	s0 := sent.snapshot()
	evs, errs := contend(handles, w.Base, time.Unix(0, w.End), time.Duration(w.CS), false)
	return json.NewEncoder(os.Stdout).Encode(workerResult{Events: evs, Errors: errs, Sent: minus(sent.snapshot(), s0)})
}

// runS2Multi is S2 across mpProcs processes of mpWaiters waiters each, one client per process.
func runS2Multi(li int, addr string, adm *admin, dur, cs time.Duration, round int) (s2Round, error) {
	exe, err := os.Executable()
	if err != nil {
		return s2Round{}, err
	}
	lib := libraries()[li]
	key := fmt.Sprintf("mp:%d:%v:%s", round, cs, lib.name)
	start := time.Now().Add(700 * time.Millisecond)
	end := start.Add(dur)
	ctx, cancel := context.WithDeadline(context.Background(), end.Add(30*time.Second))
	defer cancel()

	type proc struct {
		cmd            *exec.Cmd
		stdout, stderr bytes.Buffer
	}
	procs := make([]*proc, mpProcs)
	for p := range procs {
		spec, err := json.Marshal(workerSpec{Lib: li, Addr: addr, Key: key, CS: int64(cs),
			Start: start.UnixNano(), End: end.UnixNano(), Base: p * mpWaiters, Waiters: mpWaiters})
		if err != nil {
			return s2Round{}, err
		}
		pr := &proc{cmd: exec.CommandContext(ctx, exe)}
		pr.cmd.Env = append(os.Environ(), workerEnv+"="+string(spec))
		pr.cmd.Stdout, pr.cmd.Stderr = &pr.stdout, &pr.stderr
		if err := pr.cmd.Start(); err != nil {
			for _, q := range procs[:p] {
				_ = q.cmd.Process.Kill()
				_ = q.cmd.Wait()
			}
			return s2Round{}, err
		}
		procs[p] = pr
	}
	// Counted from just before the start: the workers' warm-up is done by then.
	time.Sleep(time.Until(start.Add(-20 * time.Millisecond)))
	c0, cerr := adm.commands(context.Background())
	var evs []event
	var errs int64
	var werr error
	sent := map[string]int64{}
	for p, pr := range procs {
		if err := pr.cmd.Wait(); err != nil {
			werr = errors.Join(werr, fmt.Errorf("worker %d: %w: %s", p, err, strings.TrimSpace(pr.stderr.String())))
			continue
		}
		var res workerResult
		if err := json.Unmarshal(pr.stdout.Bytes(), &res); err != nil {
			werr = errors.Join(werr, fmt.Errorf("worker %d output: %w", p, err))
			continue
		}
		evs = append(evs, res.Events...)
		errs += res.Errors
		for name, n := range res.Sent {
			sent[name] += n
		}
	}
	if werr != nil {
		return s2Round{}, werr
	}
	if cerr != nil {
		return s2Round{}, cerr
	}
	c1, err := adm.commands(context.Background())
	if err != nil {
		return s2Round{}, err
	}
	r := analyse(evs, mpProcs*mpWaiters, dur, errs)
	r.commands = commandDelta(c0, c1)
	r.sent = sent
	return r, nil
}
