package jsonscan

import (
	"bytes"
	"fmt"
	"slices"
	"unicode/utf8"
)

// AppendCanonical appends to dst the JSON value src with every object's
// members sorted by key: exactly what encoding/json writes after decoding
// src into an any with UseNumber, without building that any. Numbers are
// copied verbatim (as a json.Number is written), white space is dropped, of
// duplicate keys the last is kept (as a decoded map keeps it), and strings
// are re-encoded as encoding/json encodes them wherever that changes them.
// Invalid JSON is an error naming the offset.
func AppendCanonical(dst, src []byte) ([]byte, error) {
	c := canonicalizer{src: src}
	out, i, err := c.value(dst, SkipWS(src, 0), 0)
	if err != nil {
		return nil, err
	}
	if i = SkipWS(src, i); i != len(src) {
		return nil, invalid(i)
	}
	return out, nil
}

func invalid(i int) error { return fmt.Errorf("jsonscan: invalid JSON at offset %d", i) }

type canonicalizer struct {
	src     []byte
	members []member // a stack: each open object's members
	scratch []byte   // an object's members while they are reordered
	strbuf  []byte   // a string's decoded value
}

// member is one written member of an object: its decoded key and where
// `"key":value` lies in the output.
type member struct {
	key        []byte // in src, or a copy where it had escapes
	start, end int
}

// value appends the canonical form of the value at src[i] and returns the
// index after it.
func (c *canonicalizer) value(dst []byte, i, depth int) ([]byte, int, error) {
	if i >= len(c.src) {
		return nil, i, invalid(i)
	}
	switch ch := c.src[i]; {
	case ch == '{':
		if depth >= MaxNesting {
			return nil, i, invalid(i)
		}
		return c.object(dst, i, depth)
	case ch == '[':
		if depth >= MaxNesting {
			return nil, i, invalid(i)
		}
		return c.array(dst, i, depth)
	case ch == '"':
		dst, _, end, err := c.str(dst, i, false)
		return dst, end, err
	case ch == '-' || ('0' <= ch && ch <= '9'):
		end, ok := SkipNumber(c.src, i)
		if !ok {
			return nil, end, invalid(end)
		}
		return append(dst, c.src[i:end]...), end, nil
	default:
		for _, lit := range [...]string{"true", "false", "null"} {
			if end, ok := SkipLiteral(c.src, i, lit); ok {
				return append(dst, lit...), end, nil
			}
		}
		return nil, i, invalid(i)
	}
}

func (c *canonicalizer) object(dst []byte, i, depth int) ([]byte, int, error) {
	dst = append(dst, '{')
	start := len(dst)
	base := len(c.members)
	defer func() { c.members = c.members[:base] }()
	if i = SkipWS(c.src, i+1); i < len(c.src) && c.src[i] == '}' {
		return append(dst, '}'), i + 1, nil
	}
	for {
		if i >= len(c.src) || c.src[i] != '"' {
			return nil, i, invalid(i)
		}
		if len(c.members) > base {
			dst = append(dst, ',')
		}
		m := member{start: len(dst)}
		var err error
		if dst, m.key, i, err = c.str(dst, i, true); err != nil {
			return nil, i, err
		}
		if i = SkipWS(c.src, i); i >= len(c.src) || c.src[i] != ':' {
			return nil, i, invalid(i)
		}
		dst = append(dst, ':')
		if dst, i, err = c.value(dst, SkipWS(c.src, i+1), depth+1); err != nil {
			return nil, i, err
		}
		m.end = len(dst)
		c.members = append(c.members, m)
		if i = SkipWS(c.src, i); i >= len(c.src) {
			return nil, i, invalid(i)
		}
		if c.src[i] == '}' {
			i++
			break
		}
		if c.src[i] != ',' {
			return nil, i, invalid(i)
		}
		i = SkipWS(c.src, i+1)
	}
	members := c.members[base:]
	if inOrder(members) {
		return append(dst, '}'), i, nil
	}
	// Order the members by key, the last of equal keys winning, and write
	// them again over where they were.
	slices.SortStableFunc(members, func(a, b member) int { return bytes.Compare(a.key, b.key) })
	c.scratch = append(c.scratch[:0], dst[start:]...)
	dst = dst[:start]
	for j, m := range members {
		if j+1 < len(members) && bytes.Equal(members[j+1].key, m.key) {
			continue
		}
		if len(dst) > start {
			dst = append(dst, ',')
		}
		dst = append(dst, c.scratch[m.start-start:m.end-start]...)
	}
	return append(dst, '}'), i, nil
}

