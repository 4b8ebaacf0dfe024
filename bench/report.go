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
	"strconv"
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
	// The median PING round trip, back to back and after sleeping as long as the handoff
	// run's critical section, from samples taken before each of its rounds.
	rtt, idleRTT time.Duration
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
	s2   [len(s2Modes)][][]s2Round // by s2Modes
	mp   [][][]s2Round             // across processes, by mpConfigs
	s4   [2][2][]s4Round           // [critical section empty, 1 ms][read-write lock, mutex]
	// ceiling is by ceilingVariants, then by round.
	ceiling [][]ceilingRound
	many    manyResult
	scale   scaleResult
	sem     semResult
	took    time.Duration
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
	if d < time.Millisecond {
		return us(d)
	}
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

	if r.cfg.semOnly {
		r.writeSemaphore(&b)
		return b.String()
	}
	b.WriteString("## Libraries and settings\n\n| library | settings |\n|---|---|\n")
	for _, l := range r.libs {
		fmt.Fprintf(&b, "| %s | %s |\n", l.name, l.settings)
	}
	b.WriteString("\nrelock and rueidislock wake a waiter when the lock is released (pub/sub; client-side-caching " +
		"invalidations). rueidislock also queues waiters of one process on a local gate; relock's waiters of one " +
		"process wait in line, and an unlock hands the lock to the first of them in its own script call, at most " +
		"three times in a row. The others poll: a " +
		"waiter sleeps its retry delay, so the goroutine that has just unlocked can take the lock again before a " +
		"sleeping waiter wakes; the \"same\" column of S2 shows how often that happened.\n")
	b.WriteString("\nThe \"relock / x\" columns divide relock's number by the row's: above 1 means relock's number is higher.\n\n")

	for _, img := range r.images {
		fmt.Fprintf(&b, "![%s](img/%s)\n\n", strings.TrimSuffix(img, ".svg"), img)
	}
	r.writeTargets(&b)
	if r.cfg.ceiling {
		r.writeCeiling(&b)
		return b.String()
	}
	r.writeS1(&b)
	r.writeS2(&b)
	r.writeS3(&b)
	r.writeS4(&b)
	r.writeSemaphore(&b)
	r.writeS5(&b)
	r.writeCeiling(&b)
	r.writeMany(&b)
	r.writeScale(&b)
	return b.String()
}

// s1Cost is a library's S1 cost per cycle, pooled over the rounds.
type s1Cost struct {
	cycles         int64
	allocs         float64 // mallocs per cycle
	client, server float64 // CPU µs per cycle
	errors         int64
	lat            []time.Duration
}

func (r *report) s1Cost(i int) s1Cost {
	var c s1Cost
	var mallocs uint64
	var client, server time.Duration
	for _, rd := range r.s1[i] {
		c.cycles += rd.cycles
		mallocs += rd.mallocs
		c.errors += rd.errors
		client += rd.clientCPU
		server += rd.serverCPU
		c.lat = append(c.lat, rd.lat...)
	}
	sortDurations(c.lat)
	c.allocs = per(float64(mallocs), c.cycles)
	c.client = per(float64(client)/float64(time.Microsecond), c.cycles)
	c.server = per(float64(server)/float64(time.Microsecond), c.cycles)
	return c
}

// cpuBound is the cycles per second that cores can run when each cycle costs clientUs and
// serverUs of CPU: the throughput bound of a machine whose clients and server share it.
func cpuBound(cores int, clientUs, serverUs float64) float64 {
	if !(clientUs+serverUs > 0) {
		return math.NaN()
	}
	return float64(cores) * 1e6 / (clientUs + serverUs)
}

