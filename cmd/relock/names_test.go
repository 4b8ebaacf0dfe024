package main

import (
	"encoding/base64"
	"encoding/json"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/relock-go/relock/internal/redistest"
	"github.com/relock-go/relock/internal/redistest/relocktest"
)

// A name as inspect prints it can be given back to unlock --force: printed as it is when
// that is unambiguous, else Go-quoted (the shell's $'...' reads the same escapes), so that
// the operator unquotes it. Bytes that are not UTF-8 are quoted like control characters,
// and so is a name that starts with a double quote, which would otherwise read as the
// quoted spelling of another name. Guards against a byte 0xff written raw to the
// terminal (it shows as '?' or '\ufffd', and that name holds no lock) and against the
// name `"x"` printed as the quoted form of x.
func TestOddNamesShownFaithfully(t *testing.T) {
	redistest.Real(t, func(t *testing.T, b *redistest.Backend) {
		c := relocktest.New(t, b)
		for _, tc := range []struct{ name, shown string }{
			{"orders\xff42", `"orders\xff42"`},
			{`"x"`, `"\"x\""`},
			{"\xc3(", `"\xc3("`},
			{"two words", "two words"},           // printable: as it is
			{"{orders}:42", "{orders}:42"},       // a hash tag: as it is
			{"commandé", "commandé"},             // UTF-8 beyond ASCII: as it is
			{strings.Repeat("n", 4000), ""},      // long: in full
			{"x", "x"},                           // the name `"x"` must not show as this one
			{`"x` + "\n", `"\"x\n"`},             // quoted once, not twice
			{"tab\there", `"tab\there"`},         // a control character, as before
			{"\"", `"\""`},                       // a lone quote
			{"a\"b", `a"b`},                      // a quote inside: unambiguous as it is
			{"ok", "ok"},                         // control
			{"\u200b", `"\u200b"`},               // invisible: quoted, as before
			{"\xffmixed\x1b", `"\xffmixed\x1b"`}, // both: quoted once
		} {
			if tc.shown == "" {
				tc.shown = tc.name
			}
			holdLock(t, c, tc.name)
			out, err := relockCmd(t, b.Addr, "", "inspect", tc.name)
			head, _, _ := strings.Cut(out, "\n")
			if err != nil || !strings.HasPrefix(head, tc.shown+": rlock, held") {
				t.Errorf("inspect %q: %v; first line %q, want it to begin %q", tc.name, err, head, tc.shown+": rlock, held")
				continue
			}
			// The operator copies the name from the output, unquoting it when it is quoted.
			copied := head[:len(tc.shown)]
			if strings.HasPrefix(copied, `"`) {
				if copied, err = strconv.Unquote(copied); err != nil {
					t.Errorf("inspect %q shows %s, which does not unquote: %v", tc.name, head[:len(tc.shown)], err)
					continue
				}
			}
			if copied != tc.name {
				t.Errorf("inspect %q shows %s, which reads back as %q", tc.name, head[:len(tc.shown)], copied)
				continue
			}
			out, err = relockCmd(t, b.Addr, "", "unlock", "--force", "-y", copied)
			if err != nil || !strings.Contains(out, tc.shown+" force-unlocked") {
				t.Errorf("unlock --force -y of the name copied from inspect %q: %v\n%s", tc.name, err, out)
			}
		}
	})
}

// unlock --force of a name with no key says that there is no such key, as inspect does,
// not merely that the lock is not held: a mistyped name at 3 a.m. must not read as a
// lock that exists and is free. It exits with status 0: there is nothing to do.
func TestForceUnlockOfNoSuchKey(t *testing.T) {
	redistest.Real(t, func(t *testing.T, b *redistest.Backend) {
		out, err := relockCmd(t, b.Addr, "", "unlock", "--force", "-y", "orders:43")
		if err != nil || out != "orders:43 is not held: there is no such key; nothing to do\n" {
			t.Errorf("unlock --force -y of a name with no key: %v, %q; want it to say there is no such key", err, out)
		}
	})
}

// JSON strings carry only UTF-8: encoding/json writes a byte that is not as U+FFFD, and a
// script that gives the name it read back to unlock --force names another key. inspect
// --json therefore adds the name's exact bytes, base64 (nameBase64), when the name is not
// UTF-8, and only then.
func TestJSONNameBytes(t *testing.T) {
	redistest.Real(t, func(t *testing.T, b *redistest.Backend) {
		c := relocktest.New(t, b)
		for _, name := range []string{"orders\xff42", "\xc3(", "commandé", "ok"} {
			holdLock(t, c, name)
			out, err := relockCmd(t, b.Addr, "", "inspect", "--json", name)
			if err != nil {
				t.Fatalf("inspect --json %q: %v\n%s", name, err, out)
			}
			var r struct {
				Name       string  `json:"name"`
				NameBase64 *string `json:"nameBase64"`
			}
			if err := json.Unmarshal([]byte(out), &r); err != nil {
				t.Fatalf("inspect --json %q: %v\n%s", name, err, out)
			}
			if utf8.ValidString(name) {
				if r.Name != name || r.NameBase64 != nil {
					t.Errorf("inspect --json %q: name %q, nameBase64 %v; want the name, and no nameBase64", name, r.Name, r.NameBase64)
				}
				continue
			}
			if r.NameBase64 == nil {
				t.Errorf("inspect --json %q: no nameBase64 (name reads %q)", name, r.Name)
				continue
			}
			got, err := base64.StdEncoding.DecodeString(*r.NameBase64)
			if err != nil || string(got) != name {
				t.Errorf("inspect --json %q: nameBase64 %q decodes to %q (%v)", name, *r.NameBase64, got, err)
				continue
			}
			if out, err := relockCmd(t, b.Addr, "", "unlock", "--force", "-y", string(got)); err != nil || !strings.Contains(out, "force-unlocked") {
				t.Errorf("unlock --force -y of the name decoded from nameBase64 %q: %v\n%s", name, err, out)
			}
		}
	})
}
