package script

import (
	"regexp"
	"slices"
	"strings"
	"testing"
)

// with takes from the preludes the functions the script calls, and those they call in
// turn, in the preludes' order; a name in a comment is no call.
func TestWithTakesCalledFunctions(t *testing.T) {
	const first = `-- header of the first prelude: c() is mentioned here
local function a(x)
  return x
end
-- the group of b and c
local function b(x)
  return a(x) + 1
end
local function c(x)
  return 0
end
`
	const second = `-- header of the second prelude
local function d()
  return b(1)
end
local function e()
  return 2
end
`
	got := definedIn(with("-- calls e() in a comment only\nreturn d()", first, second))
	if want := []string{"a", "b", "d"}; !slices.Equal(got, want) {
		t.Errorf("with defined %v; want %v: d, which the script calls, b, which d calls, and a, which b calls", got, want)
	}
}

// with takes a prelude's value wherever the script or a function it takes names it, before
// the functions, and leaves it out elsewhere: a missing value is a Lua error only on the
// path that names it.
func TestWithTakesNamedValues(t *testing.T) {
	const values = "-- header: most is mentioned here\nlocal most = 10\nlocal least = 0\n"
	const functions = "local function cap(x)\n  return math.min(x, most)\nend\n"
	for _, c := range []struct {
		src  string
		want string
	}{
		{"return cap(KEYS[1])", "local most = 10\nlocal function cap(x)\n  return math.min(x, most)\nend\nreturn cap(KEYS[1])"},
		{"return most", "local most = 10\nreturn most"},
		{"-- most\nreturn 1", "-- most\nreturn 1"},
	} {
		if got := with(c.src, values, functions); got != c.want {
			t.Errorf("with(%q) =\n%s\nwant:\n%s", c.src, got, c.want)
		}
	}
}

// A script's "-- preludes" line is where the functions go: a path that returns above it
// never makes them. A prelude function called above the line is a build mistake, which
// with refuses.
func TestPreludesGoAtTheScriptsLine(t *testing.T) {
	const prelude = "-- a prelude\nlocal function f()\n  return 1\nend\n"
	got := with("if KEYS[1] then\n  return 0\nend\n-- preludes\nreturn f()", prelude)
	if want := "if KEYS[1] then\n  return 0\nend\nlocal function f()\n  return 1\nend\nreturn f()"; got != want {
		t.Errorf("with placed the preludes so:\n%s\nwant:\n%s", got, want)
	}
	defer func() {
		if recover() == nil {
			t.Error("with took a script that calls f above the preludes' line")
		}
	}()
	with("if KEYS[1] then\n  return f()\nend\n-- preludes\nreturn f()", prelude)
}

// The commonest acquisition of a plain lock, a fair lock and either hold of a read-write
// lock, a first attempt at a free lock nobody waits for, returns before the script makes
// any function (see rlock_acquire.lua).
func TestCommonestAcquisitionMakesNoFunction(t *testing.T) {
	for name, c := range map[string]struct {
		s           *Script
		quiet, done string
	}{
		"rlock_acquire":        {RLockAcquire(), "redis.call('exists', KEYS[1], KEYS[2]) == 0 then", "return token and {1, 1, token} or 1"},
		"rwlock_write_acquire": {RWLockWriteAcquire(), "redis.call('exists', KEYS[1], KEYS[2], KEYS[4]) == 0 then", "return token and {1, 1, token} or 1"},
		"rwlock_read_acquire":  {RWLockReadAcquire(), "redis.call('exists', KEYS[1], KEYS[3], KEYS[5]) == 0 then", "return 1"},
		"fair_acquire":         {FairAcquire(), "redis.call('exists', KEYS[1], KEYS[2]) == 0 then", "return token and {1, 1, token} or 1"},
	} {
		src := c.s.Source
		quiet := strings.Index(src, c.quiet)
		fn := strings.Index(src, "local function")
		if quiet < 0 || fn < 0 || fn < quiet || !strings.Contains(src[quiet:fn], c.done) {
			t.Errorf("%s's first function comes before its commonest path returns:\n%s", name, src)
		}
	}
}

// Every script defines exactly the prelude functions it calls and the prelude values it
// names: none missing (a Lua error at the call), none unused (a closure the server makes at
// every call for nothing).
func TestScriptsDefineTheFunctionsTheyCall(t *testing.T) {
	preluded := map[string]bool{}
	for _, p := range []string{whole, shape, expect, wake, count, permit} {
		for _, d := range definitions(p) {
			preluded[d.name] = true
		}
	}
	values := map[string]bool{}
	for _, d := range definitions(whole) {
		values[d.name] = d.value
	}
	if !values["most_whole"] {
		t.Fatalf("whole.lua defines %v; want the value most_whole", values)
	}
	for name, s := range all() {
		for v := range values {
			definition := regexp.MustCompile(`(?m)^local ` + v + ` =`)
			defines := definition.MatchString(s.Source)
			if named := names(definition.ReplaceAllString(s.Source, ""))[v]; named != defines {
				t.Errorf("%s names %s: %v; defines it: %v", name, v, named, defines)
			}
		}
		defined := definedIn(s.Source)
		for _, f := range defined {
			if uses(s.Source, f) == 0 {
				t.Errorf("%s defines %s and never calls it", name, f)
			}
		}
		for f := range calls(s.Source) {
			if preluded[f] && !slices.Contains(defined, f) {
				t.Errorf("%s calls %s and does not define it", name, f)
			}
		}
	}
	if !slices.Equal(definedIn(RLockAcquire().Source), []string{"shape", "wrongtype", "reenter", "register", "waiting", "settle", "announce"}) {
		t.Errorf("the acquire script defines %v", definedIn(RLockAcquire().Source))
	}
}

// definedIn returns the names of the top-level functions src defines, in order.
func definedIn(src string) []string {
	var names []string
	for _, m := range localFunction.FindAllStringSubmatch(src, -1) {
		names = append(names, m[1])
	}
	return names
}

var localFunction = regexp.MustCompile(`(?m)^local function ([A-Za-z_][A-Za-z0-9_]*)\(`)

// uses counts the calls of f in src, its definition left out.
func uses(src, f string) int {
	code := comment.ReplaceAllString(src, "")
	n := len(regexp.MustCompile(`\b`+f+`\s*\(`).FindAllStringIndex(code, -1))
	return n - strings.Count(code, "local function "+f+"(")
}

// all returns every script by its file's name.
func all() map[string]*Script {
	return map[string]*Script{
		"rlock_acquire": RLockAcquire(), "rlock_unlock": RLockUnlock(), "rlock_hand": RLockHand(), "rlock_force_unlock": RLockForceUnlock(),
		"rlock_state": RLockState(), "rlock_renew": RLockRenew(), "fair_acquire": FairAcquire(),
		"fair_release": FairRelease(), "rwlock_read_acquire": RWLockReadAcquire(),
		"rwlock_write_acquire": RWLockWriteAcquire(), "rwlock_unlock": RWLockUnlock(), "rwlock_renew": RWLockRenew(),
		"pass": Pass(), "semaphore_acquire": SemaphoreAcquire(), "semaphore_leave": SemaphoreLeave(),
		"semaphore_release": SemaphoreRelease(), "semaphore_return": SemaphoreReturn(),
		"semaphore_renew": SemaphoreRenew(), "semaphore_available": SemaphoreAvailable(),
		"semaphore_drain": SemaphoreDrain(), "latch_set": LatchSet(), "latch_count_down": LatchCountDown(),
	}
}
