package redisurl_test

import (
	"strings"
	"testing"

	"github.com/relock-go/relock/internal/redisurl"
)

// No error from a URL, well formed or not, shows its password or user info.
func TestParseNeverShowsSecrets(t *testing.T) {
	for _, raw := range []string{
		"redis://alice:s3cret-pw@bad host:6379/0",
		"redis://alice:s3cret-pw@127.0.0.1:notaport",
		"redis://:s3cret-pw@127.0.0.1:6379/notadb",
		"rediss://s3cret-pw@[::1:6379",
		"redis://127.0.0.1:6379/0?password=s3cret-pw&dial_timeout=zz",
		// A password may hold '@': the user info runs to the last '@' of the authority.
		"redis://alice:s3cret@s3cret-pw@127.0.0.1:notaport",
		// A password parameter is one whatever its case.
		"redis://127.0.0.1:6379/0?Password=s3cret-pw&dial_timeout=zz",
		"nonsense://alice:s3cret-pw@host",
	} {
		_, err := redisurl.Parse(raw)
		if err == nil {
			t.Errorf("%q: no error; want one (the URL is malformed)", raw)
			continue
		}
		if msg := err.Error(); strings.Contains(msg, "s3cret-pw") || strings.Contains(msg, "alice") || !strings.Contains(msg, "xxxxx") {
			t.Errorf("%q: error %q shows a secret, or does not say where it was hidden", raw, msg)
		}
	}
}

func TestParseGoodURL(t *testing.T) {
	opt, err := redisurl.Parse("redis://alice:pw@127.0.0.1:6390/2")
	if err != nil {
		t.Fatal(err)
	}
	if opt.Username != "alice" || opt.Password != "pw" || opt.SelectDB != 2 || len(opt.InitAddress) != 1 || opt.InitAddress[0] != "127.0.0.1:6390" {
		t.Errorf("options %+v", opt)
	}
}
