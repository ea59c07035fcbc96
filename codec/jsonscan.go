package codec

import "bytes"

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
