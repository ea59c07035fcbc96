package types

import (
	"strconv"
	"unicode/utf8"

	"github.com/workwire/sdk-go/internal/jsonscan"
)

// The fast paths below decode resync payloads in the shape peers send them
// — the list's one key and each entry's keys spelled exactly, strings
// without escapes, versions as plain integers — in one pass over the bytes.
// Anything else (other keys, which encoding/json might match case
// insensitively; escapes; nulls; a missing resourceID) makes them give up,
// and encoding/json decodes the payload as the reference, with its errors.
// A status resync goes to every agent, so each agent decodes every hash a
// source holds: this is the hot path of a fleet's resync.

// fastStatusHashes decodes {"statusHashes":[{"resourceID":…,"statusHash":…},…]}.
func fastStatusHashes(data []byte) (StatusHashList, bool) {
	var l StatusHashList
	ok := fastList(data, "statusHashes", func(key, value []byte, isNumber bool, e *entry) bool {
		if isNumber {
			return false // both are strings
		}
		switch string(key) {
		case "resourceID":
			e.id = value
		case "statusHash":
			e.hash = value
		default:
			return false
		}
		return true
	}, func(e *entry) bool {
		if len(e.id) == 0 {
			return false
		}
		l.StatusHashes = append(l.StatusHashes, StatusHash{ResourceID: string(e.id), StatusHash: string(e.hash)})
		return true
	})
	return l, ok
}

// fastResourceVersions decodes
// {"resourceVersions":[{"resourceID":…,"resourceVersion":N or "N"(,"originalSource":…)},…]}.
func fastResourceVersions(data []byte) (ResourceVersionList, bool) {
	var l ResourceVersionList
	ok := fastList(data, "resourceVersions", func(key, value []byte, isNumber bool, e *entry) bool {
		switch string(key) {
		case "resourceID":
			if isNumber {
				return false
			}
			e.id = value
		case "resourceVersion":
			e.version = value
		case "originalSource":
			if isNumber {
				return false
			}
			e.source = value
		default:
			return false
		}
		return true
	}, func(e *entry) bool {
		if len(e.id) == 0 || e.version == nil {
			return false
		}
		v, err := strconv.ParseInt(string(e.version), 10, 64)
		if err != nil {
			return false
		}
		l.ResourceVersions = append(l.ResourceVersions, ResourceVersion{ResourceID: string(e.id), ResourceVersion: v, OriginalSource: string(e.source)})
		return true
	})
	return l, ok
}

// entry is one list entry's values, as they stand in the payload.
type entry struct {
	id, hash, version, source []byte
}

// fastList walks {"<name>":[{…},…]}, handing each member of each entry to
// field (a string's bytes between its quotes, or a number's, and which of
// the two it was) and each whole
// entry to done. It reports false as soon as anything is outside the shape.
func fastList(data []byte, name string, field func(key, value []byte, isNumber bool, e *entry) bool, done func(*entry) bool) bool {
	i := jsonscan.SkipWS(data, 0)
	if !expect(data, &i, '{') {
		return false
	}
	key, ok := plainString(data, &i)
	if !ok || string(key) != name || !expect(data, &i, ':') || !expect(data, &i, '[') {
		return false
	}
	if !expect(data, &i, ']') {
		var e entry // one for all entries: it escapes to field and done
		for {
			if !expect(data, &i, '{') {
				return false
			}
			e = entry{}
			if !expect(data, &i, '}') {
				for {
					key, ok := plainString(data, &i)
					if !ok || !expect(data, &i, ':') {
						return false
					}
					value, isNumber, ok := scalar(data, &i)
					if !ok {
						return false
					}
					if !field(key, value, isNumber, &e) {
						return false
					}
					if expect(data, &i, '}') {
						break
					}
					if !expect(data, &i, ',') {
						return false
					}
				}
			}
			if !done(&e) {
				return false
			}
			if expect(data, &i, ']') {
				break
			}
			if !expect(data, &i, ',') {
				return false
			}
		}
	}
	return expect(data, &i, '}') && jsonscan.SkipWS(data, i) == len(data)
}

// expect consumes c, after white space, if it comes next.
func expect(data []byte, i *int, c byte) bool {
	j := jsonscan.SkipWS(data, *i)
	if j < len(data) && data[j] == c {
		*i = j + 1
		return true
	}
	return false
}

// plainString consumes a string without escapes, in valid UTF-8 (which
// encoding/json would repair), and returns its bytes between the quotes.
func plainString(data []byte, i *int) ([]byte, bool) {
	j := jsonscan.SkipWS(data, *i)
	if j >= len(data) || data[j] != '"' {
		return nil, false
	}
	end, plain, ok := jsonscan.SkipString(data, j)
	if !ok || !plain || !utf8.Valid(data[j+1:end-1]) {
		return nil, false
	}
	*i = end
	return data[j+1 : end-1], true
}

// scalar consumes a plain string or an integer.
func scalar(data []byte, i *int) (value []byte, isNumber, ok bool) {
	j := jsonscan.SkipWS(data, *i)
	if j < len(data) && data[j] == '"' {
		value, ok = plainString(data, i)
		return value, false, ok
	}
	end, ok := jsonscan.SkipNumber(data, j)
	if !ok {
		return nil, false, false
	}
	for _, c := range data[j:end] {
		if c == '.' || c == 'e' || c == 'E' {
			return nil, false, false
		}
	}
	*i = end
	return data[j:end], true, true
}