// inOrder reports whether members are already in strictly increasing key
// order (as a Go struct's rarely are), so the output stands as it is.
func inOrder(members []member) bool {
	for j := 1; j < len(members); j++ {
		if bytes.Compare(members[j-1].key, members[j].key) >= 0 {
			return false
		}
	}
	return true
}

func (c *canonicalizer) array(dst []byte, i, depth int) ([]byte, int, error) {
	dst = append(dst, '[')
	if i = SkipWS(c.src, i+1); i < len(c.src) && c.src[i] == ']' {
		return append(dst, ']'), i + 1, nil
	}
	for first := true; ; first = false {
		if !first {
			dst = append(dst, ',')
		}
		var err error
		if dst, i, err = c.value(dst, i, depth+1); err != nil {
			return nil, i, err
		}
		if i = SkipWS(c.src, i); i >= len(c.src) {
			return nil, i, invalid(i)
		}
		switch c.src[i] {
		case ']':
			return append(dst, ']'), i + 1, nil
		case ',':
			i = SkipWS(c.src, i+1)
		default:
			return nil, i, invalid(i)
		}
	}
}

// str appends the string at src[i] as encoding/json writes its decoded
// value, and returns the index after the string and, for a key (kept until
// its object is sorted), that value.
func (c *canonicalizer) str(dst []byte, i int, key bool) (out, value []byte, end int, err error) {
	end, plain, ok := SkipString(c.src, i)
	if !ok {
		return nil, nil, end, invalid(end)
	}
	token := c.src[i:end]
	inner := token[1 : len(token)-1]
	if plain && unchanged(inner) {
		return append(dst, token...), inner, end, nil
	}
	c.strbuf = AppendUnquoted(c.strbuf[:0], inner)
	if key {
		value = bytes.Clone(c.strbuf)
	}
	return AppendQuoted(dst, c.strbuf), value, end, nil
}

// unchanged reports whether encoding/json writes the unescaped string s as
// it stands: printable ASCII without the characters it escapes for HTML.
func unchanged(s []byte) bool {
	for _, ch := range s {
		if ch < 0x20 || ch >= utf8.RuneSelf || ch == '<' || ch == '>' || ch == '&' {
			return false
		}
	}
	return true
}

// AppendQuoted appends s as encoding/json encodes a string: HTML-safe, with
// its short escapes, U+2028 and U+2029 escaped, and invalid UTF-8 as
// U+FFFD.
func AppendQuoted(dst, s []byte) []byte {
	const hex = "0123456789abcdef"
	dst = append(dst, '"')
	for i := 0; i < len(s); {
		ch := s[i]
		if ch < utf8.RuneSelf {
			i++
			switch {
			case ch >= 0x20 && ch != '"' && ch != '\\' && ch != '<' && ch != '>' && ch != '&':
				dst = append(dst, ch)
			case ch == '"' || ch == '\\':
				dst = append(dst, '\\', ch)
			case ch == '\b':
				dst = append(dst, '\\', 'b')
			case ch == '\f':
				dst = append(dst, '\\', 'f')
			case ch == '\n':
				dst = append(dst, '\\', 'n')
			case ch == '\r':
				dst = append(dst, '\\', 'r')
			case ch == '\t':
				dst = append(dst, '\\', 't')
			default:
				dst = append(dst, '\\', 'u', '0', '0', hex[ch>>4], hex[ch&0xF])
			}
			continue
		}
		r, size := utf8.DecodeRune(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			dst = append(dst, `\ufffd`...)
		case r == '\u2028' || r == '\u2029':
			dst = append(dst, '\\', 'u', '2', '0', '2', hex[r&0xF])
		default:
			dst = append(dst, s[i:i+size]...)
		}
		i += size
	}
	return append(dst, '"')
}
