package main

import (
	"context"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/relock-go/relock/internal/keys"
	"github.com/relock-go/relock/internal/redistest"
)

// stepRE matches a progress line of a scene: the time since the scene began, then the step.
var stepRE = regexp.MustCompile(`^  \+(\d+\.\d\d)s  \S`)

// sceneSteps splits the demo's output into its scenes and returns, for each scene's title,
// its progress lines. It fails t when a scene has a step after its first summary line, or
// steps whose times go back.
func sceneSteps(t *testing.T, out string) map[string][]string {
	t.Helper()
	scenes := map[string][]string{}
	for _, part := range strings.Split(out, "\n== ")[1:] {
		title, body, _ := strings.Cut(part, "\n")
		_, body, _ = strings.Cut(body, "\n\n") // after the scene's introduction
		summarised, last := false, -1.0
		for _, line := range strings.Split(body, "\n") {
			m := stepRE.FindStringSubmatch(line)
			switch {
			case m != nil:
				if summarised {
					t.Errorf("scene %q: a step after its summary: %q", title, line)
				}
				at, _ := strconv.ParseFloat(m[1], 64)
				if at < last {
					t.Errorf("scene %q: step times go back at %q", title, line)
				}
				last = at
				scenes[title] = append(scenes[title], line)
			case strings.HasPrefix(line, "  ...  (further steps not shown)"):
				scenes[title] = append(scenes[title], line)
			case line != "" && !strings.HasPrefix(line, " "):
				summarised = true
			}
		}
	}
	return scenes
}

// Every scene of the demo shows its progress, step by step, and not only the first; the
// steps stay within a bound whatever the flags.
func TestDemoShowsEverySceneProgress(t *testing.T) {
	stdout, stderr, status := runBinary(t, []string{"PATH=" + t.TempDir()}, "demo", "--workers", "40", "--rounds", "5")
	if status != 0 {
		t.Fatalf("relock demo: status %d\n%s%s", status, stdout, stderr)
	}
	scenes := sceneSteps(t, stdout)
	want := map[string]*regexp.Regexp{
		"mutual exclusion, re-entry, waiting without polling": regexp.MustCompile(`\d+ of 200 entries \(\d+%\); \d+ workers waiting`),
		"watchdog":               regexp.MustCompile(`held 1× the lease; .* left, \d+ renewals so far`),
		"lease loss and fencing": regexp.MustCompile(`the lock's key is deleted behind A's back`),
		"fair lock":              regexp.MustCompile(`worker 5 queued, 6 in the queue`),
		"read-write lock":        regexp.MustCompile(`the writer is in, alone`),
		"semaphore":              regexp.MustCompile(`the request for 3 permits was served`),
	}
	if len(scenes) != len(want) {
		t.Errorf("%d scenes show progress; want all %d:\n%s", len(scenes), len(want), stdout)
	}
	for title, step := range want {
		lines := scenes[title]
		if len(lines) < 3 || len(lines) > maxSteps+1 || !step.MatchString(strings.Join(lines, "\n")) {
			t.Errorf("scene %q shows %d progress lines, want 3 to %d with one matching %q:\n%s",
				title, len(lines), maxSteps+1, step, strings.Join(lines, "\n"))
		}
	}
	// 200 entries make four milestones, not one line each.
	if n := len(scenes["mutual exclusion, re-entry, waiting without polling"]); n != 4 {
		t.Errorf("the first scene shows %d progress lines for 200 entries; want 4, one a quarter", n)
	}
	// The fair lock's grants come in the order the workers queued.
	grants := regexp.MustCompile(`worker (\d) granted the lock`).FindAllStringSubmatch(strings.Join(scenes["fair lock"], "\n"), -1)
	if fmt.Sprint(grants) != "[[worker 0 granted the lock 0] [worker 1 granted the lock 1] [worker 2 granted the lock 2] [worker 3 granted the lock 3] [worker 4 granted the lock 4] [worker 5 granted the lock 5]]" {
		t.Errorf("the fair scene's grants: %q", grants)
	}
}

// gatedWriter is the demo's stdout in process: when a line with one of its markers is
// written, it checks Redis there and then. The scene that prints the step waits in Write
// meanwhile, so what the check sees is what was so when the step was told.
type gatedWriter struct {
	mu     sync.Mutex
	out    strings.Builder
	checks []gate
	failed []string
}

type gate struct {
	marker string
	check  func() error
	seen   bool
}

func (w *gatedWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.out.Write(p)
	for i := range w.checks {
		g := &w.checks[i]
		if !g.seen && strings.Contains(string(p), g.marker) {
			g.seen = true
			if err := g.check(); err != nil {
				w.failed = append(w.failed, fmt.Sprintf("at %q: %v", strings.TrimSpace(string(p)), err))
			}
		}
	}
	return len(p), nil
}

// The steps are told as they happen: when a step says the lock is held, or its key
// deleted, or six workers queued, Redis shows it so at that moment.
func TestDemoStepsAsTheyHappen(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		rc := b.Client(t)
		ctx := context.Background()
		exists := func(key string, want int64) func() error {
			return func() error {
				n, err := rc.Do(ctx, rc.B().Exists().Key(key).Build()).AsInt64()
				if err == nil && n != want {
					err = fmt.Errorf("EXISTS %s = %d, want %d", key, n, want)
				}
				return err
			}
		}
		mode := func(key, want string) func() error {
			return func() error {
				m, err := rc.Do(ctx, rc.B().Hget().Key(key).Field("mode").Build()).ToString()
				if err == nil && m != want {
					err = fmt.Errorf("%s in %s mode, want %s", key, m, want)
				}
				return err
			}
		}
		queue := keys.Of("relock-demo:jobs").Queue
		queued := func(want int64) func() error {
			return func() error {
				n, err := rc.Do(ctx, rc.B().Llen().Key(queue).Build()).AsInt64()
				if err == nil && n != want {
					err = fmt.Errorf("%d in the queue, want %d", n, want)
				}
				return err
			}
		}
		w := &gatedWriter{checks: []gate{
			{marker: "100 of 200 entries", check: exists("relock-demo:counter", 1)},
			{marker: "took the lock; its lease", check: exists("relock-demo:report", 1)},
			{marker: "deleted behind A's back", check: exists("relock-demo:ledger", 0)},
			{marker: "B takes the free lock", check: exists("relock-demo:ledger", 1)},
			// Once the lock is free the queue only shrinks: steps told after the unlock
			// cannot see one waiter first and six last.
			{marker: "worker 0 queued", check: queued(1)},
			{marker: "worker 5 queued", check: queued(6)},
			{marker: "worker 3 granted", check: exists("relock-demo:jobs", 1)},
			{marker: "readers inside at once", check: mode("relock-demo:config", "read")},
			{marker: "the writer is in, alone", check: mode("relock-demo:config", "write")},
		}}
		rctx, cancel := context.WithTimeout(ctx, time.Minute)
		defer cancel()
		var stderr strings.Builder
		err := run(rctx, []string{"demo", "--redis", b.Addr, "--workers", "8", "--rounds", "25"},
			func(string) string { return "" }, nil, w, &stderr)
		w.mu.Lock()
		defer w.mu.Unlock()
		if err != nil {
			t.Fatalf("relock demo: %v\n%s%s", err, w.out.String(), stderr.String())
		}
		for _, g := range w.checks {
			if !g.seen {
				t.Errorf("no step said %q", g.marker)
			}
		}
		for _, f := range w.failed {
			t.Errorf("a step told before or after it happened: %s", f)
		}
		if t.Failed() {
			t.Logf("the demo's output:\n%s", w.out.String())
		}
	})
}