func (r *report) writeS1(b *strings.Builder) {
	fmt.Fprintf(b, "## S1: uncontended\n\n%d goroutines, each locking and unlocking its own key in a loop. "+
		"Cycles/s is the median of the rounds' rates, and the ratio the median of the rounds' ratios (in a round "+
		"the libraries run back to back, so a round's ratio compares them on the same machine, and the median "+
		"leaves out a round the machine disturbed). "+
		"Latency is one lock+unlock cycle; allocations are the process's mallocs per cycle (runtime.MemStats); "+
		"client CPU is the bench process's CPU time (getrusage, user and system, every thread) per cycle, "+
		"which in this window is the library's client alone; "+
		"server CPU is the redis-server process's CPU time (INFO cpu, user and system) per cycle. "+
		"\"CPU bound\" is %d cores ÷ (client + server CPU per cycle).\n\n", s1Workers, r.env.nproc)
	t := newTable("library", "cycles/s", "per round", "p50", "p99", "allocs/cycle", "client CPU/cycle", "server CPU/cycle",
		"CPU bound (cycles/s)", "errors", "relock / x (cycles/s)")
	for i, l := range r.libs {
		c := r.s1Cost(i)
		rates := r.s1Rates(i)
		t.row(l.name, fmt.Sprintf("%.0f", median(rates)), rateRange(rates), us(percentile(c.lat, 50)), us(percentile(c.lat, 99)),
			num(c.allocs, 1), num(c.client, 1)+" µs", num(c.server, 1)+" µs",
			num(cpuBound(r.env.nproc, c.client, c.server), 0), fmt.Sprint(c.errors), fmt.Sprintf("%.2f", r.s1Ratio(0, i)))
	}
	b.WriteString(t.b.String() + "\n")
	// The figures behind the bound, written out for relock and the raw scripts: client and
	// server share the machine's cores, so every µs either side spends on a cycle is a µs
	// the other cannot use.
	var parts []string
	for i, l := range r.libs {
		if l.name != "relock" && l.name != "raw scripts" {
			continue
		}
		c := r.s1Cost(i)
		parts = append(parts, fmt.Sprintf("%s: %d ÷ (%s µs client + %s µs server) = %s cycles/s, measured %.0f",
			l.name, r.env.nproc, num(c.client, 1), num(c.server, 1), num(cpuBound(r.env.nproc, c.client, c.server), 0), median(r.s1Rates(i))))
	}
	fmt.Fprintf(b, "Throughput ≈ usable cores ÷ (client + server CPU per cycle): %s. "+
		"The measured rate falls short of the bound by the time neither side is running (waiting on the other, "+
		"or on the scheduler).\n\n", strings.Join(parts, "; "))
}

// s1Rates returns library i's S1 cycles per second, a rate per round.
func (r *report) s1Rates(i int) []float64 {
	var rates []float64
	for _, rd := range r.s1[i] {
		rates = append(rates, float64(rd.cycles)/rd.elapsed.Seconds())
	}
	return rates
}

// s1Ratio is the median over the rounds of library i's S1 rate divided by library j's.
func (r *report) s1Ratio(i, j int) float64 {
	a, b := r.s1Rates(i), r.s1Rates(j)
	var ratios []float64
	for k := range min(len(a), len(b)) {
		if b[k] > 0 {
			ratios = append(ratios, a[k]/b[k])
		}
	}
	return median(ratios)
}

// median returns the median of vs, or NaN when there are none.
func median(vs []float64) float64 {
	if len(vs) == 0 {
		return math.NaN()
	}
	s := slices.Clone(vs)
	slices.Sort(s)
	if n := len(s); n%2 == 0 {
		return (s[n/2-1] + s[n/2]) / 2
	}
	return s[len(s)/2]
}

// s2Totals pools a library's rounds.
type s2Totals struct {
	rate, cmdsPerAcq float64
	sentPerAcq       float64 // commands the clients sent, per acquisition
	sameShare        float64
	top, sentTop     string
	rates            []float64
	handoffs         []time.Duration
	fromCall         []time.Duration
	per              []int64
	errors, viol     int64
}

func totals(rounds []s2Round) s2Totals {
	var t s2Totals
	var acq, cmds, same, sent int64
	var el time.Duration
	byName, sentByName := map[string]int64{}, map[string]int64{}
	for _, rd := range rounds {
		if len(rd.perWaiter) > len(t.per) {
			t.per = append(t.per, make([]int64, len(rd.perWaiter)-len(t.per))...)
		}
	}
	for _, rd := range rounds {
		acq += rd.acq
		same += rd.same
		for name, n := range rd.commands {
			byName[name] += n
			cmds += n
		}
		for name, n := range rd.sent {
			sentByName[name] += n
			sent += n
		}
		el += rd.elapsed
		t.errors += rd.errors
		t.viol += rd.violations
		t.handoffs = append(t.handoffs, rd.handoffs...)
		t.fromCall = append(t.fromCall, rd.fromCall...)
		t.rates = append(t.rates, float64(rd.acq)/rd.elapsed.Seconds())
		for i, n := range rd.perWaiter {
			t.per[i] += n
		}
	}
	sortDurations(t.handoffs)
	sortDurations(t.fromCall)
	t.rate = float64(acq) / el.Seconds()
	t.cmdsPerAcq, t.sentPerAcq = math.NaN(), math.NaN()
	if acq > 0 {
		t.cmdsPerAcq = float64(cmds) / float64(acq)
		t.sentPerAcq = float64(sent) / float64(acq)
		t.sameShare = float64(same) / float64(acq)
		t.top = topPerAcq(byName, acq)
		t.sentTop = topPerAcq(sentByName, acq)
	}
	return t
}

