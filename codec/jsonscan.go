package codec

// A small validating JSON scanner, the base of the fast decoders
// (fastdecode.go).
//
// encoding/json reads its input at least twice (checkValid over all of it,
// then the decoding pass, which skips over each json.Unmarshaler value such as
// a manifest's RawExtension once more) with a state machine that makes a
// function call per byte; for a 2 KB Deployment that was most of a spec
// decode. The functions below validate and delimit JSON values in one tight
// pass, accepting exactly what json.Valid accepts (FuzzFastDecoders checks
// that).

import (
	"bytes"
)

// maxNesting is encoding/json's limit on nested arrays and objects.
const maxNesting = 10000

func skipWS(data []byte, i int) int {
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

// validJSON reports whether data is one JSON value, as json.Valid does.
func validJSON(data []byte) bool {
	i, ok := skipValue(data, skipWS(data, 0), 0)
	return ok && skipWS(data, i) == len(data)
}

// skipValue validates the JSON value that starts at data[i] and returns the
// index just after it. depth is the number of arrays and objects around it.
func skipValue(data []byte, i, depth int) (int, bool) {
	if i >= len(data) {
		return i, false
	}
	switch c := data[i]; c {
	case '"':
		end, _, ok := skipString(data, i)
		return end, ok
	case '{':
		if depth >= maxNesting {
			return i, false
		}
		i = skipWS(data, i+1)
		if i < len(data) && data[i] == '}' {
			return i + 1, true
		}
		for {
			if i >= len(data) || data[i] != '"' {
				return i, false
			}
			var ok bool
			if i, _, ok = skipString(data, i); !ok {
				return i, false
			}
			i = skipWS(data, i)
			if i >= len(data) || data[i] != ':' {
				return i, false
			}
			if i, ok = skipValue(data, skipWS(data, i+1), depth+1); !ok {
				return i, false
			}
			i = skipWS(data, i)
			if i >= len(data) {
				return i, false
			}
			switch data[i] {
			case '}':
				return i + 1, true
			case ',':
				i = skipWS(data, i+1)
			default:
				return i, false
			}
		}
	case '[':
		if depth >= maxNesting {
			return i, false
		}
		i = skipWS(data, i+1)
		if i < len(data) && data[i] == ']' {
			return i + 1, true
		}
		for {
			var ok bool
			if i, ok = skipValue(data, i, depth+1); !ok {
				return i, false
			}
			i = skipWS(data, i)
			if i >= len(data) {
				return i, false
			}
			switch data[i] {
			case ']':
				return i + 1, true
			case ',':
				i = skipWS(data, i+1)
			default:
				return i, false
			}
		}
	case 't':
		return skipLiteral(data, i, "true")
	case 'f':
		return skipLiteral(data, i, "false")
	case 'n':
		return skipLiteral(data, i, "null")
	default:
		if c == '-' || (c >= '0' && c <= '9') {
			return skipNumber(data, i)
		}
		return i, false
	}
}

func skipLiteral(data []byte, i int, lit string) (int, bool) {
	if len(data)-i >= len(lit) && string(data[i:i+len(lit)]) == lit {
		return i + len(lit), true
	}
	return i, false
}

// skipString validates the string that starts at data[i] (a '"') and
// returns the index after it, and whether it is plain: no escapes, so its
// bytes between the quotes are its value (after UTF-8 repair).
func skipString(data []byte, i int) (end int, plain, ok bool) {
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

func skipNumber(data []byte, i int) (int, bool) {
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

// folds reports whether key is not one of names but encoding/json would
// still match it to one of them (it matches field names case-insensitively,
// with Unicode folding): the fast paths leave such keys to encoding/json.
func folds(key []byte, names ...string) bool {
	for _, n := range names {
		if bytes.EqualFold(key, []byte(n)) {
			return true
		}
	}
	return false
}

func isNull(v []byte) bool { return string(v) == "null" }
