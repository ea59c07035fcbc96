// Package jsonscan validates, delimits and rewrites JSON in one tight pass
// over its bytes, accepting exactly what encoding/json accepts and decoding
// and encoding strings exactly as it does: the base of codec's fast
// decoders and of the status hash's canonical form.
//
// encoding/json reads its input at least twice (checkValid over all of it,
// then the decoding pass, which skips over each json.Unmarshaler value such
// as a manifest's RawExtension once more) with a state machine that makes a
// function call per byte; for a 2 KB Deployment that was most of a spec
// decode. Fuzz targets here and in codec check the equivalence.
package jsonscan

import (
	"unicode"
	"unicode/utf16"
	"unicode/utf8"
)

// MaxNesting is encoding/json's limit on nested arrays and objects.
const MaxNesting = 10000

// SkipWS returns the index of the first byte at or after i that is not
// JSON white space.
func SkipWS(data []byte, i int) int {
	for i < len(data) {
		switch data[i] {
		case ' ', '\t', '\n', '\r':
			i++
		default:
			return i
		}
	}
	return i
}

// Valid reports whether data is one JSON value, as json.Valid does.
func Valid(data []byte) bool {
	i, ok := SkipValue(data, SkipWS(data, 0), 0)
	return ok && SkipWS(data, i) == len(data)
}

// SkipValue validates the JSON value that starts at data[i] and returns the
// index just after it. depth is the number of arrays and objects around it.
func SkipValue(data []byte, i, depth int) (int, bool) {
	if i >= len(data) {
		return i, false
	}
	switch c := data[i]; c {
	case '"':
		end, _, ok := SkipString(data, i)
		return end, ok
	case '{': // Members, written out: a call per member made decoding 6 % slower
		if depth >= MaxNesting {
			return i, false
		}
		i = SkipWS(data, i+1)
		if i < len(data) && data[i] == '}' {
			return i + 1, true
		}
		for {
			if i >= len(data) || data[i] != '"' {
				return i, false
			}
			var ok bool
			if i, _, ok = SkipString(data, i); !ok {
				return i, false
			}
			i = SkipWS(data, i)
			if i >= len(data) || data[i] != ':' {
				return i, false
			}
			if i, ok = SkipValue(data, SkipWS(data, i+1), depth+1); !ok {
				return i, false
			}
			i = SkipWS(data, i)
			if i >= len(data) {
				return i, false
			}
			switch data[i] {
			case '}':
				return i + 1, true
			case ',':
				i = SkipWS(data, i+1)
			default:
				return i, false
			}
		}
	case '[':
		if depth >= MaxNesting {
			return i, false
		}
		i = SkipWS(data, i+1)
		if i < len(data) && data[i] == ']' {
			return i + 1, true
		}
		for {
			var ok bool
			if i, ok = SkipValue(data, i, depth+1); !ok {
				return i, false
			}
			i = SkipWS(data, i)
			if i >= len(data) {
				return i, false
			}
			switch data[i] {
			case ']':
				return i + 1, true
			case ',':
				i = SkipWS(data, i+1)
			default:
				return i, false
			}
		}
	case 't':
		return SkipLiteral(data, i, "true")
	case 'f':
		return SkipLiteral(data, i, "false")
	case 'n':
		return SkipLiteral(data, i, "null")
	default:
		if c == '-' || (c >= '0' && c <= '9') {
			return SkipNumber(data, i)
		}
		return i, false
	}
}

// Members reads the members of a JSON object one at a time, validating
// them as it goes, as bufio.Scanner reads lines, for a caller that looks
// at some of them: a manifest's apiVersion and kind. It accepts what
// SkipValue accepts.
type Members struct {
	data       []byte
	i          int // the next member's key, a separator, or the end
	depth      int
	started    bool
	done, ok   bool
	key        []byte
	start, end int
}

// ReadObject returns the reader of the members of the object whose '{' is
// data[i]. depth is the number of arrays and objects around it.
func ReadObject(data []byte, i, depth int) Members {
	if depth >= MaxNesting {
		return Members{i: i, done: true}
	}
	return Members{data: data, i: SkipWS(data, i+1), depth: depth}
}

// Next reads the next member, and reports false at the end of the object
// or where it is not valid JSON.
func (m *Members) Next() bool {
	if m.done {
		return false
	}
	data, i := m.data, m.i
	switch {
	case i >= len(data):
		return m.stop(i, false)
	case data[i] == '}':
		return m.stop(i+1, true)
	case m.started && data[i] != ',':
		return m.stop(i, false)
	case m.started:
		i = SkipWS(data, i+1)
	}
	m.started = true
	if i >= len(data) || data[i] != '"' {
		return m.stop(i, false)
	}
	keyEnd, _, ok := SkipString(data, i)
	if !ok {
		return m.stop(keyEnd, false)
	}
	colon := SkipWS(data, keyEnd)
	if colon >= len(data) || data[colon] != ':' {
		return m.stop(colon, false)
	}
	start := SkipWS(data, colon+1)
	end, ok := SkipValue(data, start, m.depth+1)
	if !ok {
		return m.stop(end, false)
	}
	m.key, m.start, m.end, m.i = data[i+1:keyEnd-1], start, end, SkipWS(data, end)
	return true
}