// topPerAcq names the three most frequent commands of counts, each with its count per
// acquisition.
func topPerAcq(counts map[string]int64, acq int64) string {
	names := make([]string, 0, len(counts))
	for name, n := range counts {
		if n > 0 {
			names = append(names, name)
		}
	}
	slices.SortFunc(names, func(a, b string) int { return cmp.Or(cmp.Compare(counts[b], counts[a]), cmp.Compare(a, b)) })
	var parts []string
	for _, name := range names[:min(3, len(names))] {
		parts = append(parts, fmt.Sprintf("%s %.1f", name, float64(counts[name])/float64(acq)))
	}
	return strings.Join(parts, ", ")
}

func (r *report) writeS2(b *strings.Builder) {
	r.writeContended(b, r.s2[:2], []string{s2Modes[0].name, s2Modes[1].name},
		fmt.Sprintf("## S2: contended, one process\n\n%d goroutines on one key, one client per library. ", s2Waiters))
	names := make([]string, len(mpConfigs))
	for i, c := range mpConfigs {
		names[i] = c.String()
	}
	r.writeContended(b, r.mp, names, fmt.Sprintf("## S2 across processes\n\n%d goroutines on one key in P processes, one client per process "+
		"(the program runs itself as the workers): P=4 is 4 processes of 4, P=8 is 8 processes of 2. Events are merged by "+
		"wall-clock time; commands are counted from just before the common start. ", scaleTotal))
	r.writeHandoff(b)
}

// writeContended writes one table per entry of data, headed by the entry of names.
func (r *report) writeContended(b *strings.Builder, data [][][]s2Round, names []string, intro string) {
	fmt.Fprint(b, intro+
		"Handoff is the time from an unlock returning to the next holder's lock returning, counted only when "+
		"the next holder is another goroutine; \"same\" is the share of acquisitions by the goroutine that had just unlocked. "+
		"\"Sent/acq\" counts the commands the library's clients sent (a script call is one; connection set-up "+
		"and keep-alive PINGs are left out). \"Server/acq\" counts every command the server ran, from INFO commandstats: "+
		"failed attempts, renewals, pub/sub, and the commands Lua scripts run inside EVALSHA. Errors are lock calls that "+
		"returned an error before the window ended (the goroutine then tries again). "+
		"Overlaps counts acquisitions that returned before the previous holder left its critical section (must be 0).\n\n")
	for ci, name := range names {
		fmt.Fprintf(b, "### %s\n\n", name)
		t := newTable("library", "acquisitions/s", "per round", "handoff p50", "handoff p99", "same", "sent/acq", "most sent, per acq", "server/acq", "errors", "overlaps", "relock / x (acq/s)")
		var base float64
		for i, l := range r.libs {
			tt := totals(data[ci][i])
			if i == 0 {
				base = tt.rate
			}
			t.row(l.name, fmt.Sprintf("%.0f", tt.rate), rateRange(tt.rates), msOf(tt.handoffs, 50),
				msOf(tt.handoffs, 99), fmt.Sprintf("%.0f%%", 100*tt.sameShare), fmt.Sprintf("%.1f", tt.sentPerAcq),
				tt.sentTop, fmt.Sprintf("%.1f", tt.cmdsPerAcq), fmt.Sprint(tt.errors),
				fmt.Sprint(tt.viol), ratio(base, tt.rate))
		}
		b.WriteString(t.b.String() + "\n")
	}
}

