package relock_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/relock-go/relock/internal/redistest"
)

// Every Go block of the README runs as a program against a real redis-server, twice, and
// must leave Redis empty: a reader who copies it must not find their next run waiting out
// a lease the first one left behind. The blocks are taken as written; only their
// placeholders change: the server's address for "127.0.0.1:6379", log.Fatal(err) for
// "{ ... }". The client is made to leave holds at Close (relock.WithReleaseOnClose(false)),
// so that a hold the program itself forgets to release is seen.
func TestReadmeGoBlocks(t *testing.T) {
	srv := redistest.StartServer(t)
	rc := srv.Client(t)
	readme, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	blocks := regexp.MustCompile("(?s)```go\n(.*?)```").FindAllSubmatch(readme, -1)
	if len(blocks) == 0 {
		t.Fatal("no Go block in README.md")
	}
	if err := os.MkdirAll("testdata", 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.Remove("testdata") }) // only if empty: nothing else is lost
	for i, b := range blocks {
		code := string(b[1])
		if strings.Contains(code, "relockotel.") {
			continue // the otel module's block: its own test runs it (otel/readme_test.go)
		}
		code = strings.ReplaceAll(code, `"127.0.0.1:6379"`, `"`+srv.Addr()+`"`)
		code = strings.ReplaceAll(code, "{ ... }", "{ log.Fatal(err) }")
		code = strings.ReplaceAll(code, "relock.New(rc)", "relock.New(rc, relock.WithReleaseOnClose(false))")
		// The module's own packages, found in the current directory's module: the program
		// lives in testdata, inside it.
		dir, err := os.MkdirTemp("testdata", "readme-")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { os.RemoveAll(dir) })
		file := filepath.Join(dir, "main.go")
		if err := os.WriteFile(file, []byte(readmeProgram(code)), 0o644); err != nil {
			t.Fatal(err)
		}
		redistest.MustDo(t, rc, "FLUSHALL")
		for run := 1; run <= 2; run++ {
			// Bounded well under a 30s lease: a second run that waits out the first
			// run's hold fails here.
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			out, err := exec.CommandContext(ctx, "go", "run", "./"+file).CombinedOutput()
			cancel()
			if err != nil {
				t.Fatalf("block %d, run %d: %v\n%s\nprogram:\n%s", i+1, run, err, out, readmeProgram(code))
			}
			if n, err := rc.Do(context.Background(), rc.B().Dbsize().Build()).AsInt64(); err != nil || n != 0 {
				keys, _ := rc.Do(context.Background(), rc.B().Keys().Pattern("*").Build()).AsStrSlice()
				t.Fatalf("block %d, run %d left %d keys in Redis (%v): %v", i+1, run, n, err, keys)
			}
		}
	}
}

// readmeProgram wraps a README block into a main package, importing what it names.
func readmeProgram(code string) string {
	imports := []string{`"log"`}
	for name, path := range map[string]string{
		"context.": `"context"`, "errors.": `"errors"`, "fmt.": `"fmt"`, "time.": `"time"`,
		"rueidis.": `"github.com/redis/rueidis"`, "relock.": `"github.com/relock-go/relock"`,
		"rlock.": `"github.com/relock-go/relock/rlock"`, "rwlock.": `"github.com/relock-go/relock/rwlock"`,
		"fairlock.": `"github.com/relock-go/relock/fairlock"`,
	} {
		if strings.Contains(code, name) {
			imports = append(imports, path)
		}
	}
	return "package main\n\nimport (\n\t" + strings.Join(imports, "\n\t") + "\n)\n\nfunc main() {\n" + code + "}\n"
}
