package main

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"errors"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/relock-go/relock"
	"github.com/relock-go/relock/internal/keys"
	"github.com/relock-go/relock/internal/redistest"
	"github.com/relock-go/relock/internal/redistest/relocktest"
)

// clientCol matches inspect's client column after a holder or waiter, whatever it found.
const clientCol = `  client (\S+, connected \d+s( \(\d+ connections\))?|unknown|not found|not connected)`

// clientNotes matches the lines that may end a view to explain its client column.
const clientNotes = `(  (clients unknown|not found|not connected|  )[^\n]*\n)*`

// parked matches inspect's line of c's entry in a lock's wake registry, with waiters of the
// kind ("waiters", "writers" or "readers"), whatever it found of its client.
func parked(kind string, c *relock.Client) string {
	return `  parked ` + kind + ` of relock client ` + regexp.QuoteMeta(c.ID()) + ` \(wake code \d+\);` + clientCol[1:] + `\n`
}

// holderRE matches inspect's text view of name held once by an owner of c.
func holderRE(c *relock.Client, name string) *regexp.Regexp {
	return regexp.MustCompile(`^` + regexp.QuoteMeta(name) + `: rlock, held, lease .* left\n  ` + regexp.QuoteMeta(c.ID()) + `:\d+ +holds ×1` + clientCol + `\n` + clientNotes + `$`)
}

// holdLock takes name with c for the rest of the test.
func holdLock(t *testing.T, c *relock.Client, name string) {
	t.Helper()
	held, err := c.Lock(name).Lock(redistest.Context(t, time.Minute))
	if err != nil {
		t.Fatalf("lock %s: %v", name, err)
	}
	t.Cleanup(func() { _ = c.Lock(name).Unlock(held) })
}

// REDIS_URL says everything about the connection, and no connection flag may come with it:
// a command given both refuses with a usage error naming them, and acts on no server (an
// unlock --force leaves the lock held).
func TestRedisURL(t *testing.T) {
	redistest.Real(t, func(t *testing.T, b *redistest.Backend) {
		c := relocktest.New(t, b)
		holdLock(t, c, "orders")

		stdout, stderr, status := runBinary(t, []string{"REDIS_URL=redis://" + b.Addr}, "inspect", "orders")
		if status != 0 || !holderRE(c, "orders").MatchString(stdout) {
			t.Errorf("REDIS_URL=redis://%s relock inspect: status %d\n%s%s", b.Addr, status, stdout, stderr)
		}
		for _, flags := range [][]string{{"--redis", b.Addr}, {"--user", "ops"}, {"--tls"}, {"--cluster"}, {"--sentinel-master", "m"}} {
			args := append(append([]string{"unlock", "--force", "-y"}, flags...), "orders")
			stdout, stderr, status = runBinary(t, []string{"REDIS_URL=redis://" + b.Addr}, args...)
			if status != 2 || !strings.Contains(stderr, "REDIS_URL is set, and so is "+flags[0]) || strings.Contains(stdout, "force-unlocked") {
				t.Errorf("REDIS_URL and %v: status %d, stdout %q, stderr %q; want status 2 and a refusal naming %s", flags, status, stdout, stderr, flags[0])
			}
		}
		if locked, err := c.Lock("orders").IsLocked(redistest.Context(t, 10*time.Second)); err != nil || !locked {
			t.Errorf("after the refused unlocks: locked %v, %v; want the lock still held", locked, err)
		}
		stdout, stderr, status = runBinary(t, []string{"REDIS_URL=redis://" + b.Addr + "/0"}, "watch", "--count", "1", "--interval", "10ms", "orders")
		if status != 0 || !strings.Contains(stdout, "holds ×1") {
			t.Errorf("REDIS_URL relock watch: status %d\n%s%s", status, stdout, stderr)
		}
		_, stderr, status = runBinary(t, []string{"REDIS_URL=http://" + b.Addr}, "inspect", "orders")
		if status != 1 || !strings.HasPrefix(stderr, "relock: REDIS_URL: ") {
			t.Errorf("a REDIS_URL that is no Redis URL: status %d, stderr %q; want status 1 and a message naming REDIS_URL", status, stderr)
		}
		// A malformed URL's error never shows its credentials.
		stdout, stderr, status = runBinary(t, []string{"REDIS_URL=redis://alice:s3cret-pw@" + b.Addr + ":x/0"}, "inspect", "orders")
		if out := stdout + stderr; status != 1 || strings.Contains(out, "s3cret-pw") || strings.Contains(out, "alice") {
			t.Errorf("a malformed REDIS_URL with a password: status %d, output %q; want status 1 and no credentials", status, out)
		}
	})
}