// writeHandoff reports the runs in which the goroutine that unlocked steps aside until
// another has the lock: every release then goes to a goroutine that was already waiting,
// and the handoff is how soon one of them learns of it and gets the lock.
func (r *report) writeHandoff(b *strings.Builder) {
	m := s2Modes[2]
	fmt.Fprintf(b, "## S2 handoff: the releaser steps aside\n\n%d goroutines on one key, one process, %v critical "+
		"section; a goroutine that has unlocked does not ask again until another goroutine has taken the lock. "+
		"In the runs above a polling library mostly gives the lock back to the goroutine that has just released it, "+
		"and the few handoffs it makes are those where a waiter's retry happened to come at the right moment. Here "+
		"every release goes to a goroutine that asked, and was refused, during the critical section before: the "+
		"handoff is how soon a waiter learns that the lock is free. It is measured from Unlock returning (as in the "+
		"tables above; a woken waiter may have the lock before the releaser's Unlock has returned, which counts as 0) "+
		"and, stricter, from Unlock being called.\n\n"+
		"Round trips are the median time of a PING on a warm connection, measured two ways: back to back (%v), and "+
		"each after sleeping %v, as the processes do in this run's critical sections (%v): a process that has slept "+
		"has parked threads to wake, and every hop of a handoff pays for that. The handoff's round trips are counted "+
		"in the second unit.\n\n", s2Waiters, m.cs, r.env.rtt.Round(time.Microsecond), m.cs, r.env.idleRTT.Round(time.Microsecond))
	t := newTable("library", "handoffs/s", "handoff p50", "handoff p99", "p50, round trips", "from the call, p50",
		"from the call, p99", "from the call p50, round trips", "sent/acq", "most sent, per acq", "server/acq", "errors", "overlaps", "x / relock (handoff p50)")
	var base time.Duration
	rtts := func(ds []time.Duration) string {
		if r.env.idleRTT <= 0 || len(ds) == 0 {
			return "-"
		}
		return fmt.Sprintf("%.1f", float64(percentile(ds, 50))/float64(r.env.idleRTT))
	}
	for i, l := range r.libs {
		tt := totals(r.s2[2][i])
		if i == 0 && len(tt.handoffs) > 0 {
			base = percentile(tt.handoffs, 50)
		}
		vs := "-"
		if base > 0 && len(tt.handoffs) > 0 {
			vs = ratio(float64(percentile(tt.handoffs, 50)), float64(base))
		}
		t.row(l.name, fmt.Sprintf("%.0f", tt.rate), msOf(tt.handoffs, 50), msOf(tt.handoffs, 99), rtts(tt.handoffs),
			msOf(tt.fromCall, 50), msOf(tt.fromCall, 99), rtts(tt.fromCall),
			fmt.Sprintf("%.1f", tt.sentPerAcq), tt.sentTop, fmt.Sprintf("%.1f", tt.cmdsPerAcq),
			fmt.Sprint(tt.errors), fmt.Sprint(tt.viol), vs)
	}
	b.WriteString(t.b.String() + "\n")
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
	r.fairness(b, r.s2[:2])
	b.WriteString("Across processes (16 waiters in 4 processes):\n\n")
	r.fairness(b, r.mp[:2])
	fmt.Fprintf(b, "Order: an acquisition overtakes when a goroutine that had called Lock at least %v earlier "+
		"was still waiting (FIFO violations; a fair lock must have none). Counted in the runs of one process; the "+
		"handoff column is the step-aside run's handoff p50, for the fair lock against relock's plain mutex. "+
		"The times are the client's, and a goroutine on a loaded machine may wait to run, hence the margin; "+
		"the fair lock's order is also tested exactly, waiter by waiter, in fairlock's TestFIFO.\n\n", fifoMargin)
	t := newTable("library", "overtakes (empty)", "overtakes (1 ms)", "overtakes (step aside)", "share of acquisitions (step aside)", "handoff p50 (step aside)")
	for i, l := range r.libs {
		cells := []string{l.name}
		for mi := range s2Modes {
			var n int64
			for _, rd := range r.s2[mi][i] {
				n += rd.overtakes
			}
			cells = append(cells, fmt.Sprint(n))
		}
		tt := totals(r.s2[2][i])
		var acq, n int64
		for _, rd := range r.s2[2][i] {
			acq += rd.acq
			n += rd.overtakes
		}
		share := "-"
		if acq > 0 {
			share = fmt.Sprintf("%.1f%%", 100*float64(n)/float64(acq))
		}
		cells = append(cells, share, msOf(tt.handoffs, 50))
		t.row(cells...)
	}
	b.WriteString(t.b.String() + "\n")
}

func (r *report) writeS4(b *strings.Builder) {
	fmt.Fprintf(b, "## S4: read-heavy, relock only\n\n%d goroutines on one key, %.0f%% of operations reads: on "+
		"relock's read-write lock a read takes a read hold and readers share the lock; on relock's mutex every "+
		"operation takes the lock. The peers have no read-write lock. Violations counts a writer found inside with "+
		"anyone else, or a reader with a writer (must be 0).\n\n", s4Workers, 100*s4ReadShare)
	t := newTable("critical section", "lock", "operations/s", "per round", "reads", "writes", "errors", "violations", "rwlock / mutex (ops/s)")
	for ci, cs := range []string{"empty", "1 ms"} {
		var rates [2]float64
		for vi, name := range []string{"rwlock.RWMutex", "rlock.Mutex"} {
			var ops, reads, writes, errs, viol int64
			var el time.Duration
			var per []float64
			for _, rd := range r.s4[ci][vi] {
				ops += rd.reads + rd.writes
				reads += rd.reads
				writes += rd.writes
				errs += rd.errors
				viol += rd.violations
				el += rd.elapsed
				per = append(per, float64(rd.reads+rd.writes)/rd.elapsed.Seconds())
			}
			rates[vi] = float64(ops) / el.Seconds()
			cmpCell := ""
			if vi == 1 {
				cmpCell = ratio(rates[0], rates[1])
			}
			t.row(cs, name, fmt.Sprintf("%.0f", rates[vi]), rateRange(per), fmt.Sprint(reads), fmt.Sprint(writes),
				fmt.Sprint(errs), fmt.Sprint(viol), cmpCell)
		}
	}
	b.WriteString(t.b.String() + "\n")
}

