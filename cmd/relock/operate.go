package main

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/redis/rueidis"
	"golang.org/x/term"

	"github.com/relock-go/relock/internal/redisurl"

	"github.com/relock-go/relock"
)

// connFlags are the connection flags of the operator commands.
type connFlags struct {
	addrs    string
	cluster  bool
	sentinel string
	tls      bool
	user     string
	names    map[string]bool // the connection flags' names
}

func (c *connFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&c.addrs, "redis", "127.0.0.1:6379", "`host:port` of Redis (comma-separated seeds with --cluster or --sentinel-master)")
	fs.BoolVar(&c.cluster, "cluster", false, "the addresses are Redis Cluster nodes")
	fs.StringVar(&c.sentinel, "sentinel-master", "", "the addresses are sentinels watching this `master` set")
	fs.BoolVar(&c.tls, "tls", false, "connect with TLS")
	fs.StringVar(&c.user, "user", "", "ACL user (the password comes from REDIS_PASSWORD)")
	// The connection flags are the first a command's flag set gets (newOperator).
	c.names = map[string]bool{}
	fs.VisitAll(func(f *flag.Flag) { c.names[f.Name] = true })
}

// connect makes the rueidis client: from REDIS_URL when set, else from the flags. It
// returns when ctx ends (Ctrl-C) with ctx's cause, rather than when the dial gives up.
func (c *connFlags) connect(ctx context.Context, getenv func(string) string) (rueidis.Client, error) {
	var opt rueidis.ClientOption
	if u := getenv("REDIS_URL"); u != "" {
		var err error
		if opt, err = redisurl.Parse(u); err != nil { // never prints the URL's secrets
			return nil, fmt.Errorf("REDIS_URL: %w", err)
		}
	} else {
		opt.InitAddress = strings.Split(c.addrs, ",")
		opt.Username = c.user
		opt.Password = getenv("REDIS_PASSWORD")
		if c.tls {
			opt.TLSConfig = &tls.Config{MinVersion: tls.VersionTLS12}
		}
		if c.sentinel != "" {
			opt.Sentinel = rueidis.SentinelOption{MasterSet: c.sentinel}
		}
		if !c.cluster && c.sentinel == "" {
			opt.ForceSingleClient = true
		}
	}
	opt.DisableCache = true
	opt.Dialer.Timeout = 5 * time.Second
	// Every call goes through rueidis's pipeline, where a call waits on its context as well
	// as on the reply: Ctrl-C ends a look at a server that stopped answering at once. A call
	// sent on its own waits on the connection's deadline alone (lookTimeout).
	opt.AlwaysPipelining = true
	type made struct {
		rc  rueidis.Client
		err error
	}
	// rueidis.NewClient takes no context: it is left to finish, and its client closed.
	ch := make(chan made, 1)
	go func() {
		rc, err := rueidis.NewClient(opt)
		ch <- made{rc, err}
	}()
	select {
	case <-ctx.Done():
		go func() {
			if m := <-ch; m.rc != nil {
				m.rc.Close()
			}
		}()
		return nil, context.Cause(ctx)
	case m := <-ch:
		if m.err != nil {
			return nil, fmt.Errorf("connecting to %s: %w%s", strings.Join(opt.InitAddress, ","), m.err, tlsHint(opt, m.err))
		}
		return m.rc, nil
	}
}

// tlsHint explains a connection whose TLS handshake got no answer in time: a server that
// does not speak TLS reads the client's hello as the start of a command, and waits for
// the rest of it.
func tlsHint(opt rueidis.ClientOption, err error) string {
	if opt.TLSConfig == nil || !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, os.ErrDeadlineExceeded) {
		return ""
	}
	return " (no answer to the TLS handshake: does the server speak TLS?)"
}

// clearScreen clears the terminal and moves the cursor home, so that each of watch's views
// replaces the last instead of scrolling. It is written only to a terminal: into a file or
// a pipe the views follow one another, a blank line apart.
const clearScreen = "\033[H\033[2J"

// isTerminal reports whether f (an io.Reader or io.Writer) is a terminal.
func isTerminal(f any) bool {
	file, ok := f.(*os.File)
	return ok && term.IsTerminal(int(file.Fd()))
}