// --user and REDIS_PASSWORD log in as an ACL user, and so does a REDIS_URL with
// credentials; a wrong or missing password fails with status 1 and the server's reason.
func TestACLUser(t *testing.T) {
	s := redistest.StartServer(t)
	// The default user is switched off, so that a command that did not log in as ops
	// cannot pass by falling back on it.
	for _, cmd := range [][]string{
		{"ACL", "SETUSER", "ops", "on", ">s3cret", "~*", "&*", "+@all"},
		{"ACL", "SETUSER", "default", "off"},
	} {
		if err := s.Do(t, cmd...).Error(); err != nil {
			t.Fatalf("%q: %v", cmd, err)
		}
	}
	rc, err := rueidis.NewClient(rueidis.ClientOption{
		InitAddress:       []string{s.Addr()},
		Username:          "ops",
		Password:          "s3cret",
		DisableCache:      true,
		ForceSingleClient: true,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(rc.Close)
	c := relocktest.On(t, rc)
	holdLock(t, c, "orders")
	holder := holderRE(c, "orders")

	out, err := runEnv(t, map[string]string{"REDIS_PASSWORD": "s3cret"}, "", "inspect", "--redis", s.Addr(), "--user", "ops", "orders")
	if err != nil || !holder.MatchString(out) {
		t.Errorf("inspect --user ops with REDIS_PASSWORD: %v\n%s", err, out)
	}
	stdout, stderr, status := runBinary(t, []string{"REDIS_PASSWORD=s3cret"}, "inspect", "--redis", s.Addr(), "--user", "ops", "orders")
	if status != 0 || !holder.MatchString(stdout) {
		t.Errorf("relock inspect --user ops with REDIS_PASSWORD in the environment: status %d\n%s%s", status, stdout, stderr)
	}
	stdout, stderr, status = runBinary(t, []string{"REDIS_URL=redis://ops:s3cret@" + s.Addr()}, "inspect", "orders")
	if status != 0 || !holder.MatchString(stdout) {
		t.Errorf("relock inspect with credentials in REDIS_URL: status %d\n%s%s", status, stdout, stderr)
	}

	for _, tc := range []struct {
		what string
		env  []string
		args []string
	}{
		{"a wrong password", []string{"REDIS_PASSWORD=wrong"}, []string{"--user", "ops"}},
		{"no password", nil, []string{"--user", "ops"}},
		{"the password without the user", []string{"REDIS_PASSWORD=s3cret"}, nil},
	} {
		args := append(append([]string{"inspect", "--redis", s.Addr()}, tc.args...), "orders")
		stdout, stderr, status := runBinary(t, tc.env, args...)
		if status != 1 || !strings.HasPrefix(stderr, "relock: connecting to "+s.Addr()+": ") ||
			!regexp.MustCompile(`WRONGPASS|NOAUTH`).MatchString(stderr) || stdout != "" {
			t.Errorf("%s: status %d, stdout %q, stderr %q; want status 1 and the server's refusal", tc.what, status, stdout, stderr)
		}
	}

	// unlock --force makes a relock client of its own (a subscriber connection included) on
	// the same credentials.
	stdout, stderr, status = runBinary(t, []string{"REDIS_PASSWORD=s3cret"}, "unlock", "--force", "-y", "--redis", s.Addr(), "--user", "ops", "orders")
	if status != 0 || !strings.Contains(stdout, "orders force-unlocked") {
		t.Errorf("relock unlock --force --user ops: status %d\n%s%s", status, stdout, stderr)
	}
	if locked, err := c.Lock("orders").IsLocked(context.Background()); err != nil || locked {
		t.Errorf("after unlock --force: locked %v, %v", locked, err)
	}
}

// --tls connects to a TLS port and checks the server's certificate against the system's
// roots, which SSL_CERT_FILE stands in for here; rediss:// in REDIS_URL does the same.
func TestTLS(t *testing.T) {
	dir := t.TempDir()
	caFile := writeTestCerts(t, dir)
	tlsPort := freeTestPort(t)
	s := redistest.StartServer(t,
		"--tls-port", strconv.Itoa(tlsPort),
		"--tls-cert-file", filepath.Join(dir, "server.pem"),
		"--tls-key-file", filepath.Join(dir, "server-key.pem"),
		"--tls-ca-cert-file", caFile,
		"--tls-auth-clients", "no",
	)
	c := relocktest.New(t, s)
	holdLock(t, c, "orders")
	holder := holderRE(c, "orders")
	tlsAddr := net.JoinHostPort("127.0.0.1", strconv.Itoa(tlsPort))
	trustCA := []string{"SSL_CERT_FILE=" + caFile, "SSL_CERT_DIR=" + dir}

	stdout, stderr, status := runBinary(t, trustCA, "inspect", "--tls", "--redis", tlsAddr, "orders")
	if status != 0 || !holder.MatchString(stdout) {
		t.Errorf("relock inspect --tls: status %d\n%s%s", status, stdout, stderr)
	}
	stdout, stderr, status = runBinary(t, append(trustCA, "REDIS_URL=rediss://"+tlsAddr), "inspect", "orders")
	if status != 0 || !holder.MatchString(stdout) {
		t.Errorf("relock inspect with REDIS_URL=rediss://: status %d\n%s%s", status, stdout, stderr)
	}
	// An empty folder of roots: the test's CA is not trusted, and nothing else is.
	untrusted := []string{"SSL_CERT_FILE=" + filepath.Join(dir, "none.pem"), "SSL_CERT_DIR=" + t.TempDir()}
	stdout, stderr, status = runBinary(t, untrusted, "inspect", "--tls", "--redis", tlsAddr, "orders")
	if status != 1 || !strings.Contains(stderr, "x509: ") || stdout != "" {
		t.Errorf("relock inspect --tls with an untrusted certificate: status %d, stdout %q, stderr %q; want status 1 and the certificate error", status, stdout, stderr)
	}
}

// freeTestPort returns a loopback port that was free a moment ago.
func freeTestPort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// writeTestCerts writes a throwaway CA (ca.pem) and a certificate for 127.0.0.1 signed by
// it (server.pem, server-key.pem) into dir, and returns the CA's file. They live an hour:
// long enough for the test, useless after it.
func writeTestCerts(t *testing.T, dir string) string {
	t.Helper()
	now := time.Now()
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	caTmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "relock test CA"},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(time.Hour),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	ca, err := x509.ParseCertificate(caDER)
	if err != nil {
		t.Fatal(err)
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	der, err := x509.CreateCertificate(rand.Reader, &x509.Certificate{
		SerialNumber: big.NewInt(2),
		Subject:      pkix.Name{CommonName: "127.0.0.1"},
		IPAddresses:  []net.IP{net.IPv4(127, 0, 0, 1)},
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.Add(time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}, ca, &key.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	write := func(name, typ string, der []byte) string {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}
	write("server.pem", "CERTIFICATE", der)
	write("server-key.pem", "PRIVATE KEY", keyDER)
	return write("ca.pem", "CERTIFICATE", caDER)
}

// inspect reads locks the same way on a single server, on miniredis and, with --cluster,
// on a Redis Cluster, whichever master holds the lock; it counts a waiting client wherever
// it subscribed (sharded pub/sub on the cluster, classic elsewhere).
func TestInspectBackends(t *testing.T) {
	redistest.EachWithCluster(t, func(t *testing.T, b *redistest.Backend) {
		c := relocktest.New(t, b)
		ctx := redistest.Context(t, 2*time.Minute)
		conn := []string{"--redis", b.Addr}
		names := []string{"shard"}
		if b.Cluster != nil {
			conn = []string{"--cluster", "--redis", strings.Join(b.Cluster.Addrs(), ",")}
			names = b.Cluster.NamesOnEveryMaster(t, "shard-")
		}
		inspect := func(args ...string) (string, error) {
			t.Helper()
			return runEnv(t, nil, "", append(append([]string{"inspect"}, conn...), args...)...)
		}

		// The first lock gets a waiter, whose wait ends when the lock is released.
		first := c.Lock(names[0])
		held, err := first.Lock(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, name := range names[1:] {
			holdLock(t, c, name)
		}
		for _, name := range names {
			if out, err := inspect(name); err != nil || !holderRE(c, name).MatchString(out) {
				t.Errorf("inspect %s: %v\n%s", name, err, out)
			}
		}

		waiter := async(func() error {
			wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
			defer cancel()
			h, err := first.Lock(wctx)
			if err != nil {
				return err
			}
			return first.Unlock(h)
		})
		channel := keys.Of(names[0]).Channel
		redistest.Eventually(t, 20*time.Second, "the waiter's subscription is not on the server", func() bool {
			if c.PubSubStats().Waiting != 1 {
				return false
			}
			switch {
			case b.Cluster != nil:
				n, _ := numsub(b.Cluster.MasterOf(keys.Slot(channel)).Do(t, "PUBSUB", "SHARDNUMSUB", channel))
				return n == 1
			case b.Mini != nil:
				return b.Mini.PubSubNumSub(channel)[channel] == 1
			default:
				return b.Server.Subscribers(t, "NUMSUB", channel) == 1
			}
		})
		out, err := inspect("--json", names[0])
		var r Report
		if err == nil {
			err = json.Unmarshal([]byte(out), &r)
		}
		if err != nil || r.Subscribers != 1 || len(r.Owners) != 1 || r.Owners[0].Holds != 1 || !strings.HasPrefix(r.Owners[0].Owner, c.ID()+":") {
			t.Errorf("inspect --json %s with a waiting client: %v\n%s", names[0], err, out)
		}
		out, err = inspect(names[0])
		if err != nil || !strings.Contains(out, "\n  waiting clients  1 (") {
			t.Errorf("inspect %s with a waiting client: %v\n%s", names[0], err, out)
		}
		if err := first.Unlock(held); err != nil {
			t.Fatal(err)
		}
		await(t, "the waiter", waiter)
	})
}

// silentServer listens on loopback and accepts connections that it never answers, as a
// plain server answers a TLS client's hello (it waits for the end of a command line that
// never comes). It returns its address, and how many connections it has accepted.
func silentServer(t *testing.T) (string, func() int) {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var conns []net.Conn
	var mu sync.Mutex
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		l.Close()
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			c.Close()
		}
	})
	return l.Addr().String(), func() int { mu.Lock(); defer mu.Unlock(); return len(conns) }
}

// --tls against a server that does not speak TLS gets no answer to its handshake: the
// error says so, rather than only that a deadline passed.
func TestTLSAgainstPlainServer(t *testing.T) {
	s := redistest.StartServer(t)
	var out syncBuffer
	err := run(redistest.Context(t, time.Minute), []string{"inspect", "--tls", "--redis", s.Addr(), "orders"}, func(string) string { return "" }, nil, &out, &out)
	if err == nil || !strings.Contains(err.Error(), "does the server speak TLS") {
		t.Errorf("relock inspect --tls against a plain server: %v; want the error to ask whether the server speaks TLS", err)
	}
}

// The hint about TLS is for a TLS handshake that got no answer alone: a plain connection
// to a server that never answers, and a --tls connection that is refused, report what
// happened without asking whether the server speaks TLS.
func TestTLSHintOnlyForAnUnansweredHandshake(t *testing.T) {
	silent, _ := silentServer(t)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	refusing := l.Addr().String() // nobody listens there once l is closed
	l.Close()
	for _, tc := range []struct {
		what string
		args []string
	}{
		{"a plain connection to a server that never answers", []string{"inspect", "--redis", silent, "orders"}},
		{"--tls to a port that refuses the connection", []string{"inspect", "--tls", "--redis", refusing, "orders"}},
	} {
		var out syncBuffer
		err := run(redistest.Context(t, time.Minute), tc.args, func(string) string { return "" }, nil, &out, &out)
		if err == nil || strings.Contains(err.Error(), "does the server speak TLS") {
			t.Errorf("relock inspect, %s: %v; want a connection error without the TLS hint", tc.what, err)
		}
	}
}

// Ctrl-C while the connection is being made ends the command then, with the signal as its
// cause: it does not wait for the dial to give up.
func TestInterruptWhileConnecting(t *testing.T) {
	addr, accepted := silentServer(t)
	ctx, interrupt := context.WithCancelCause(context.Background())
	defer interrupt(nil)
	var out syncBuffer
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, []string{"inspect", "--redis", addr, "orders"}, func(string) string { return "" }, nil, &out, &out)
	}()
	// The command is connecting (the server accepted, and answers nothing) when the signal
	// comes.
	redistest.Eventually(t, 30*time.Second, "a connection to the silent server", func() bool { return accepted() > 0 })
	interrupt(signalled{os.Interrupt})
	err := redistest.Recv(t, done, 30*time.Second, "relock inspect interrupted while connecting")
	var sig signalled
	if !errors.As(err, &sig) {
		t.Errorf("relock inspect interrupted while connecting: %v; want the signal as the error", err)
	}
}
