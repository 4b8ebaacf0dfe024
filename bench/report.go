package main

import (
	"bufio"
	"cmp"
	"context"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"time"
)

type env struct {
	nproc   int
	cpu     string
	redis   string
	goVer   string
	date    string
	command string
}

func environment(ctx context.Context, adm *admin, cfg config) (env, error) {
	v, err := adm.version(ctx)
	if err != nil {
		return env{}, err
	}
	return env{nproc: runtime.NumCPU(), cpu: cpuModel(), redis: v, goVer: runtime.Version(),
		date: time.Now().UTC().Format("2006-01-02 15:04 MST"), command: command()}, nil
}

func cpuModel() string {
	f, err := os.Open("/proc/cpuinfo")
	if err != nil {
		return "unknown"
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if k, v, ok := strings.Cut(sc.Text(), ":"); ok && strings.TrimSpace(k) == "model name" {
			return strings.TrimSpace(v)
		}
	}
	return "unknown"
}

// command is the command line as it was given, for the report; an absolute -out or -addr
// value is not written out, as it names a path or host of this machine.
func command() string {
	args := []string{"go", "run", "."}
	for _, a := range os.Args[1:] {
		if k, v, ok := strings.Cut(a, "="); ok && (filepath.IsAbs(v)) {
			a = k + "=DIR"
		} else if filepath.IsAbs(a) {
			a = "DIR"
		}
		args = append(args, a)
	}
	return "cd bench && " + strings.Join(args, " ")
}

type report struct {
	env  env
	cfg  config
	libs []library
	s1   [][]s1Round
	s2   [2][][]s2Round // [0]: empty critical section, [1]: 1 ms
	mp   [2][][]s2Round // the same across processes
	s5   s5Result
	took time.Duration
	// images are the chart files written into img/ next to the report.
	images []string
}

// table is a markdown table builder.
type table struct {
	b    strings.Builder
	cols int
}

func newTable(head ...string) *table {
	t := &table{cols: len(head)}
	t.row(head...)
	seps := make([]string, len(head))
	for i := range seps {
		seps[i] = "---:"
	}
	seps[0] = "---"
	t.row(seps...)
	return t
}

func (t *table) row(cells ...string) {
	t.b.WriteString("| " + strings.Join(cells, " | ") + " |\n")
}

func ratio(a, b float64) string {
	if b == 0 || math.IsNaN(a) || math.IsNaN(b) {
		return "-"
	}
	return fmt.Sprintf("%.2f", a/b)
}

func us(d time.Duration) string { return fmt.Sprintf("%.0f µs", float64(d)/float64(time.Microsecond)) }

// msOf is the p-th percentile of sorted ds in milliseconds, or "-" when there is none.
func msOf(ds []time.Duration, p float64) string {
	if len(ds) == 0 {
		return "-"
	}
	return ms(percentile(ds, p))
}

func ms(d time.Duration) string {
	if d < 10*time.Millisecond {
		return fmt.Sprintf("%.2f ms", float64(d)/float64(time.Millisecond))
	}
	return fmt.Sprintf("%.0f ms", float64(d)/float64(time.Millisecond))
}

func rateRange(rates []float64) string {
	lo, hi := math.Inf(1), math.Inf(-1)
	for _, r := range rates {
		lo, hi = min(lo, r), max(hi, r)
	}
	return fmt.Sprintf("%.0f-%.0f", lo, hi)
}

func (r *report) markdown() string {
	var b strings.Builder
	e := r.env
	fmt.Fprintf(&b, "# Benchmarks\n\n")
	fmt.Fprintf(&b, "relock against other Go Redis lock libraries, made by the program in `bench/`.\n\n")
	fmt.Fprintf(&b, "| | |\n|---|---|\n")
	fmt.Fprintf(&b, "| machine | %d CPUs (`nproc`), %s |\n", e.nproc, e.cpu)
	fmt.Fprintf(&b, "| Redis | %s, one local server on loopback (no persistence) |\n", e.redis)
	fmt.Fprintf(&b, "| Go | %s |\n", e.goVer)
	fmt.Fprintf(&b, "| date | %s |\n", e.date)
	fmt.Fprintf(&b, "| command | `%s` |\n", e.command)
	fmt.Fprintf(&b, "| rounds | %d per scenario, libraries interleaved (A B C … A B C …); S1 windows %v, S2 windows %v; whole run %v |\n\n",
		r.cfg.rounds, r.cfg.s1Dur, r.cfg.s2Dur, r.took.Round(time.Second))
	b.WriteString("Client and server share the machine, so these numbers compare the libraries with each other; " +
		"they are not what a networked deployment would see. Every library gets a new client for each window.\n\n")

	b.WriteString("## Libraries and settings\n\n| library | settings |\n|---|---|\n")
	for _, l := range r.libs {
		fmt.Fprintf(&b, "| %s | %s |\n", l.name, l.settings)
	}
	b.WriteString("\nrelock and rueidislock wake a waiter when the lock is released (pub/sub; client-side-caching " +
		"invalidations), and rueidislock also queues waiters of one process on a local gate. The others poll: a " +
		"waiter sleeps its retry delay, so the goroutine that has just unlocked can take the lock again before a " +
		"sleeping waiter wakes; the \"same\" column of S2 shows how often that happened. Redis commands are counted " +
		"by the server, so a Lua script counts once for its EVALSHA and once for every command it runs.\n")
	b.WriteString("\nThe \"relock / x\" columns divide relock's number by the row's: above 1 means relock's number is higher.\n\n")

	for _, img := range r.images {
		fmt.Fprintf(&b, "![%s](img/%s)\n\n", strings.TrimSuffix(img, ".svg"), img)
	}
	r.writeS1(&b)
	r.writeS2(&b)
	r.writeS3(&b)
	r.writeS5(&b)
	return b.String()
}