func (m *Members) stop(i int, ok bool) bool {
	m.i, m.done, m.ok = i, true, ok
	return false
}

// Key is the member's key as written between its quotes.
func (m *Members) Key() []byte { return m.key }

// Value returns the index of the member's value's first byte and the index
// just past its last.
func (m *Members) Value() (start, end int) { return m.start, m.end }

// End returns, once Next has returned false, the index just past the
// object and whether all of it is valid JSON.
func (m *Members) End() (int, bool) { return m.i, m.ok }

// SkipLiteral consumes lit (true, false or null) at data[i], and returns the
// index after it.
func SkipLiteral(data []byte, i int, lit string) (int, bool) {
	if len(data)-i >= len(lit) && string(data[i:i+len(lit)]) == lit {
		return i + len(lit), true
	}
	return i, false
}

// SkipString validates the string that starts at data[i] (a '"') and
// returns the index after it, and whether it is plain: no escapes, so its
// bytes between the quotes are its value (after UTF-8 repair).
func SkipString(data []byte, i int) (end int, plain, ok bool) {
	plain = true
	i++
	for {
		for i < len(data) && !stringSpecial[data[i]] {
			i++
		}
		if i >= len(data) {
			return i, false, false
		}
		switch c := data[i]; {
		case c == '"':
			return i + 1, plain, true
		case c == '\\':
			plain = false
			if i+1 >= len(data) {
				return i, false, false
			}
			switch data[i+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				i += 2
			case 'u':
				if len(data)-i < 6 {
					return i, false, false
				}
				for _, h := range data[i+2 : i+6] {
					if !isHex(h) {
						return i, false, false
					}
				}
				i += 6
			default:
				return i, false, false
			}
		case c < 0x20:
			return i, false, false
		default:
			i++
		}
	}
}

// stringSpecial marks the bytes that end the ordinary run of a string:
// '"', '\\' and control characters.
var stringSpecial = func() (t [256]bool) {
	for c := 0; c < 0x20; c++ {
		t[c] = true
	}
	t['"'], t['\\'] = true, true
	return t
}()

func isHex(c byte) bool {
	return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F')
}

// SkipNumber validates the number that starts at data[i] and returns the
// index after it.
func SkipNumber(data []byte, i int) (int, bool) {
	if i >= len(data) {
		return i, false
	}
	if data[i] == '-' {
		i++
	}
	switch {
	case i >= len(data):
		return i, false
	case data[i] == '0':
		i++
	case data[i] >= '1' && data[i] <= '9':
		i = skipDigits(data, i+1)
	default:
		return i, false
	}
	if i < len(data) && data[i] == '.' {
		j := skipDigits(data, i+1)
		if j == i+1 {
			return j, false
		}
		i = j
	}
	if i < len(data) && (data[i] == 'e' || data[i] == 'E') {
		i++
		if i < len(data) && (data[i] == '+' || data[i] == '-') {
			i++
		}
		j := skipDigits(data, i)
		if j == i {
			return j, false
		}
		i = j
	}
	return i, true
}

func skipDigits(data []byte, i int) int {
	for i < len(data) && data[i] >= '0' && data[i] <= '9' {
		i++
	}
	return i
}

// AppendUnquoted appends the value of a JSON string — s is its bytes
// between the quotes, already validated (SkipString) — decoded exactly as
// encoding/json decodes it: escapes, surrogate pairs, and U+FFFD for
// invalid UTF-8 and unpaired surrogates.
func AppendUnquoted(b, s []byte) []byte {
	for r := 0; r < len(s); {
		switch c := s[r]; {
		case c == '\\':
			switch e := s[r+1]; e {
			case 'b':
				b = append(b, '\b')
			case 'f':
				b = append(b, '\f')
			case 'n':
				b = append(b, '\n')
			case 'r':
				b = append(b, '\r')
			case 't':
				b = append(b, '\t')
			case 'u':
				rr := getu4(s[r:])
				r += 6
				if utf16.IsSurrogate(rr) {
					if dec := utf16.DecodeRune(rr, getu4(s[r:])); dec != unicode.ReplacementChar {
						b = utf8.AppendRune(b, dec)
						r += 6
						continue
					}
					rr = unicode.ReplacementChar
				}
				b = utf8.AppendRune(b, rr)
				continue
			default: // '"', '\\', '/'
				b = append(b, e)
			}
			r += 2
		case c < utf8.RuneSelf:
			b = append(b, c)
			r++
		default:
			rr, size := utf8.DecodeRune(s[r:])
			b = utf8.AppendRune(b, rr)
			r += size
		}
	}
	return b
}

// getu4 decodes the \uXXXX escape at the start of s, or returns -1.
func getu4(s []byte) rune {
	if len(s) < 6 || s[0] != '\\' || s[1] != 'u' {
		return -1
	}
	var r rune
	for _, c := range s[2:6] {
		switch {
		case c >= '0' && c <= '9':
			c -= '0'
		case c >= 'a' && c <= 'f':
			c = c - 'a' + 10
		case c >= 'A' && c <= 'F':
			c = c - 'A' + 10
		default:
			return -1
		}
		r = r*16 + rune(c)
	}
	return r
}