// lockArgs parses an operator command: its flags, before or after the name, and exactly
// one lock name.
func lockArgs(fs *flag.FlagSet, args []string, stdout, stderr io.Writer) (string, error) {
	pos, err := parse(fs, args, stdout, stderr)
	if err != nil {
		return "", err
	}
	if len(pos) != 1 {
		fmt.Fprintf(stderr, "relock %s: want exactly one lock name, got %d arguments\n", fs.Name(), len(pos))
		fs.Usage()
		return "", errUsage
	}
	return pos[0], nil
}

// operator is what the operator commands share: a flag set with the connection flags, to
// which each command adds its own.
type operator struct {
	fs    *flag.FlagSet
	conn  connFlags
	rules []usageRule
}

// usageRule is a check of a command's own flags: ok reports whether they are usable, and
// problem says what is wrong otherwise.
type usageRule struct {
	ok      func() bool
	problem string
}

func newOperator(cmd string) *operator {
	o := &operator{fs: flag.NewFlagSet(cmd, flag.ContinueOnError)}
	o.conn.register(o.fs)
	o.fs.Usage = func() {
		fmt.Fprintf(o.fs.Output(), "Usage: relock %s [flags] NAME\n\n"+
			"NAME is the lock's name, its Redis key. REDIS_URL, when set, names the server in\n"+
			"place of the connection flags (--redis, --cluster, --sentinel-master, --tls, --user),\n"+
			"which must then be left out; REDIS_PASSWORD is the password for the flags.\n\nFlags:\n", cmd)
		o.fs.PrintDefaults()
	}
	o.require(func() bool { return !o.conn.cluster || o.conn.sentinel == "" },
		"--cluster and --sentinel-master name two kinds of deployment: give one")
	return o
}

// require adds a usage check of the command's own flags, made once they are parsed: when
// ok returns false, the command prints problem and ends with a usage error.
func (o *operator) require(ok func() bool, problem string) {
	o.rules = append(o.rules, usageRule{ok, problem})
}

// start parses args into the flags and one lock name, checks the flags, and connects.
// The caller closes rc.
func (o *operator) start(ctx context.Context, args []string, env func(string) string, stdout, stderr io.Writer) (name string, rc rueidis.Client, err error) {
	if name, err = lockArgs(o.fs, args, stdout, stderr); err != nil {
		return "", nil, err
	}
	for _, r := range o.rules {
		if !r.ok() {
			fmt.Fprintf(stderr, "relock %s: %s\n", o.fs.Name(), r.problem)
			return "", nil, errUsage
		}
	}
	// REDIS_URL says everything about the connection; a flag beside it would be silently
	// outvoted, and a force unlock would act on a server the operator did not name.
	if env("REDIS_URL") != "" {
		var given []string
		o.fs.Visit(func(f *flag.Flag) {
			if o.conn.names[f.Name] {
				given = append(given, "--"+f.Name)
			}
		})
		if len(given) > 0 {
			fmt.Fprintf(stderr, "relock %s: REDIS_URL is set, and so is %s: give the server one way (unset REDIS_URL, or leave out the flags)\n",
				o.fs.Name(), strings.Join(given, ", "))
			return "", nil, errUsage
		}
	}
	if rc, err = o.conn.connect(ctx, env); err != nil {
		return "", nil, err
	}
	return name, rc, nil
}

// inspect is start followed by a first look at the lock. The caller closes rc.
func (o *operator) inspect(ctx context.Context, args []string, env func(string) string, stdout, stderr io.Writer) (*Report, rueidis.Client, error) {
	name, rc, err := o.start(ctx, args, env, stdout, stderr)
	if err != nil {
		return nil, nil, err
	}
	r, err := look(ctx, rc, name)
	if err != nil {
		hangUp(ctx, rc)
		return nil, nil, err
	}
	return r, rc, nil
}

// hangUp closes a command's client. rueidis's Close waits up to a second on each connection
// to a server that stopped answering; after an interrupt the command returns at once and
// leaves the close to finish behind it, as the process is about to exit.
func hangUp(ctx context.Context, rc rueidis.Client) {
	if ctx.Err() != nil {
		go rc.Close()
		return
	}
	rc.Close()
}

// lookTimeout bounds each look at a lock (the reads of one view) and a force unlock's
// call: rueidis sends a read again until its context ends, so a look at a server that went
// away would otherwise wait for ever.
const lookTimeout = 5 * time.Second

