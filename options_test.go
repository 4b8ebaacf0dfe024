package relock_test

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// program is a program that uses relock's options: body is the statements of main, with
// c a *relock.Client and ctx a context.
const program = `package main

import (
	"context"
	"time"

	"github.com/relock-go/relock"
	"github.com/relock-go/relock/fairlock"
	"github.com/relock-go/relock/rlock"
	"github.com/relock-go/relock/rwlock"
)

var (
	_ = time.Second
	_ = fairlock.WithRefreshPeriod
	_ = rlock.WithLease
	_ = rwlock.WithWriterPreference
)

func main() {
	var c *relock.Client
	ctx := context.Background()
	_ = ctx
	%s
}
`

// build compiles program with body as a package of this module (through an overlay, so
// that nothing is written to the tree) and returns the compiler's output.
func build(t *testing.T, body string) (string, error) {
	t.Helper()
	dir := t.TempDir()
	src := filepath.Join(dir, "main.go")
	if err := os.WriteFile(src, []byte(strings.Replace(program, "%s", body, 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	overlay, _ := json.Marshal(map[string]map[string]string{"Replace": {filepath.Join(wd, "optionkinds", "main.go"): src}})
	if err := os.WriteFile(filepath.Join(dir, "overlay.json"), overlay, 0o644); err != nil {
		t.Fatal(err)
	}
	gobin, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("the go command, which this test compiles with, is not on PATH: %v", err)
	}
	out, err := exec.Command(gobin, "build", "-overlay", filepath.Join(dir, "overlay.json"), "-o", filepath.Join(dir, "prog"), "./optionkinds").CombinedOutput()
	return string(out), err
}

// An option meant for another kind of lock must not be silently ignored: it does not
// compile. Each case gives one kind's option to another kind, at the constructor or at one
// call. The control gives every kind rlock's options and its own, which must compile, so
// that a failure below is the option's and not the setup's.
func TestOptionOfAnotherKindDoesNotCompile(t *testing.T) {
	t.Parallel()
	control := `_ = c.Lock("x", rlock.WithLease(time.Second), rlock.WithFencing(), rlock.WithWaitTimeout(time.Second))
	_ = c.FairLock("x", rlock.WithLease(time.Second), fairlock.WithRefreshPeriod(time.Second))
	_ = c.RWLock("x", rlock.WithFencing(), rwlock.WithWriterPreference(), rwlock.WithRefreshPeriod(time.Second))
	_, _ = c.FairLock("x").Lock(ctx, rlock.WithWaitTimeout(time.Second))
	_, _ = c.RWLock("x").RLock(ctx, rlock.WithLease(time.Second), rwlock.WithWriterPreference())`
	if out, err := build(t, control); err != nil {
		t.Fatalf("every kind with rlock's options and its own does not compile: %v\n%s", err, out)
	}
	cases := []struct{ option, body string }{
		{"rwlock.WithWriterPreference()", `_ = c.Lock("x", rwlock.WithWriterPreference())`},
		{"rwlock.WithWriterPreference()", `_ = c.FairLock("x", rwlock.WithWriterPreference())`},
		{"fairlock.WithRefreshPeriod", `_ = c.RWLock("x", fairlock.WithRefreshPeriod(time.Second))`},
		{"fairlock.WithRefreshPeriod", `_, _ = c.Lock("x").Lock(ctx, fairlock.WithRefreshPeriod(time.Second))`},
		{"rwlock.WithRefreshPeriod", `_, _ = c.FairLock("x").TryLock(ctx, rwlock.WithRefreshPeriod(time.Second))`},
	}
	for _, c := range cases {
		out, err := build(t, c.body)
		if err == nil {
			t.Errorf("%s compiles", c.body)
			continue
		}
		if !strings.Contains(out, "cannot use "+c.option) {
			t.Errorf("%s: the build failed, but not over %s:\n%s", c.body, c.option, out)
		}
	}
}
