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

// mpConfig is one configuration of S2 across processes.
type mpConfig struct {
	procs, waiters int // processes, and waiters in each
	cs             time.Duration
}

func (c mpConfig) String() string {
	return fmt.Sprintf("P=%d (%d×%d), %s critical section", c.procs, c.procs, c.waiters, csName(c.cs))
}

// csName names a critical section's length as the report does.
func csName(cs time.Duration) string {
	if cs == 0 {
		return "empty"
	}
	return cs.String()
}

// mpConfigs are the configurations of S2 across processes: 16 waiters in all, in 4
// processes of 4 and in 8 of 2, each with an empty and a 1 ms critical section.
var mpConfigs = []mpConfig{
	{4, 4, 0}, {4, 4, time.Millisecond},
	{8, 2, 0}, {8, 2, time.Millisecond},
}

type workerSpec struct {
	Mode    string `json:"mode"` // "" contend; "park": see parkWorker; "sem": see semWorker
	Lib     int    `json:"lib"`
	Addr    string `json:"addr"`
	Key     string `json:"key"`
	CS      int64  `json:"cs"`    // critical section, ns
	Start   int64  `json:"start"` // wall clock, ns
	End     int64  `json:"end"`
	Base    int    `json:"base"` // first waiter id
	Waiters int    `json:"waiters"`
	// For "park": the watchdog timeout of the waiters' client, and the window in which
	// the calls they send are counted.
	Lease int64 `json:"lease"`
	From  int64 `json:"from"`
	Until int64 `json:"until"`
	// For "sem": the semaphore's permits; Lib is then an index of semLibraries().
	Permits int64 `json:"permits,omitempty"`
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
	switch w.Mode {
	case "park":
		return parkWorker(w)
	case "sem":
		return semWorker(w)
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
	start := time.Unix(0, w.Start)
	time.Sleep(time.Until(start))
	s0 := sent.snapshot()
	evs, errs := contend(handles, w.Base, start, fixed(time.Duration(w.End-w.Start)), time.Duration(w.CS), false)
	return json.NewEncoder(os.Stdout).Encode(workerResult{Events: evs, Errors: errs, Sent: minus(sent.snapshot(), s0)})
}

// children runs one worker process per spec and returns their outputs. A worker that
// fails fails the whole: the error names it and carries what it wrote to stderr.
func children(ctx context.Context, specs []workerSpec, started func()) ([][]byte, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, err
	}
	type proc struct {
		cmd            *exec.Cmd
		stdout, stderr bytes.Buffer
	}
	procs := make([]*proc, len(specs))
	for p, spec := range specs {
		js, err := json.Marshal(spec)
		if err != nil {
			return nil, err
		}
		pr := &proc{cmd: exec.CommandContext(ctx, exe)}
		pr.cmd.Env = append(os.Environ(), workerEnv+"="+string(js))
		pr.cmd.Stdout, pr.cmd.Stderr = &pr.stdout, &pr.stderr
		if err := pr.cmd.Start(); err != nil {
			for _, q := range procs[:p] {
				_ = q.cmd.Process.Kill()
				_ = q.cmd.Wait()
			}
			return nil, err
		}
		procs[p] = pr
	}
	if started != nil {
		started()
	}
	var werr error
	outs := make([][]byte, len(procs))
	for p, pr := range procs {
		if err := pr.cmd.Wait(); err != nil {
			werr = errors.Join(werr, fmt.Errorf("worker %d: %w: %s", p, err, strings.TrimSpace(pr.stderr.String())))
			continue
		}
		outs[p] = pr.stdout.Bytes()
	}
	return outs, werr
}

// runS2Multi is S2 across c.procs processes of c.waiters waiters each, one client per
// process, on the key mp:<tag>.
func runS2Multi(li int, addr string, adm *admin, dur time.Duration, c mpConfig, tag string) (s2Round, error) {
	key := "mp:" + tag
	start := time.Now().Add(700 * time.Millisecond)
	end := start.Add(dur)
	specs := make([]workerSpec, c.procs)
	for p := range specs {
		specs[p] = workerSpec{Lib: li, Addr: addr, Key: key, CS: int64(c.cs),
			Start: start.UnixNano(), End: end.UnixNano(), Base: p * c.waiters, Waiters: c.waiters}
	}
	out, err := runContenders(adm, specs, start, end)
	if err != nil {
		return s2Round{}, err
	}
	r := analyse(out.events, c.procs*c.waiters, dur, out.errors)
	r.commands, r.sent = out.commands, out.sent
	return r, nil
}

// contenders is what the worker processes of one contended run did, merged.
type contenders struct {
	events   []event
	errors   int64
	sent     map[string]int64 // commands the workers sent in the window, by command
	commands map[string]int64 // commands the server ran from just before start, by command
}

// runContenders runs one worker process per spec, whose window is start to end, counts the
// server's commands from just before start to after the workers have ended, and merges the
// workers' outputs.
func runContenders(adm *admin, specs []workerSpec, start, end time.Time) (contenders, error) {
	ctx, cancel := context.WithDeadline(context.Background(), end.Add(30*time.Second))
	defer cancel()
	var c0 map[string]int64
	var cerr error
	outs, err := children(ctx, specs, func() {
		// Counted from just before the start: the workers' warm-up is done by then.
		time.Sleep(time.Until(start.Add(-20 * time.Millisecond)))
		c0, cerr = adm.commands(context.Background())
	})
	if err != nil {
		return contenders{}, err
	}
	if cerr != nil {
		return contenders{}, cerr
	}
	res := contenders{sent: map[string]int64{}}
	for p, out := range outs {
		var wr workerResult
		if err := json.Unmarshal(out, &wr); err != nil {
			return contenders{}, fmt.Errorf("worker %d output: %w", p, err)
		}
		res.events = append(res.events, wr.Events...)
		res.errors += wr.Errors
		for name, n := range wr.Sent {
			res.sent[name] += n
		}
	}
	c1, err := adm.commands(context.Background())
	if err != nil {
		return contenders{}, err
	}
	res.commands = commandDelta(c0, c1)
	return res, nil
}
