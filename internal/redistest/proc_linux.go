//go:build linux

package redistest

import (
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// setProcAttr makes the kernel SIGKILL the server when the test binary dies,
// so a crashed or timed-out test run (go test's -timeout panics, a SIGKILL
// from CI) cannot leave redis-servers behind that hold ports.
//
// Pdeathsig fires when the OS thread that started the child exits, not only
// the process. The Go runtime retires a thread only when a goroutine exits
// while locked to it with runtime.LockOSThread, which neither this package nor
// the library does, so in practice it fires exactly when the test binary exits.
func setProcAttr(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}

// stoppedTimeout bounds waitStopped. Signal delivery takes microseconds; a
// second means something is badly wrong.
const stoppedTimeout = time.Second

// waitStopped waits until the process is in the stopped state. kill(2)
// returns before a SIGSTOP has taken effect on a process running on another
// CPU, so without this a command sent right after Pause could still be
// answered and make a timeout test flaky.
func waitStopped(pid int) error {
	path := "/proc/" + strconv.Itoa(pid) + "/stat"
	deadline := time.Now().Add(stoppedTimeout)
	for {
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		// The format is "pid (comm) state ...", and comm may itself contain
		// spaces or parentheses, so the state is found after the last ')'.
		s := string(b)
		if i := strings.LastIndexByte(s, ')'); i >= 0 && i+2 < len(s) {
			if state := s[i+2]; state == 'T' || state == 't' {
				return nil
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("process %d not stopped within %v of SIGSTOP", pid, stoppedTimeout)
		}
		time.Sleep(time.Millisecond)
	}
}
