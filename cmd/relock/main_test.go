package main

import (
	"bytes"
	"context"
	"errors"
	"os/exec"
	"regexp"
	"strings"
	"testing"
)

// The demo runs on its embedded Redis with nothing else on the machine: here with an
// empty PATH, so no redis-server could be found even if one were installed.
func TestDemoNeedsNoServer(t *testing.T) {
	bin := relockBinary(t)
	cmd := exec.Command(bin, "demo", "--workers", "6", "--rounds", "10")
	cmd.Env = []string{"PATH=" + t.TempDir()}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("relock demo: %v\nstdout:\n%s\nstderr:\n%s", err, stdout.String(), stderr.String())
	}
	out := stdout.String()
	if !strings.Contains(out, "counter         60 of 60 (exact") {
		t.Errorf("the tally does not show an exact counter:\n%s", out)
	}
	if !regexp.MustCompile(`waits +\d+ ended by an unlock message`).MatchString(out) {
		t.Errorf("the tally does not count waits ended by messages:\n%s", out)
	}
	if !regexp.MustCompile(`commands +[1-9]\d* sent`).MatchString(out) {
		t.Errorf("the tally does not count commands:\n%s", out)
	}
	if !regexp.MustCompile(`renewals +[1-9]\d* in`).MatchString(out) {
		t.Errorf("the watchdog scene shows no renewals:\n%s", out)
	}
	if !strings.Contains(out, "cause: lease lost") || !strings.Contains(out, "rejected: token") {
		t.Errorf("the lease-loss scene does not show the loss and the rejected stale write:\n%s", out)
	}
	if !strings.Contains(out, "readers         6 inside at once") || !strings.Contains(out, "then was alone: true") {
		t.Errorf("the read-write scene does not show shared readers and a lone writer:\n%s", out)
	}
	if !strings.Contains(out, "grant order     [0 1 2 3 4 5]") {
		t.Errorf("the fair-lock scene does not show the grants in arrival order:\n%s", out)
	}
}

func TestUsageErrors(t *testing.T) {
	for _, args := range [][]string{
		nil,
		{"nonsense"},
		{"demo", "--no-such-flag"},
		{"demo", "--workers", "0"},
		{"demo", "extra-argument"},
		{"inspect"},
		{"inspect", "a", "b"},
		{"watch", "--interval", "1ns", "x"},
		{"watch", "--count", "-1", "x"},
		{"unlock", "x"},
		{"unlock", "--force"},
		{"inspect", "--no-such-flag", "x"},
		{"inspect", "--", "-x", "--json"}, // after "--" every argument is a name: two names
	} {
		var stdout, stderr bytes.Buffer
		err := run(context.Background(), args, func(string) string { return "" }, strings.NewReader(""), &stdout, &stderr)
		if !errors.Is(err, errUsage) {
			t.Errorf("relock %q: %v; want a usage error", args, err)
		}
		if stderr.Len() == 0 {
			t.Errorf("relock %q printed no usage", args)
		}
	}
}

func TestUsageExitStatus(t *testing.T) {
	bin := relockBinary(t)
	err := exec.Command(bin, "demo", "--no-such-flag").Run()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 2 {
		t.Errorf("exit: %v; want status 2", err)
	}
	if err := exec.Command(bin, "demo", "--redis", "127.0.0.1:1").Run(); !errors.As(err, &exit) || exit.ExitCode() != 1 {
		t.Errorf("unreachable server: %v; want status 1", err)
	}
}
