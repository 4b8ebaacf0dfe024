package relock_test

import (
	"strings"
	"testing"

	"github.com/relock-go/relock/internal/readmetest"
)

// Every Go block of the README runs as a program against a real redis-server, twice, and
// must leave Redis empty, even of the holds its client would release at Close (see
// readmetest.Run); but for the otel module's, which its own test runs
// (otel/readme_test.go).
func TestReadmeGoBlocks(t *testing.T) {
	t.Parallel()
	readmetest.Run(t, readmetest.Blocks{
		README: "README.md",
		Keep:   func(code string) bool { return !strings.Contains(code, "relockotel.") },
		Imports: map[string]string{
			"context.": `"context"`, "errors.": `"errors"`, "fmt.": `"fmt"`, "time.": `"time"`,
			"rueidis.": `"github.com/redis/rueidis"`, "relock.": `"github.com/relock-go/relock"`,
			"rlock.": `"github.com/relock-go/relock/rlock"`, "rwlock.": `"github.com/relock-go/relock/rwlock"`,
			"fairlock.": `"github.com/relock-go/relock/fairlock"`,
		},
	})
}