// semCycles pools a semaphore library's uncontended rounds.
type semCycles struct {
	rate, sentPer, runPer float64
	rates                 []float64
	lat                   []time.Duration
	sentTop               string
	errors                int64
}

func semCyclesOf(rounds []semCycleRound) semCycles {
	var c semCycles
	var cycles, sent, run int64
	var el time.Duration
	byName := map[string]int64{}
	for _, rd := range rounds {
		cycles += rd.cycles
		el += rd.elapsed
		c.errors += rd.errors
		c.lat = append(c.lat, rd.lat...)
		c.rates = append(c.rates, float64(rd.cycles)/rd.elapsed.Seconds())
		for name, n := range rd.sent {
			byName[name] += n
			sent += n
		}
		run += sum(rd.commands)
	}
	sortDurations(c.lat)
	c.rate = float64(cycles) / el.Seconds()
	c.sentPer, c.runPer = per(float64(sent), cycles), per(float64(run), cycles)
	if cycles > 0 {
		c.sentTop = topPerAcq(byName, cycles)
	}
	return c
}

// semAttempts is the acquire script's calls per acquisition, pooled over rounds.
func semAttempts(rounds []s2Round) float64 {
	var acq, n int64
	for _, rd := range rounds {
		acq += rd.acq
		n += rd.sent["evalsha acquire"]
	}
	return per(float64(n), acq)
}

