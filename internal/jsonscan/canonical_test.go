package jsonscan

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// viaAny is the definition AppendCanonical implements: decode into an any
// with UseNumber, encode again.
func viaAny(data []byte) ([]byte, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	if dec.More() {
		return nil, errTrailing
	}
	return json.Marshal(v)
}

var errTrailing = errorString("data after the value")

type errorString string

func (e errorString) Error() string { return string(e) }

var canonicalCases = []string{
	`{}`, `[]`, `null`, `true`, `false`, `0`, `-0`, `1.50`, `-12e+3`, `1E-2`, `""`,
	`{"b":1,"a":2}`,
	`{"a":1,"a":2,"b":{"y":[1,{"d":null,"c":true}],"x":"s"}}`,
	` { "z" : [ 1 , 2 ] , "y" : { } } `,
	`{"k":"<tag> & \u003c \u0041 \n \t \" \\ \/ é ☃ \ud83d\ude00 \u2028"}`,
	`{"\u0062":1,"a":2,"\u0061":3}`,
	`{"é":1,"e":2,"ee":3,"":4}`,
	`["\ud800", "x\u00e9"]`,
	`{"conditions":[{"type":"Applied","status":"True","lastTransitionTime":"2026-11-23T10:00:00Z"}]}`,
}

func TestCanonicalJSONMatchesTheDefinition(t *testing.T) {
	t.Parallel()
	for _, in := range canonicalCases {
		want, err := viaAny([]byte(in))
		if err != nil {
			t.Fatalf("%s: %v", in, err)
		}
		got, err := AppendCanonical(nil, []byte(in))
		if err != nil {
			t.Errorf("AppendCanonical(%s): %v", in, err)
			continue
		}
		if !bytes.Equal(got, want) {
			t.Errorf("AppendCanonical(%s)\n got %s\nwant %s", in, got, want)
		}
	}
}

func TestCanonicalJSONRejectsMalformedInput(t *testing.T) {
	t.Parallel()
	for _, in := range []string{``, `{`, `{"a"}`, `{"a":}`, `{"a":1,}`, `[1,]`, `[1 2]`, `"abc`, `01x`, `-`, `1.`, `1e`, `tru`, `{} {}`, `{1:2}`, strings.Repeat("[", MaxNesting+2)} {
		if _, err := AppendCanonical(nil, []byte(in)); err == nil {
			t.Errorf("AppendCanonical(%q): no error", in)
		}
	}
}

// FuzzCanonicalJSON checks AppendCanonical against its definition on any
// input: where decoding into an any succeeds, both give the same bytes.
func FuzzCanonicalJSON(f *testing.F) {
	for _, c := range canonicalCases {
		f.Add([]byte(c))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		want, err := viaAny(data)
		if err != nil || !json.Valid(data) {
			return
		}
		got, err := AppendCanonical(nil, data)
		if err != nil {
			t.Fatalf("AppendCanonical(%q): %v; the definition gives %s", data, err, want)
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("AppendCanonical(%q)\n got %s\nwant %s", data, got, want)
		}
	})
}

// FuzzAppendQuoted checks AppendQuoted against json.Marshal of a string.
func FuzzAppendQuoted(f *testing.F) {
	for _, s := range []string{"", "plain", `<a href="x">&amp;</a>`, "\x00\x01\b\f\n\r\t\x7f", "é☃\U0001F600", "\u2028\u2029", "\xff\xfe bad utf-8"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		want, err := json.Marshal(s)
		if err != nil {
			t.Fatal(err)
		}
		if got := AppendQuoted(nil, []byte(s)); !bytes.Equal(got, want) {
			t.Fatalf("AppendQuoted(%q) = %s, want %s", s, got, want)
		}
	})
}
