//go:build !unix

package redistest

import (
	"errors"
	"os"
)

// errNoJobControl is returned where processes cannot be stopped and
// continued by signals, so Pause and Resume fail the test instead of
// silently doing nothing.
var errNoJobControl = errors.New("pausing a process is not supported on this platform")

func suspend(*os.Process) error { return errNoJobControl }

func resume(*os.Process) error { return errNoJobControl }