func (r *report) writeSemaphore(b *strings.Builder) {
	s := r.sem
	if len(s.libs) < 2 || len(s.contended[0]) < 2 {
		return
	}
	fmt.Fprintf(b, "## Semaphore: relock against a polling semaphore\n\n"+
		"relock's semaphore (`Client.Semaphore`, Redisson's RSemaphore data) against the semaphore a service writes "+
		"by hand on the same data: a string key holding the available permits, an acquire that takes permits with a "+
		"Lua script when there are enough and otherwise sleeps and tries again, and a release that is an `INCRBY`. "+
		"Both run on rueidis, a new client for each window, one permit per acquisition; the two are interleaved over "+
		"%d rounds. The polling semaphore sleeps a fixed %v between attempts, as the lock peers tuned above do: the "+
		"shortest sleep a hand-written loop commonly uses, which gives it the shortest wait for a release it can have, "+
		"and its commands per acquisition show what that costs. relock's Acquire sends nothing while it waits: it is "+
		"woken by the release's `PUBLISH`.\n\n", r.cfg.rounds, semPollDelay)
	b.WriteString("| semaphore | settings |\n|---|---|\n")
	for _, l := range s.libs {
		fmt.Fprintf(b, "| %s | %s |\n", l.name, l.settings)
	}
	fmt.Fprintf(b, "\n### Uncontended\n\nG goroutines on one semaphore of G permits, each acquiring a permit and "+
		"releasing it in a loop for %v: a permit is always free. The goroutines share one client, or have a client "+
		"each. Latency is one acquire+release cycle. \"Sent/cycle\" counts the commands the clients sent (an "+
		"`EVALSHA` is named by its script), \"run/cycle\" the commands the server ran (INFO commandstats, the "+
		"scripts' commands included). Cycles/s pools the rounds.\n\n", r.cfg.s1Dur)
	t := newTable("goroutines = permits", "semaphore", "cycles/s", "per round", "p50", "p99", "sent/cycle", "most sent, per cycle",
		"run/cycle", "errors", "relock / polling (cycles/s)")
	var cyc [len(semUncontended)][]semCycles
	for gi, g := range semUncontended {
		for li, l := range s.libs {
			c := semCyclesOf(s.uncontended[gi][li])
			cyc[gi] = append(cyc[gi], c)
			cmpCell := ""
			if li > 0 {
				cmpCell = ratio(cyc[gi][0].rate, c.rate)
			}
			t.row(g.String(), l.name, num(c.rate, 0), rateRange(c.rates), us(percentile(c.lat, 50)), us(percentile(c.lat, 99)),
				num(c.sentPer, 1), c.sentTop, num(c.runPer, 1), fmt.Sprint(c.errors), cmpCell)
		}
	}
	b.WriteString(t.b.String() + "\n")
	one, shared, own := cyc[0], cyc[1], cyc[2]
	fmt.Fprintf(b, "With %s a relock cycle took p50 %s and sent %s commands, which ran %s on the server; a polling cycle "+
		"%s, %s sent, %s run. With %s relock ran %s cycles/s (×%s its rate with one goroutine) and polling %s (×%s); "+
		"with %s relock ran %s. Goroutines of one client that find permits free take them in parallel: a relock "+
		"client queues its Acquires in memory only once one of them waits.\n\n",
		semUncontended[0], us(percentile(one[0].lat, 50)), num(one[0].sentPer, 1), num(one[0].runPer, 1),
		us(percentile(one[1].lat, 50)), num(one[1].sentPer, 1), num(one[1].runPer, 1),
		semUncontended[1], num(shared[0].rate, 0), ratio(shared[0].rate, one[0].rate), num(shared[1].rate, 0),
		ratio(shared[1].rate, one[1].rate), semUncontended[2], num(own[0].rate, 0))

	fmt.Fprintf(b, "### Contended\n\nEvery goroutine acquires one permit, holds it for the critical section and "+
		"releases it, in a loop, for %v; there are more goroutines than permits, so that a release mostly has waiters. A "+
		"permit freed by a release is taken by a later acquisition: the k-th acquisition (in the order the Acquires "+
		"returned) is paired with the (k − permits)-th release (in the order the Releases returned), the first ones "+
		"taking the permits there were at the start. Handoff is then timed as the lock's is above: from the Release "+
		"returning to the Acquire returning (0 when the Acquire returned first), and, stricter, from the Release "+
		"being called; it is counted only when the two are different goroutines, and \"same\" is the share of "+
		"acquisitions paired with the acquirer's own release. \"Attempts/acq\" is the acquire script's calls per "+
		"acquisition (1.0: no attempt failed). Overtakes counts acquisitions made while a goroutine that had called "+
		"Acquire at least "+fifoMargin.String()+" earlier was still waiting. Overlaps counts acquisitions that "+
		"returned while all the permits were held by goroutines inside their critical sections (must be 0). "+
		"Across processes the program runs itself as the workers, one client per process, and events are merged "+
		"by wall-clock time.\n\n", r.cfg.s2Dur)
	for mi, m := range semModes {
		fmt.Fprintf(b, "#### %s\n\n", m)
		t := newTable("semaphore", "acquisitions/s", "per round", "handoff p50", "handoff p99", "from the call, p50",
			"from the call, p99", "same", "attempts/acq", "sent/acq", "most sent, per acq", "server/acq", "overtakes",
			"errors", "overlaps", "relock / polling (acq/s)")
		var base float64
		for li, l := range s.libs {
			rounds := s.contended[mi][li]
			tt := totals(rounds)
			var over int64
			for _, rd := range rounds {
				over += rd.overtakes
			}
			cmpCell := ""
			if li == 0 {
				base = tt.rate
			} else {
				cmpCell = ratio(base, tt.rate)
			}
			t.row(l.name, num(tt.rate, 0), rateRange(tt.rates), msOf(tt.handoffs, 50), msOf(tt.handoffs, 99),
				msOf(tt.fromCall, 50), msOf(tt.fromCall, 99), fmt.Sprintf("%.0f%%", 100*tt.sameShare),
				num(semAttempts(rounds), 2), num(tt.sentPerAcq, 1), tt.sentTop, num(tt.cmdsPerAcq, 1), fmt.Sprint(over),
				fmt.Sprint(tt.errors), fmt.Sprint(tt.viol), cmpCell)
		}
		b.WriteString(t.b.String() + "\n")
		rl, po := totals(s.contended[mi][0]), totals(s.contended[mi][1])
		fmt.Fprintf(b, "relock: %s acquisitions/s, handoff p50 %s and p99 %s, %s acquire attempts, %s commands sent and "+
			"%s run per acquisition, %.0f%% of permits taken back by their releaser. Polling: %s acquisitions/s, "+
			"handoff p50 %s and p99 %s, %s attempts, %s sent and %s run, %.0f%% taken back.\n\n",
			num(rl.rate, 0), msOf(rl.handoffs, 50), msOf(rl.handoffs, 99), num(semAttempts(s.contended[mi][0]), 2),
			num(rl.sentPerAcq, 1), num(rl.cmdsPerAcq, 1), 100*rl.sameShare,
			num(po.rate, 0), msOf(po.handoffs, 50), msOf(po.handoffs, 99), num(semAttempts(s.contended[mi][1]), 2),
			num(po.sentPerAcq, 1), num(po.cmdsPerAcq, 1), 100*po.sameShare)
	}
	// The runs across processes, side by side: how relock's attempts grow with the clients.
	var parts []string
	for mi, m := range semModes {
		if m.procs > 1 {
			parts = append(parts, fmt.Sprintf("%s with %d clients", num(semAttempts(s.contended[mi][0]), 2), m.procs))
		}
	}
	fmt.Fprintf(b, "relock's acquire attempts per acquisition across processes: %s. Only the client first in "+
		"Redis's queue listens for releases on the semaphore's channel; the others wait on a channel of their own, "+
		"where they are told when they come first, so a release wakes one client however many wait.\n\n", strings.Join(parts, ", "))
}

