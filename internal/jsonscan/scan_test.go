package jsonscan

import (
	"bytes"
	"encoding/json"
	"slices"
	"testing"
)

// Members accepts an object exactly where SkipValue does, ends where it
// ends, and reads the members encoding/json reads, in order.
func FuzzMembers(f *testing.F) {
	for _, s := range []string{`{}`, ` { "a" : 1 , "b":[{"c":{}}] } `, `{"a":1,}`, `{"a" 1}`, `{"a":1 "b":2}`, `{`, `{"\u0061":"x","a":"y"}`, `{"a":{"b":}}`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		data := []byte(s)
		i := SkipWS(data, 0)
		if i >= len(data) || data[i] != '{' {
			return
		}
		m := ReadObject(data, i, 0)
		var keys []string
		for m.Next() {
			start, end := m.Value()
			if !Valid(data[start:end]) {
				t.Fatalf("%q: member %q: value %q is not JSON", s, m.Key(), data[start:end])
			}
			keys = append(keys, string(AppendUnquoted(nil, m.Key())))
		}
		end, ok := m.End()
		wantEnd, wantOK := SkipValue(data, i, 0)
		if ok != wantOK || (ok && end != wantEnd) {
			t.Fatalf("%q: Members ends at %d, %t; SkipValue at %d, %t", s, end, ok, wantEnd, wantOK)
		}
		if !ok {
			return
		}
		var want []string
		dec := json.NewDecoder(bytes.NewReader(data[i:end]))
		_, _ = dec.Token() // {
		for dec.More() {
			k, err := dec.Token()
			if err != nil {
				t.Fatal(err)
			}
			want = append(want, k.(string))
			var v json.RawMessage
			if err := dec.Decode(&v); err != nil {
				t.Fatal(err)
			}
		}
		if !slices.Equal(keys, want) {
			t.Fatalf("%q: keys %q, encoding/json reads %q", s, keys, want)
		}
	})
}
