// Command relock shows and operates relock's distributed locks.
//
//	relock demo [--redis host:port]        the demo, on an embedded Redis or a real one
//	relock inspect [flags] NAME             a lock's kind, holders, mode, waiters and leases,
//	                                        and the connection of each holder's client
//	relock watch [flags] NAME               the same, refreshed until interrupted
//	                                        (--interval between views, --count views)
//	relock unlock --force [-y] [flags] NAME release a lock whoever holds it; wakes waiters
//	                                        (it asks first, and changes nothing if an
//	                                        owner it did not show holds the lock by then)
//
// Connection flags: --redis (comma-separated seeds), --cluster, --sentinel-master,
// --tls, --user; the password from REDIS_PASSWORD; or everything from REDIS_URL, with none
// of those flags.
// Flags may come before or after the lock name. -h or --help prints a command's flags and
// exits with status 0; usage errors exit with status 2, failures (such as no connection,
// or a force unlock that was declined or had no terminal to ask on) with status 1, and a
// command ended by an interrupt quietly with the shell's status for it: 130 for Ctrl-C, 143
// for SIGTERM.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
)

const usage = `usage: relock <command> [flags]

commands:
  demo      workers contend for locks on an embedded Redis (no setup), or --redis host:port
  inspect   show a lock: kind, holders and hold counts, mode and readers, fair queue,
            waiting writers and clients, leases, and the address and age of each
            holder's and queued waiter's connection (CLIENT LIST)
  watch     inspect, refreshed every --interval (1s) until interrupted, or for --count views
  unlock    --force: release a lock whoever holds it, and wake its waiters

connection (inspect, watch, unlock): --redis host:port, --cluster, --sentinel-master NAME,
  --tls, --user; REDIS_PASSWORD; or REDIS_URL

Run "relock <command> -h" for a command's flags.
`

// errUsage marks an error in the command line: exit status 2.
var errUsage = errors.New("usage")

// errHelp marks a command line that asked for help, which was printed: exit status 0.
var errHelp = errors.New("help")

func main() {
	// Ctrl-C, or a supervisor's SIGTERM, ends the command's context: it stops what it is
	// doing and returns, and its connections are closed on the way out.
	signals := make(chan os.Signal, 1)
	signal.Notify(signals, os.Interrupt, syscall.SIGTERM)
	ctx, interrupt := context.WithCancelCause(context.Background())
	go func() {
		if s, ok := <-signals; ok {
			interrupt(signalled{s})
		}
	}()
	// A force unlock asks on a terminal; with none, it needs -y.
	var stdin io.Reader
	if isTerminal(os.Stdin) {
		stdin = os.Stdin
	}
	err := run(ctx, os.Args[1:], osEnv, stdin, os.Stdout, os.Stderr)
	signal.Stop(signals)
	var sig signalled
	switch {
	case errors.As(context.Cause(ctx), &sig):
		// The shell's status for a command a signal ended (130 for Ctrl-C, 143 for SIGTERM),
		// and nothing more to say.
		os.Exit(128 + int(sig.Signal.(syscall.Signal)))
	case err == nil, errors.Is(err, errHelp):
	case errors.Is(err, errUsage):
		os.Exit(2)
	default:
		// The library's errors already begin with the program's name.
		fmt.Fprintln(os.Stderr, "relock:", strings.TrimPrefix(err.Error(), "relock: "))
		os.Exit(1)
	}
}

// signalled is the cause of a command's end by a signal.
type signalled struct{ os.Signal }

func (s signalled) Error() string { return "interrupted by " + s.String() }

// run runs one command line. stdin is the terminal a force unlock asks on, nil when there
// is none.
func run(ctx context.Context, args []string, env func(string) string, stdin io.Reader, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return errUsage
	}
	switch args[0] {
	case "demo":
		return demo(ctx, args[1:], stdout, stderr)
	case "inspect":
		return inspectCmd(ctx, args[1:], env, stdout, stderr)
	case "watch":
		return watchCmd(ctx, args[1:], env, stdout, stderr)
	case "unlock":
		return unlockCmd(ctx, args[1:], env, stdin, stdout, stderr)
	case "help", "-h", "--help":
		fmt.Fprint(stdout, usage)
		return nil
	default:
		fmt.Fprintf(stderr, "relock: unknown command %q\n\n%s", args[0], usage)
		return errUsage
	}
}

// parse parses a command's flags, which may come before, between or after its positional
// arguments ("--" ends the flags), and returns the positional ones. A bad flag is a usage
// error (the flags go to stderr); -h or --help prints the flags to stdout and returns
// errHelp.
func parse(fs *flag.FlagSet, args []string, stdout, stderr io.Writer) ([]string, error) {
	fs.SetOutput(stderr)
	for _, a := range args {
		if a == "--" {
			break
		}
		if a == "-h" || a == "-help" || a == "--help" || a == "--h" {
			fs.SetOutput(stdout)
			fs.Usage()
			return nil, errHelp
		}
	}
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, errUsage
		}
		rest := fs.Args()
		if used := len(args) - len(rest); used > 0 && args[used-1] == "--" {
			return append(pos, rest...), nil
		}
		if len(rest) == 0 {
			return pos, nil
		}
		pos, args = append(pos, rest[0]), rest[1:]
	}
}