func (r *report) writeS1(b *strings.Builder) {
	fmt.Fprintf(b, "## S1: uncontended\n\n%d goroutines, each locking and unlocking its own key in a loop. "+
		"Latency is one lock+unlock cycle; allocations are the process's mallocs per cycle (runtime.MemStats).\n\n", s1Workers)
	t := newTable("library", "cycles/s", "per round", "p50", "p99", "allocs/cycle", "errors", "relock / x (cycles/s)")
	var base float64
	for i, l := range r.libs {
		var cycles int64
		var el time.Duration
		var mallocs uint64
		var errs int64
		var lat []time.Duration
		var rates []float64
		for _, rd := range r.s1[i] {
			cycles += rd.cycles
			el += rd.elapsed
			mallocs += rd.mallocs
			errs += rd.errors
			lat = append(lat, rd.lat...)
			rates = append(rates, float64(rd.cycles)/rd.elapsed.Seconds())
		}
		sortDurations(lat)
		rate := float64(cycles) / el.Seconds()
		if i == 0 {
			base = rate
		}
		allocs := math.NaN()
		if cycles > 0 {
			allocs = float64(mallocs) / float64(cycles)
		}
		t.row(l.name, fmt.Sprintf("%.0f", rate), rateRange(rates), us(percentile(lat, 50)), us(percentile(lat, 99)),
			fmt.Sprintf("%.1f", allocs), fmt.Sprint(errs), ratio(base, rate))
	}
	b.WriteString(t.b.String() + "\n")
}

// s2Totals pools a library's rounds.
type s2Totals struct {
	rate, cmdsPerAcq float64
	sameShare        float64
	top              string
	rates            []float64
	handoffs         []time.Duration
	per              []int64
	errors, viol     int64
}

func totals(rounds []s2Round) s2Totals {
	var t s2Totals
	var acq, cmds, same int64
	var el time.Duration
	byName := map[string]int64{}
	t.per = make([]int64, s2Waiters)
	for _, rd := range rounds {
		acq += rd.acq
		same += rd.same
		for name, n := range rd.commands {
			byName[name] += n
			cmds += n
		}
		el += rd.elapsed
		t.errors += rd.errors
		t.viol += rd.violations
		t.handoffs = append(t.handoffs, rd.handoffs...)
		t.rates = append(t.rates, float64(rd.acq)/rd.elapsed.Seconds())
		for i, n := range rd.perWaiter {
			t.per[i] += n
		}
	}
	sortDurations(t.handoffs)
	t.rate = float64(acq) / el.Seconds()
	t.cmdsPerAcq = math.NaN()
	if acq > 0 {
		t.cmdsPerAcq = float64(cmds) / float64(acq)
		t.sameShare = float64(same) / float64(acq)
		names := make([]string, 0, len(byName))
		for name, n := range byName {
			if n > 0 {
				names = append(names, name)
			}
		}
		slices.SortFunc(names, func(a, b string) int { return cmp.Compare(byName[b], byName[a]) })
		var parts []string
		for _, name := range names[:min(3, len(names))] {
			parts = append(parts, fmt.Sprintf("%s %.1f", name, float64(byName[name])/float64(acq)))
		}
		t.top = strings.Join(parts, ", ")
	}
	return t
}

func (r *report) writeS2(b *strings.Builder) {
	r.writeContended(b, r.s2, fmt.Sprintf("## S2: contended, one process\n\n%d goroutines on one key, one client per library. ", s2Waiters))
	r.writeContended(b, r.mp, fmt.Sprintf("## S2 across processes\n\n%d processes of %d goroutines each on one key, one client per process "+
		"(the program runs itself as the workers). Events are merged by wall-clock time; commands are counted from just "+
		"before the common start. ", mpProcs, mpWaiters))
}

