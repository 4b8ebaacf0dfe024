package main

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"strconv"
)

// The ceiling scenario talks RESP itself, over plain TCP, so that nothing between it and
// the server (no client library, no connection pool) adds to what the server is asked.
// Only RESP2 is spoken: the connections never send HELLO.

// appendCommand appends args to b as one RESP request: an array of bulk strings.
func appendCommand(b []byte, args ...string) []byte {
	b = append(b, '*')
	b = strconv.AppendInt(b, int64(len(args)), 10)
	b = append(b, '\r', '\n')
	for _, a := range args {
		b = append(b, '$')
		b = strconv.AppendInt(b, int64(len(a)), 10)
		b = append(b, '\r', '\n')
		b = append(b, a...)
		b = append(b, '\r', '\n')
	}
	return b
}

// reply is one RESP2 reply.
type reply struct {
	kind  byte    // '+' simple string, '-' error, ':' integer, '$' bulk string, '*' array
	str   string  // the text of a simple string, an error or a bulk string
	n     int64   // an integer; -1 for a nil bulk string or array
	elems []reply // an array's elements
}

// isInt reports whether r is the integer v.
func (r reply) isInt(v int64) bool { return r.kind == ':' && r.n == v }

// String shows r as a test failure or an error names it.
func (r reply) String() string {
	switch r.kind {
	case ':':
		return strconv.FormatInt(r.n, 10)
	case '*':
		if r.n < 0 {
			return "nil array"
		}
		return fmt.Sprint(r.elems)
	case '$':
		if r.n < 0 {
			return "nil"
		}
	}
	return string(r.kind) + r.str
}

// errProtocol is what readReply returns for bytes that are not a RESP2 reply.
var errProtocol = errors.New("resp: protocol error")

// maxReplyLen bounds a bulk string or array read from the server: the ceiling's replies
// are a few bytes, and a larger length means the stream is out of step.
const maxReplyLen = 1 << 20

// readReply reads one whole reply from r.
func readReply(r *bufio.Reader) (reply, error) {
	line, err := readLine(r)
	if err != nil {
		return reply{}, err
	}
	if len(line) == 0 {
		return reply{}, fmt.Errorf("%w: empty line", errProtocol)
	}
	kind, body := line[0], string(line[1:])
	switch kind {
	case '+', '-':
		return reply{kind: kind, str: body}, nil
	case ':':
		n, err := strconv.ParseInt(body, 10, 64)
		if err != nil {
			return reply{}, fmt.Errorf("%w: integer %q", errProtocol, body)
		}
		return reply{kind: kind, n: n}, nil
	case '$', '*':
		n, err := strconv.ParseInt(body, 10, 64)
		if err != nil || n < -1 || n > maxReplyLen {
			return reply{}, fmt.Errorf("%w: length %q", errProtocol, body)
		}
		if n == -1 {
			return reply{kind: kind, n: -1}, nil
		}
		if kind == '$' {
			buf := make([]byte, n+2)
			if _, err := io.ReadFull(r, buf); err != nil {
				return reply{}, err
			}
			if buf[n] != '\r' || buf[n+1] != '\n' {
				return reply{}, fmt.Errorf("%w: bulk string not ended by CRLF", errProtocol)
			}
			return reply{kind: kind, str: string(buf[:n]), n: n}, nil
		}
		out := reply{kind: kind, n: n, elems: make([]reply, n)}
		for i := range out.elems {
			if out.elems[i], err = readReply(r); err != nil {
				return reply{}, err
			}
		}
		return out, nil
	}
	return reply{}, fmt.Errorf("%w: type byte %q", errProtocol, kind)
}

// readLine reads up to CRLF and returns the line without it.
func readLine(r *bufio.Reader) ([]byte, error) {
	line, err := r.ReadSlice('\n')
	if err != nil {
		return nil, err
	}
	if len(line) < 2 || line[len(line)-2] != '\r' {
		return nil, fmt.Errorf("%w: line not ended by CRLF", errProtocol)
	}
	return line[:len(line)-2], nil
}