// s5 is the renewal point of S5's 10,000 holds.
func (r *report) s5() s5Result {
	for _, h := range r.scale.holds {
		if h.holds == 10000 {
			return h
		}
	}
	return s5Result{calls: math.NaN(), batches: math.NaN()}
}

func (r *report) writeS5(b *strings.Builder) {
	s := r.s5()
	fmt.Fprintf(b, "## S5: watchdog, relock only\n\nOne relock client holds %d locks with a 3 s watchdog timeout "+
		"(renewed every 1 s); numbers are per renewal tick over %d ticks, from `Client.WatchdogStats()`. "+
		"The peers have no batched watchdog to compare: redsync and redislock leave renewal to the caller "+
		"(one Extend/Refresh call per lock), and rueidislock renews each key of each lock from its own goroutine. "+
		"The scale section has the same run at other numbers of holds.\n\n",
		s.holds, s.ticks)
	t := newTable("holds", "script calls/tick", "round trips/tick", "renewed/tick", "lost/tick", "holds lost", "time to take the holds")
	t.row(fmt.Sprint(s.holds), num(s.calls, 1), num(s.batches, 1), num(s.renewed, 0),
		num(s.lost, 0), fmt.Sprint(s.holdsLostDuringRun), ms(s.lockTime))
	b.WriteString(t.b.String() + "\n")
}

func (r *report) fairness(b *strings.Builder, data [][][]s2Round) {
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

// per divides total by n, the arithmetic of every "per acquisition", "per cycle" and "per
// tick" figure: NaN when there was nothing to divide by, which the tables print as "-".
func per(total float64, n int64) float64 {
	if n <= 0 {
		return math.NaN()
	}
	return total / float64(n)
}

// num formats v with prec decimals, or "-" for NaN.
func num(v float64, prec int) string {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return "-"
	}
	return strconv.FormatFloat(v, 'f', prec, 64)
}

// ceilingFigures is a ceiling variant's medians over the rounds.
type ceilingFigures struct {
	rate, serverUs, runPerCycle float64
	rates                       []float64
	failed                      int64
}

func (r *report) ceilingFigures(vi int) ceilingFigures {
	var f ceilingFigures
	var cpus, runs []float64
	for _, rd := range r.ceiling[vi] {
		f.rates = append(f.rates, float64(rd.cycles)/rd.elapsed.Seconds())
		cpus = append(cpus, per(float64(rd.serverCPU)/float64(time.Microsecond), rd.cycles))
		runs = append(runs, per(float64(sum(rd.commands)), rd.cycles))
		f.failed += rd.failed
	}
	f.rate, f.serverUs, f.runPerCycle = median(f.rates), median(cpus), median(runs)
	return f
}

func (r *report) writeCeiling(b *strings.Builder) {
	if len(r.ceiling) < 2 {
		return
	}
	fmt.Fprintf(b, "## Ceiling: the server alone\n\n%d connections drive the server with raw RESP over plain TCP, "+
		"no client library: each writes %d cycles at a time (a cycle is an acquire and a release) and then reads their "+
		"replies. Every cycle has its own owner, and each connection spreads its cycles over %s lock names of its own, "+
		"so that every acquisition finds its lock free. relock's cycle is the engine's own pair of calls, EVALSHA of the "+
		"acquire script and of the unlock script with the keys and arguments the engine sends. Server CPU is the "+
		"INFO cpu delta ÷ cycles, and run/cycle the commands the server ran per cycle (INFO commandstats, the "+
		"scripts' commands included); both are medians over the %d rounds of %v.\n\n",
		ceilingConns, ceilingDepth, thousands(ceilingNames), len(r.ceiling[0]), r.cfg.ceilDur)
	t := newTable("cycle", "cycles/s", "per round", "server CPU/cycle", "run/cycle", "failed cycles")
	for vi, v := range ceilingVariants {
		f := r.ceilingFigures(vi)
		t.row(v.name, num(f.rate, 0), rateRange(f.rates), num(f.serverUs, 1)+" µs", num(f.runPerCycle, 1), fmt.Sprint(f.failed))
	}
	b.WriteString(t.b.String() + "\n")
	rl, sn := r.ceilingFigures(0), r.ceilingFigures(1)
	fmt.Fprintf(b, "relock's cycle costs the server %s µs against %s µs for SET NX PX and a compare-and-delete "+
		"script: %s×. One server core runs at most 1 s ÷ %s µs = %s relock cycles/s (measured %s) and %s of the other (measured %s).\n\n",
		num(rl.serverUs, 1), num(sn.serverUs, 1), ratio(rl.serverUs, sn.serverUs), num(rl.serverUs, 1),
		num(1e6/rl.serverUs, 0), num(rl.rate, 0), num(1e6/sn.serverUs, 0), num(sn.rate, 0))
}

