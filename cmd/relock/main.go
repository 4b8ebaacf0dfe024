// Command relock shows and operates relock's distributed locks.
//
//	relock demo [--redis host:port]        the demo, on an embedded Redis or a real one
//	relock inspect [flags] NAME             a lock's kind, holders, mode, waiters and leases
//	relock watch [flags] NAME               the same, refreshed until interrupted
//	                                        (--interval between views, --count views)
//	relock unlock --force [-y] [flags] NAME release a lock whoever holds it; wakes waiters
//
// Connection flags: --redis (comma-separated seeds), --cluster, --sentinel-master,
// --tls, --user; the password from REDIS_PASSWORD; or everything from REDIS_URL.
// Usage errors exit with status 2, failures (such as no connection) with status 1.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
)

const usage = `usage: relock <command> [flags]

commands:
  demo      workers contend for locks on an embedded Redis (no setup), or --redis host:port
  inspect   show a lock: kind, holders and hold counts, mode and readers, fair queue,
            waiting writers and clients, leases
  watch     inspect, refreshed every --interval (1s) until interrupted, or for --count views
  unlock    --force: release a lock whoever holds it, and wake its waiters

connection (inspect, watch, unlock): --redis host:port, --cluster, --sentinel-master NAME,
  --tls, --user; REDIS_PASSWORD; or REDIS_URL

Run "relock <command> -h" for a command's flags.
`

// errUsage marks an error in the command line: exit status 2.
var errUsage = errors.New("usage")

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	err := run(ctx, os.Args[1:], osEnv, os.Stdin, os.Stdout, os.Stderr)
	stop()
	switch {
	case err == nil:
	case errors.Is(err, errUsage):
		os.Exit(2)
	default:
		fmt.Fprintln(os.Stderr, "relock:", err)
		os.Exit(1)
	}
}

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

// parse parses a command's flags; a bad flag is a usage error.
func parse(fs *flag.FlagSet, args []string, stderr io.Writer) error {
	fs.SetOutput(stderr)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return errUsage
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "relock %s: unexpected argument %q\n", fs.Name(), fs.Arg(0))
		fs.Usage()
		return errUsage
	}
	return nil
}
