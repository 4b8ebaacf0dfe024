package relock_test

import (
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// An option meant for another kind of lock must not be silently ignored: it does not
// compile. Each program in testdata/optionkinds gives one kind's option to another kind,
// at the constructor or at one call; "shared" gives every kind rlock's options and its
// own, which must compile, so that a failure below is the option's and not the setup's.
func TestOptionOfAnotherKindDoesNotCompile(t *testing.T) {
	gobin := filepath.Join(runtime.GOROOT(), "bin", "go")
	build := func(dir string) (string, error) {
		out, err := exec.Command(gobin, "build", "-o", filepath.Join(t.TempDir(), "prog"), "./testdata/optionkinds/"+dir).CombinedOutput()
		return string(out), err
	}
	if out, err := build("shared"); err != nil {
		t.Fatalf("every kind with rlock's options and its own does not compile: %v\n%s", err, out)
	}
	cases := []struct{ dir, option string }{
		{"rw_on_plain", "rwlock.WithWriterPreference()"},     // c.Lock("x", rwlock.WithWriterPreference())
		{"rw_on_fair", "rwlock.WithWriterPreference()"},      // c.FairLock("x", ...)
		{"fair_on_rw", "fairlock.WithRefreshPeriod"},         // c.RWLock("x", ...)
		{"fair_on_plain_call", "fairlock.WithRefreshPeriod"}, // mu.Lock(ctx, ...)
		{"rw_on_fair_call", "rwlock.WithRefreshPeriod"},      // fm.TryLock(ctx, ...)
	}
	for _, c := range cases {
		out, err := build(c.dir)
		if err == nil {
			t.Errorf("%s: %s given to another kind compiles", c.dir, c.option)
			continue
		}
		if !strings.Contains(out, "cannot use "+c.option) {
			t.Errorf("%s: the build failed, but not over %s:\n%s", c.dir, c.option, out)
		}
	}
}
