package relockotel_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// The README's Go blocks that use this module run here, as relock's own README test runs
// the others: as a program against a real redis-server, twice, leaving Redis empty. Only
// their placeholders change: the server's address for "127.0.0.1:6379", log.Fatal(err)
// for "{ ... }".
func TestReadmeGoBlocks(t *testing.T) {
	readme, err := os.ReadFile(filepath.Join("..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	var blocks []string
	for _, b := range regexp.MustCompile("(?s)```go\n(.*?)```").FindAllSubmatch(readme, -1) {
		if strings.Contains(string(b[1]), "relockotel.") {
			blocks = append(blocks, string(b[1]))
		}
	}
	if len(blocks) == 0 {
		t.Fatal("no Go block of the README uses relockotel")
	}
	addr := startRedis(t)
	rc := newRedisClient(t, addr)
	if err := os.MkdirAll("testdata", 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.Remove("testdata") }) // only if empty
	for i, code := range blocks {
		code = strings.ReplaceAll(code, `"127.0.0.1:6379"`, `"`+addr+`"`)
		code = strings.ReplaceAll(code, "{ ... }", "{ log.Fatal(err) }")
		dir, err := os.MkdirTemp("testdata", "readme-")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { os.RemoveAll(dir) })
		file := filepath.Join(dir, "main.go")
		if err := os.WriteFile(file, []byte(program(code)), 0o644); err != nil {
			t.Fatal(err)
		}
		for run := 1; run <= 2; run++ {
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			out, err := exec.CommandContext(ctx, "go", "run", "./"+file).CombinedOutput()
			cancel()
			if err != nil {
				t.Fatalf("block %d, run %d: %v\n%s\nprogram:\n%s", i+1, run, err, out, program(code))
			}
			if n, err := rc.Do(context.Background(), rc.B().Dbsize().Build()).AsInt64(); err != nil || n != 0 {
				t.Fatalf("block %d, run %d left %d keys in Redis (%v)", i+1, run, n, err)
			}
		}
	}
}

// program wraps a README block into a main package, importing what it names.
func program(code string) string {
	imports := []string{`"log"`}
	for name, path := range map[string]string{
		"context.": `"context"`, "rueidis.": `"github.com/redis/rueidis"`, "relock.": `"github.com/relock-go/relock"`,
		"relockotel.": `relockotel "github.com/relock-go/relock/otel"`,
	} {
		if strings.Contains(code, name) {
			imports = append(imports, path)
		}
	}
	return "package main\n\nimport (\n\t" + strings.Join(imports, "\n\t") + "\n)\n\nfunc main() {\n" + code + "}\n"
}
