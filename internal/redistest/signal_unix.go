//go:build unix

package redistest

import (
	"os"
	"syscall"
)

func suspend(p *os.Process) error {
	if err := p.Signal(syscall.SIGSTOP); err != nil {
		return err
	}
	return waitStopped(p.Pid)
}

func resume(p *os.Process) error {
	return p.Signal(syscall.SIGCONT)
}
