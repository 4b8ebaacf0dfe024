// Package redisurl reads a Redis URL into rueidis options without ever letting the URL's
// secrets into an error: the relock client's Dial and the relock command both take one.
package redisurl

import (
	"strings"

	"github.com/redis/rueidis"
)

// Parse returns the rueidis options a Redis URL describes (rueidis.ParseURL: redis://,
// rediss://, unix://, with user, password, database and query options). An error names
// the URL with its user info and any password parameter hidden, and its text never
// contains them, whatever the parser put in it.
func Parse(raw string) (rueidis.ClientOption, error) {
	opt, err := rueidis.ParseURL(raw)
	if err != nil {
		return opt, &Error{url: Redact(raw), text: scrub(err.Error(), secrets(raw)), err: err}
	}
	return opt, nil
}

// Error is a URL that could not be read. Its text names the URL redacted; Unwrap gives the
// parser's error for errors.Is, whose own text may hold the secrets: print this one.
type Error struct {
	url, text string
	err       error
}

func (e *Error) Error() string { return "invalid Redis URL " + e.url + ": " + e.text }
func (e *Error) Unwrap() error { return e.err }

// hidden stands for a secret in a redacted URL, as url.URL.Redacted writes it.
const hidden = "xxxxx"

// Redact returns the URL with its user info, and the value of a password query parameter,
// replaced by "xxxxx". It works on text that does not parse as a URL, too.
func Redact(raw string) string { return scrub(raw, secrets(raw)) }

// secrets returns the parts of raw that must not be shown: the user info of its authority
// (everything between "://" and the last "@" before the path) and the values of password
// query parameters.
func secrets(raw string) []string {
	var out []string
	rest := raw
	if _, after, ok := strings.Cut(raw, "://"); ok {
		rest = after
	}
	authority := rest
	if i := strings.IndexAny(authority, "/?#"); i >= 0 {
		authority = authority[:i]
	}
	if i := strings.LastIndex(authority, "@"); i > 0 {
		out = append(out, authority[:i])
	}
	if _, query, ok := strings.Cut(raw, "?"); ok {
		for _, kv := range strings.FieldsFunc(query, func(r rune) bool { return r == '&' || r == '#' }) {
			if k, v, ok := strings.Cut(kv, "="); ok && strings.EqualFold(k, "password") && v != "" {
				out = append(out, v)
			}
		}
	}
	return out
}

// scrub replaces every secret in text.
func scrub(text string, secrets []string) string {
	for _, s := range secrets {
		text = strings.ReplaceAll(text, s, hidden)
	}
	return text
}
