package countdown

import (
	"context"
	"fmt"
	"strconv"

	"github.com/redis/rueidis"

	"github.com/relock-go/relock/internal/lockerr"
)

// count reads the latch's key: the number it holds, 0 when there is none, and
// ErrWrongType when it holds anything but a whole number.
func count(ctx context.Context, rc rueidis.Client, key string) (int64, error) {
	v, err := rc.Do(ctx, rc.B().Get().Key(key).Build()).ToString()
	if rueidis.IsRedisNil(err) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	// Only a whole number as Redis writes one, as the scripts take it (lua/count.lua):
	// "+5" and "05" are not counts to INCRBY and DECR.
	n, perr := strconv.ParseInt(v, 10, 64)
	if perr != nil || strconv.FormatInt(n, 10) != v {
		return 0, fmt.Errorf("%w: the key holds %q, not a count", lockerr.ErrWrongType, clip(v))
	}
	return n, nil
}

func clip(s string) string {
	if len(s) > 32 {
		return s[:32] + "..."
	}
	return s
}