// look reads the lock once, within lookTimeout. It returns as soon as ctx ends, also from
// a wait the client does not cut short: a connection made again during the look waits for
// its handshake's answer on the connection's deadline alone. The abandoned reads only
// read, and end by their bound.
func look(ctx context.Context, rc rueidis.Client, name string) (*Report, error) {
	lctx, cancel := context.WithTimeout(ctx, lookTimeout)
	type seen struct {
		r   *Report
		err error
	}
	ch := make(chan seen, 1)
	go func() {
		defer cancel()
		r, err := inspectLock(lctx, rc, name)
		ch <- seen{r, err}
	}()
	select {
	case s := <-ch:
		return s.r, s.err
	case <-ctx.Done():
		return nil, context.Cause(ctx)
	}
}

func inspectCmd(ctx context.Context, args []string, env func(string) string, stdout, stderr io.Writer) error {
	op := newOperator("inspect")
	asJSON := op.fs.Bool("json", false, "print one JSON object")
	r, rc, err := op.inspect(ctx, args, env, stdout, stderr)
	if err != nil {
		return err
	}
	defer hangUp(ctx, rc)
	return r.print(stdout, *asJSON)
}

func watchCmd(ctx context.Context, args []string, env func(string) string, stdout, stderr io.Writer) error {
	op := newOperator("watch")
	every := op.fs.Duration("interval", time.Second, "time between refreshes")
	count := op.fs.Int("count", 0, "stop after this many views (0: until interrupted)")
	op.require(func() bool { return *every >= 10*time.Millisecond && *count >= 0 },
		"--interval must be at least 10ms and --count at least 0")
	name, rc, err := op.start(ctx, args, env, stdout, stderr)
	if err != nil {
		if ctx.Err() != nil && errors.Is(err, context.Cause(ctx)) {
			return nil // interrupted while connecting: as quiet as while reading
		}
		return err
	}
	defer hangUp(ctx, rc)
	t := time.NewTicker(*every)
	defer t.Stop()
	tty := isTerminal(stdout)
	for n := 1; ; n++ {
		r, err := look(ctx, rc, name)
		switch {
		case err == nil:
		case ctx.Err() != nil:
			// Interrupted while reading: the way watch is meant to end, not a failure.
			return nil
		case n == 1:
			return err // nothing to watch: a bad name, no server
		}
		switch {
		case tty:
			fmt.Fprint(stdout, clearScreen)
		case n > 1:
			fmt.Fprintln(stdout) // a blank line between views
		}
		if *count > 0 {
			fmt.Fprintf(stdout, "%s  (view %d of %d, every %v)\n\n", time.Now().Format(time.TimeOnly), n, *count, *every)
		} else {
			fmt.Fprintf(stdout, "%s  (every %v; interrupt to stop)\n\n", time.Now().Format(time.TimeOnly), *every)
		}
		if err != nil {
			// A server that went away, or paused: the view says so, and the watch goes
			// on, a view at a time, until it is back or interrupted.
			fmt.Fprintf(stdout, "%s: could not be read: %v\n", shown(name), err)
		} else if err := r.print(stdout, false); err != nil {
			return err
		}
		if *count > 0 && n >= *count {
			return nil
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

func unlockCmd(ctx context.Context, args []string, env func(string) string, stdin io.Reader, stdout, stderr io.Writer) error {
	op := newOperator("unlock")
	force := op.fs.Bool("force", false, "required: release the lock whoever holds it")
	yes := op.fs.Bool("y", false, "do not ask for confirmation")
	op.require(func() bool { return *force }, "an operator can only force a lock open: add --force")
	r, rc, err := op.inspect(ctx, args, env, stdout, stderr)
	if err != nil {
		return err
	}
	defer hangUp(ctx, rc)
	name := r.Name
	if err := refusal(r); err != nil {
		return err
	}
	if !r.Locked {
		state := "is not held"
		if r.Kind == "none" {
			state += ": there is no such key" // a mistyped name, perhaps
		}
		fmt.Fprintf(stdout, "%s %s; nothing to do\n", shown(name), state)
		return nil
	}
	if !*yes {
		if stdin == nil {
			return fmt.Errorf("%s not unlocked: there is no terminal to ask for confirmation on; add -y to force it without asking", shown(name))
		}
		if err := r.print(stdout, false); err != nil {
			return err
		}
		fmt.Fprintf(stdout, "Force-unlock %s? Its holders lose it (a renewed hold learns so at its next renewal, a fixed lease when it ends). [y/N] ", shown(name))
		answer, err := ask(ctx, stdin)
		if err != nil {
			return err
		}
		if a := strings.ToLower(strings.TrimSpace(answer)); a != "y" && a != "yes" {
			return fmt.Errorf("%s not unlocked: the confirmation was declined", shown(name))
		}
		// The operator agreed to take the lock from the holders shown, and answering took
		// their time: others may hold it now.
		now, err := look(ctx, rc, name)
		if err != nil {
			return err
		}
		// The key may hold something else by now, which is refused as at the first look;
		// and a lock nobody holds any more is left alone, lest a holder that comes after
		// this look, whom the operator never saw, lose it.
		if err := refusal(now); err != nil {
			return err
		}
		if !now.Locked {
			fmt.Fprintf(stdout, "%s was released meanwhile; nothing to do\n", shown(name))
			return nil
		}
		if !shownHolders(r, now) {
			return fmt.Errorf("%s not unlocked: its holders changed while you answered (now %s); nothing was changed: run the command again", shown(name), holders(now))
		}
		r = now
	}
	c, err := relock.New(rc)
	if err != nil {
		return err
	}
	defer c.Close()
	var done bool
	fctx, cancel := context.WithTimeout(ctx, lookTimeout)
	defer cancel()
	switch r.Kind {
	case "rwlock":
		done, err = c.RWLock(name).ForceUnlock(fctx)
	case "fairlock":
		done, err = c.FairLock(name).ForceUnlock(fctx)
	default:
		done, err = c.Lock(name).ForceUnlock(fctx)
	}
	if err != nil {
		return err
	}
	if done {
		fmt.Fprintf(stdout, "%s force-unlocked; waiters woken\n", shown(name))
	} else {
		fmt.Fprintf(stdout, "%s was released meanwhile; nothing to do\n", shown(name))
	}
	return nil
}

// refusal is the error of a force unlock of the key r shows when it holds no lock: data
// that is not a lock's, or the count of a semaphore or a count-down latch, which nobody
// holds. It is nil for a lock, held or free.
func refusal(r *Report) error {
	switch r.Kind {
	case "foreign":
		return fmt.Errorf("%s is not a lock (the key holds %s); nothing was changed", shown(r.Name), r.foreign())
	case "semaphore", "latch", "count":
		return fmt.Errorf("%s is not a lock (it is a semaphore or a count-down latch, which nobody holds; see relock inspect); nothing was changed", shown(r.Name))
	}
	return nil
}

// ask reads the operator's answer, a line of stdin, unless ctx ends first (Ctrl-C or
// SIGTERM at the question): the read is left behind, as the process is about to exit.
func ask(ctx context.Context, stdin io.Reader) (string, error) {
	line := make(chan string, 1)
	go func() {
		answer, _ := bufio.NewReader(stdin).ReadString('\n')
		line <- answer
	}()
	select {
	case answer := <-line:
		return answer, nil
	case <-ctx.Done():
		return "", context.Cause(ctx)
	}
}

// shownHolders reports whether every owner that b shows holding the lock was among the
// holders a showed. A holder's count or side may differ (it re-entered, released a level,
// or downgraded), and a holder may have left: the operator agreed to take the lock from
// each of those shown, and from nobody else.
func shownHolders(a, b *Report) bool {
	shown := make(map[string]bool, len(a.Owners))
	for _, o := range a.Owners {
		shown[o.Owner] = true
	}
	for _, o := range b.Owners {
		if !shown[o.Owner] {
			return false
		}
	}
	return true
}

// holders lists r's owners for a message, a write hold marked so.
func holders(r *Report) string {
	var out []string
	for _, o := range r.Owners {
		s := shown(o.Owner)
		if o.Write {
			s += " (write)"
		}
		out = append(out, s)
	}
	return strings.Join(out, ", ")
}

// osEnv reads the process environment; tests pass their own.
func osEnv(k string) string { return os.Getenv(k) }
