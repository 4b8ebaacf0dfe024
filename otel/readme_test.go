package relockotel_test

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/relock-go/relock/internal/readmetest"
)

// The README's Go blocks that use this module run here, as relock's own README test runs
// the others: as a program against a real redis-server, twice, leaving Redis empty (see
// readmetest.Run).
func TestReadmeGoBlocks(t *testing.T) {
	readmetest.Run(t, readmetest.Blocks{
		README: filepath.Join("..", "README.md"),
		Keep:   func(code string) bool { return strings.Contains(code, "relockotel.") },
		Imports: map[string]string{
			"context.": `"context"`, "rueidis.": `"github.com/redis/rueidis"`, "relock.": `"github.com/relock-go/relock"`,
			"relockotel.": `relockotel "github.com/relock-go/relock/otel"`,
		},
	})
}
