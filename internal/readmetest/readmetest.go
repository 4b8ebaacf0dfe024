// Package readmetest runs the Go blocks of a README as programs against a real
// redis-server: the one runner behind the README tests of relock and of its otel module,
// each of which runs the blocks it owns.
package readmetest

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/relock-go/relock/internal/redistest"
)

// Blocks is what Run runs.
type Blocks struct {
	// README is the Markdown file, relative to the calling package's directory.
	README string
	// Keep reports whether a ```go block of README is the caller's to run; it must keep
	// at least one.
	Keep func(code string) bool
	// Imports maps a qualifier a block may use ("relock.") to its import line
	// (`"github.com/relock-go/relock"`); "log" is always imported.
	Imports map[string]string
}

// buildTimeout bounds the build of one block, dependencies included: a cold cache compiles
// them all.
const buildTimeout = 3 * time.Minute

// runTimeout bounds each run of a program, well under a 30s lease: a second run that
// waits out a hold the first one left fails here.
const runTimeout = 20 * time.Second

// Run runs every Go block of bs.README that bs.Keep keeps, as a program against a real
// redis-server of its own, twice, and fails t if a run fails or leaves a key in Redis: a
// reader who copies the block must not find their next run waiting out a lease the first
// one left behind. The blocks are taken as written; only their placeholders change: the
// server's address for "127.0.0.1:6379", log.Fatal(err) for "{ ... }". And the client a
// block makes with relock.New(rc...) leaves holds at Close
// (relock.WithReleaseOnClose(false)), so that a hold the program itself forgets to release
// is seen.
//
// Each program is a main package in a directory of its own under the calling package's
// testdata, so that it builds in the caller's module with that module's dependencies;
// the directories are removed at t's cleanup.
func Run(t *testing.T, bs Blocks) {
	t.Helper()
	readme, err := os.ReadFile(bs.README)
	if err != nil {
		t.Fatal(err)
	}
	var blocks []string
	for _, b := range regexp.MustCompile("(?s)```go\n(.*?)```").FindAllSubmatch(readme, -1) {
		if bs.Keep(string(b[1])) {
			blocks = append(blocks, string(b[1]))
		}
	}
	if len(blocks) == 0 {
		t.Fatalf("no Go block of %s to run", bs.README)
	}
	srv := redistest.StartServer(t)
	rc := srv.Client(t)
	if err := os.MkdirAll("testdata", 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.Remove("testdata") }) // only if empty: nothing else is lost
	placeholders := strings.NewReplacer(`"127.0.0.1:6379"`, `"`+srv.Addr()+`"`, "{ ... }", "{ log.Fatal(err) }",
		"relock.New(rc", "relock.New(rc, relock.WithReleaseOnClose(false)")
	for i, code := range blocks {
		prog := program(placeholders.Replace(code), bs.Imports)
		dir, err := os.MkdirTemp("testdata", "readme-")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { os.RemoveAll(dir) })
		if err := os.WriteFile(filepath.Join(dir, "main.go"), []byte(prog), 0o644); err != nil {
			t.Fatal(err)
		}
		bin, err := filepath.Abs(filepath.Join(dir, "readme"))
		if err != nil {
			t.Fatal(err)
		}
		if out, err := command(buildTimeout, "go", "build", "-o", bin, "./"+dir); err != nil {
			t.Fatalf("block %d: go build: %v\n%s\nprogram:\n%s", i+1, err, out, prog)
		}
		redistest.MustDo(t, rc, "FLUSHALL")
		for run := 1; run <= 2; run++ {
			if out, err := command(runTimeout, bin); err != nil {
				t.Fatalf("block %d, run %d: %v\n%s\nprogram:\n%s", i+1, run, err, out, prog)
			}
			if n, err := redistest.Do(t, rc, "DBSIZE").AsInt64(); err != nil || n != 0 {
				keys, _ := redistest.Do(t, rc, "KEYS", "*").AsStrSlice()
				t.Fatalf("block %d, run %d left %d keys in Redis (%v): %v", i+1, run, n, err, keys)
			}
		}
	}
}

// command runs name with args, for at most d, and returns its combined output.
func command(d time.Duration, name string, args ...string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.WaitDelay = time.Second
	return cmd.CombinedOutput()
}

// program wraps a block into a main package, importing what it names.
func program(code string, imports map[string]string) string {
	var lines []string
	for qualifier, line := range imports {
		if strings.Contains(code, qualifier) {
			lines = append(lines, line)
		}
	}
	slices.Sort(lines)
	lines = append([]string{`"log"`}, lines...)
	return "package main\n\nimport (\n\t" + strings.Join(lines, "\n\t") + "\n)\n\nfunc main() {\n" + code + "}\n"
}
