//go:build !linux

package redistest

import "os/exec"

// setProcAttr is a no-op where there is no parent-death signal: a test
// binary that crashes there can leave its redis-servers running.
func setProcAttr(*exec.Cmd) {}