func (r *report) writeMany(b *strings.Builder) {
	m := r.many
	if m.procs == 0 {
		return
	}
	fmt.Fprintf(b, "## Many waiters\n\n%s of relock's plain mutex park on one lock, one client per process with a "+
		"%v watchdog timeout. A holder in the bench process (a client with the same timeout) keeps the lock for "+
		"%d leases, renewed by its watchdog, then releases it; each waiter then takes the lock once and releases it, "+
		"giving up %v after the release. Calls are those the waiters' processes sent (client side; connection set-up "+
		"and keep-alive PINGs left out) in the %d leases that follow a %v settle; the drain is the release to the "+
		"last waiter's acquisition.\n\n", m.manyName(), m.lease, manyLeases, manyDrain, manyLeases, manySettle)
	t := newTable("waiters", "calls per process per lease", "most sent, per process per lease", "acquired", "errors", "drain", "holder kept its hold")
	kept := "yes"
	if m.holderLost {
		kept = "**no**"
	}
	t.row(m.manyName(), num(m.callsPerProcLease(), 1), topPerAcq(m.parked, int64(m.procs)*manyLeases),
		fmt.Sprintf("%d of %d", m.acquired, m.procs*m.waiters), fmt.Sprint(m.errors), ms(m.drain), kept)
	b.WriteString(t.b.String() + "\n")
}

// scaleLabel names a scale point by its processes and waiters in each.
func scaleLabel(p scalePoint) string { return fmt.Sprintf("%d × %s", p.procs, thousands(p.waiters)) }

func (r *report) writeScale(b *strings.Builder) {
	s := r.scale
	if len(s.holds) == 0 {
		return
	}
	fmt.Fprintf(b, "## Scale: relock's plain mutex\n\nContended runs of %v with an empty critical section, as in S2: "+
		"every waiter locks and unlocks one key in a loop. First in one process as the waiters grow, then with %d "+
		"waiters in all spread over more processes (one client each). Sent/acq is client side, run/acq the server's "+
		"INFO commandstats (scripts' commands included), both per acquisition. Server memory is the highest "+
		"INFO memory used_memory sampled every 20 ms during the run less its value before the clients connected: "+
		"what the acquisitions leave behind for longer than the window and what the "+
		"waiters cost while they wait (connections, subscriptions). It is divided by the acquisitions and by "+
		"the waiters.\n\n", r.cfg.scaleDur, scaleTotal)
	t := newTable("processes × waiters", "acquisitions/s", "sent/acq", "run/acq", "most sent, per acq",
		"server memory (peak)", "per acquisition", "per waiter")
	for _, ps := range [][]scalePoint{s.waiters, s.procs} {
		for _, p := range ps {
			t.row(scaleLabel(p), num(float64(p.round.acq)/p.round.elapsed.Seconds(), 0), num(p.sentPerAcq(), 1),
				num(p.runPerAcq(), 1), topPerAcq(p.round.sent, p.round.acq), fmt.Sprintf("%.0f KiB", float64(p.memPeak)/1024),
				num(p.memPerAcq(), 0)+" B", num(p.memPerWaiter(), 0)+" B")
		}
	}
	b.WriteString(t.b.String() + "\n")
	fmt.Fprintf(b, "Renewal: one client holds the locks with a 3 s watchdog timeout (a tick every 1 s) and nothing "+
		"else runs in the process; per tick over %d ticks. Server memory per hold is used_memory after the holds "+
		"were taken less before, ÷ holds.\n\n", r.cfg.s5Ticks)
	t = newTable("holds", "script calls/tick", "round trips/tick", "server CPU/tick", "client CPU/tick", "server memory per hold", "holds lost")
	for _, h := range s.holds {
		t.row(thousands(h.holds), num(h.calls, 1), num(h.batches, 1), num(h.serverUs, 0)+" µs", num(h.clientUs, 0)+" µs",
			num(h.memPerHold, 0)+" B", fmt.Sprint(h.holdsLostDuringRun))
	}
	b.WriteString(t.b.String() + "\n")
}