func (r *report) writeContended(b *strings.Builder, data [2][][]s2Round, intro string) {
	fmt.Fprint(b, intro+
		"Handoff is the time from an unlock returning to the next holder's lock returning, counted only when "+
		"the next holder is another goroutine; \"same\" is the share of acquisitions by the goroutine that had just unlocked. "+
		"Commands are INFO commandstats calls during the window (every command the server ran, "+
		"including failed attempts, renewals, pub/sub, and the commands Lua scripts run inside EVALSHA) "+
		"per acquisition, with the three most frequent. Errors are lock calls that "+
		"returned an error before the window ended (the goroutine then tries again). "+
		"Overlaps counts acquisitions that returned before the previous holder left its critical section (must be 0).\n\n")
	for ci, name := range []string{"empty critical section", "1 ms critical section"} {
		fmt.Fprintf(b, "### %s\n\n", name)
		t := newTable("library", "acquisitions/s", "per round", "handoff p50", "handoff p99", "same", "commands/acq", "most frequent, per acq", "errors", "overlaps", "relock / x (acq/s)")
		var base float64
		for i, l := range r.libs {
			tt := totals(data[ci][i])
			if i == 0 {
				base = tt.rate
			}
			t.row(l.name, fmt.Sprintf("%.0f", tt.rate), rateRange(tt.rates), msOf(tt.handoffs, 50),
				msOf(tt.handoffs, 99), fmt.Sprintf("%.0f%%", 100*tt.sameShare), fmt.Sprintf("%.1f", tt.cmdsPerAcq),
				tt.top, fmt.Sprint(tt.errors),
				fmt.Sprint(tt.viol), ratio(base, tt.rate))
		}
		b.WriteString(t.b.String() + "\n")
	}
}

func spread(per []int64) (lo, hi int64, cv float64) {
	if len(per) == 0 {
		return 0, 0, math.NaN()
	}
	lo, hi = per[0], per[0]
	var sum float64
	for _, n := range per {
		lo, hi = min(lo, n), max(hi, n)
		sum += float64(n)
	}
	mean := sum / float64(len(per))
	if mean == 0 {
		return lo, hi, math.NaN()
	}
	var v float64
	for _, n := range per {
		v += (float64(n) - mean) * (float64(n) - mean)
	}
	return lo, hi, math.Sqrt(v/float64(len(per))) / mean
}

func (r *report) writeS3(b *strings.Builder) {
	fmt.Fprintf(b, "## S3: fairness\n\nThe S2 runs, counted per waiter (summed over rounds): the fewest and most "+
		"acquisitions any of the %d waiters got, and the coefficient of variation (standard deviation / mean; "+
		"0 is perfectly even).\n\n", s2Waiters)
	r.fairness(b, r.s2)
	b.WriteString("Across processes (16 waiters in 4 processes):\n\n")
	r.fairness(b, r.mp)
}

func (r *report) fairness(b *strings.Builder, data [2][][]s2Round) {
	t := newTable("library", "min/max (empty)", "CV (empty)", "min/max (1 ms)", "CV (1 ms)", "relock / x (CV, 1 ms)")
	var base float64
	for i, l := range r.libs {
		cells := []string{l.name}
		var cv1 float64
		for ci := range 2 {
			lo, hi, cv := spread(totals(data[ci][i]).per)
			cells = append(cells, fmt.Sprintf("%d / %d", lo, hi), fmt.Sprintf("%.2f", cv))
			cv1 = cv
		}
		if i == 0 {
			base = cv1
		}
		cells = append(cells, ratio(base, cv1))
		t.row(cells...)
	}
	b.WriteString(t.b.String() + "\n")
}

func (r *report) writeS5(b *strings.Builder) {
	s := r.s5
	fmt.Fprintf(b, "## S5: watchdog, relock only\n\nOne relock client holds %d locks with a 3 s watchdog timeout "+
		"(renewed every 1 s); numbers are per renewal tick over %d ticks, from `Client.WatchdogStats()`. "+
		"The peers have no batched watchdog to compare: redsync and redislock leave renewal to the caller "+
		"(one Extend/Refresh call per lock), and rueidislock renews each key of each lock from its own goroutine.\n\n",
		s.holds, s.ticks)
	t := newTable("holds", "script calls/tick", "round trips/tick", "renewed/tick", "lost/tick", "holds lost", "time to take the holds")
	t.row(fmt.Sprint(s.holds), fmt.Sprintf("%.1f", s.calls), fmt.Sprintf("%.1f", s.batches), fmt.Sprintf("%.0f", s.renewed),
		fmt.Sprintf("%.0f", s.lost), fmt.Sprint(s.holdsLostDuringRun), ms(s.lockTime))
	b.WriteString(t.b.String() + "\n")
}
