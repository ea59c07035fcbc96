package codec

import (
	"bytes"
	"encoding/json"
	"math"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/workwire/sdk-go/internal/jsonscan"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	workv1 "open-cluster-management.io/api/work/v1"
)

// The unmarshal functions decode a payload or the metadata extension with
// the fast parser below and fall back to encoding/json, which gives the same
// result, for whatever the fast parser does not handle, including every
// error. The parser reads its input once, validating as it goes.
//
// The fast decoders of our own types (payloads, wireMeta) skip unknown keys
// as encoding/json does. Those of workv1 and metav1 types give up on any key
// they do not know, so a field added upstream is never lost: it takes the
// slow path until the fast decoder learns it (TestFastDecodersKnowEveryField
// says when). Duplicate keys (encoding/json merges them), escaped keys and
// keys encoding/json would match case-insensitively take the slow path too.

// unmarshal decodes data into v with fast, or with encoding/json where fast
// gives up.
func unmarshal[T any](data []byte, v *T, fast func(*parser, *T) bool) error {
	if parse(data, func(p *parser) bool { return fast(p, v) }) {
		return nil
	}
	var zero T
	*v = zero
	return json.Unmarshal(data, v)
}

// parser is a cursor over JSON input. Every read validates what it reads.
type parser struct {
	data  []byte
	i     int
	depth int // arrays and objects open around the cursor
}

// parse runs top on data, which must hold one JSON value and nothing else.
func parse(data []byte, top func(*parser) bool) bool {
	p := parser{data: data}
	if !top(&p) {
		return false
	}
	return jsonscan.SkipWS(data, p.i) == len(data)
}

// peek skips whitespace and returns the next byte (0 at the end).
func (p *parser) peek() byte {
	p.i = jsonscan.SkipWS(p.data, p.i)
	if p.i < len(p.data) {
		return p.data[p.i]
	}
	return 0
}

// null consumes a null, if that comes next.
func (p *parser) null() bool {
	if p.peek() != 'n' {
		return false
	}
	end, ok := jsonscan.SkipLiteral(p.data, p.i, "null")
	p.i = end
	return ok
}

// value consumes the next value and returns its bytes.
func (p *parser) value() ([]byte, bool) {
	start := jsonscan.SkipWS(p.data, p.i)
	end, ok := jsonscan.SkipValue(p.data, start, p.depth)
	p.i = end
	return p.data[start:end], ok
}

// open consumes the opening bracket c of an array or object.
func (p *parser) open(c byte) bool {
	if p.peek() != c || p.depth >= jsonscan.MaxNesting {
		return false
	}
	p.i++
	p.depth++
	return true
}

// next is called after an element of an array or object: it consumes the
// ',' before the next (true) or the closing bracket (more false).
func (p *parser) next(closing byte) (more, ok bool) {
	switch p.peek() {
	case ',':
		p.i++
		return true, true
	case closing:
		p.i++
		p.depth--
		return false, true
	}
	return false, false
}

// object consumes an object (null: no members), calling field with the
// cursor at each member's value, which field must consume.
func (p *parser) object(field func(key []byte) bool) bool {
	if p.null() {
		return true
	}
	if !p.open('{') {
		return false
	}
	if p.peek() == '}' {
		p.i++
		p.depth--
		return true
	}
	var seen [16][]byte
	n := 0
	for {
		if p.peek() != '"' {
			return false
		}
		end, plain, ok := jsonscan.SkipString(p.data, p.i)
		if !ok || !plain || n == len(seen) {
			return false
		}
		key := p.data[p.i+1 : end-1]
		for _, k := range seen[:n] {
			if bytes.Equal(k, key) {
				return false
			}
		}
		seen[n], n = key, n+1
		p.i = end
		if p.peek() != ':' {
			return false
		}
		p.i++
		if !field(key) {
			return false
		}
		more, ok := p.next('}')
		if !ok {
			return false
		}
		if !more {
			return true
		}
	}
}

// skip consumes a value of a key the decoder ignores.
func (p *parser) skip() bool {
	_, ok := p.value()
	return ok
}

// parseList consumes an array (null: nil) with elem.
func parseList[T any](p *parser, dst *[]T, elem func(*parser, *T) bool) bool {
	if p.null() {
		*dst = nil
		return true
	}
	if !p.open('[') {
		return false
	}
	out := []T{} // [] is an empty list, not nil, as with encoding/json
	if p.peek() == ']' {
		p.i++
		p.depth--
		*dst = out
		return true
	}
	for {
		var x T
		if !elem(p, &x) {
			return false
		}
		out = append(out, x)
		more, ok := p.next(']')
		if !ok {
			return false
		}
		if !more {
			*dst = out
			return true
		}
	}
}

// parsePtr consumes a value (null: nil) into a new T.
func parsePtr[T any](p *parser, dst **T, dec func(*parser, *T) bool) bool {
	if p.null() {
		*dst = nil
		return true
	}
	x := new(T)
	if !dec(p, x) {
		return false
	}
	*dst = x
	return true
}

// parseStr consumes a string; null leaves dst alone, as with encoding/json.
func parseStr[S ~string](p *parser, dst *S) bool {
	if p.null() {
		return true
	}
	s, ok := p.str()
	*dst = S(s)
	return ok
}

// str consumes a string and returns its value as encoding/json decodes it.
func (p *parser) str() (string, bool) {
	if p.peek() != '"' {
		return "", false
	}
	end, plain, ok := jsonscan.SkipString(p.data, p.i)
	if !ok {
		return "", false
	}
	raw := p.data[p.i+1 : end-1]
	p.i = end
	if plain && utf8.Valid(raw) {
		return string(raw), true
	}
	return unquote(raw), true
}

func parseBool(p *parser, dst *bool) bool {
	switch p.peek() {
	case 't':
		end, ok := jsonscan.SkipLiteral(p.data, p.i, "true")
		p.i, *dst = end, true
		return ok
	case 'f':
		end, ok := jsonscan.SkipLiteral(p.data, p.i, "false")
		p.i, *dst = end, false
		return ok
	}
	return p.null()
}

// parseInt64 consumes an integer as encoding/json decodes one (ParseInt of
// the literal); null leaves dst alone.
func parseInt64(p *parser, dst *int64) bool {
	if p.null() {
		return true
	}
	c := p.peek()
	if c != '-' && (c < '0' || c > '9') {
		return false
	}
	start := p.i
	end, ok := jsonscan.SkipNumber(p.data, start)
	if !ok {
		return false
	}
	p.i = end
	n, err := strconv.ParseInt(string(p.data[start:end]), 10, 64)
	if err != nil {
		return false
	}
	*dst = n
	return true
}

// parseTime consumes a metav1.Time as its UnmarshalJSON reads one: null is
// the zero time, a string is parsed as RFC 3339 in the local time zone.
func parseTime(p *parser, t *metav1.Time) bool {
	if p.null() {
		t.Time = time.Time{}
		return true
	}
	s, ok := p.str()
	if !ok {
		return false
	}
	pt, err := time.Parse(time.RFC3339, s)
	if err != nil {
		return false
	}
	t.Time = pt.Local()
	return true
}

// unquote decodes the bytes of a JSON string between its quotes, already
// validated, exactly as encoding/json does.
func unquote(s []byte) string {
	return string(jsonscan.AppendUnquoted(make([]byte, 0, len(s)+utf8.UTFMax), s))
}

// rawExtension is what runtime.RawExtension.UnmarshalJSON makes of raw:
// nothing for null, else the bytes.
func rawExtension(raw []byte) runtime.RawExtension {
	if isNull(raw) {
		return runtime.RawExtension{}
	}
	return runtime.RawExtension{Raw: raw}
}

// parseRawList consumes an array (null: nil) of manifests. The manifests
// share one copy of the array.
func parseRawList(p *parser, dst *[]workv1.Manifest) bool {
	if p.null() {
		*dst = nil
		return true
	}
	start := p.i
	if !p.open('[') {
		return false
	}
	var spans [][2]int // elements, as offsets from start
	if p.peek() == ']' {
		p.i++
		p.depth--
	} else {
		for {
			from := jsonscan.SkipWS(p.data, p.i)
			raw, ok := p.value()
			if !ok {
				return false
			}
			spans = append(spans, [2]int{from - start, from - start + len(raw)})
			more, ok := p.next(']')
			if !ok {
				return false
			}
			if !more {
				break
			}
		}
	}
	buf := bytes.Clone(p.data[start:p.i])
	out := make([]workv1.Manifest, len(spans))
	for k, s := range spans {
		out[k].RawExtension = rawExtension(buf[s[0]:s[1]:s[1]])
	}
	*dst = out
	return true
}

// Our types: unknown keys are skipped.

func fastManifestBundle(p *parser, b *ManifestBundle) bool {
	return p.object(func(key []byte) bool {
		switch string(key) {
		case "manifests":
			return parseRawList(p, &b.Manifests)
		case "deleteOption":
			return parsePtr(p, &b.DeleteOption, fastDeleteOption)
		case "manifestConfigs":
			return parseList(p, &b.ManifestConfigs, fastConfigOption)
		case "executor":
			raw, ok := p.value() // rare: encoding/json
			return ok && json.Unmarshal(raw, &b.Executor) == nil
		}
		return !folds(key, "manifests", "deleteOption", "manifestConfigs", "executor") && p.skip()
	})
}

func fastManifest(p *parser, m *Manifest) bool {
	return p.object(func(key []byte) bool {
		switch string(key) {
		case "manifest":
			raw, ok := p.value()
			m.Manifest = rawExtension(bytes.Clone(raw))
			return ok
		case "deleteOption":
			return parsePtr(p, &m.DeleteOption, fastDeleteOption)
		case "configOption":
			return parsePtr(p, &m.ConfigOption, fastConfigOption)
		}
		return !folds(key, "manifest", "deleteOption", "configOption") && p.skip()
	})
}

func fastWireMeta(p *parser, w *wireMeta) bool {
	return p.object(func(key []byte) bool {
		switch string(key) {
		case "name":
			return parseStr(p, &w.Name)
		case "namespace":
			return parseStr(p, &w.Namespace)
		case "uid":
			return parseStr(p, &w.UID)
		case "generation":
			return parseInt64(p, &w.Generation)
		case "creationTimestamp":
			return parseTime(p, &w.CreationTimestamp)
		case "deletionTimestamp":
			return parsePtr(p, &w.DeletionTimestamp, parseTime)
		case "labels":
			return parseStringMap(p, &w.Labels)
		case "annotations":
			return parseStringMap(p, &w.Annotations)
		}
		return !folds(key, "name", "namespace", "uid", "generation", "creationTimestamp", "deletionTimestamp", "labels", "annotations") && p.skip()
	})
}

// parseStringMap consumes an object of strings (null: nil). Duplicate keys
// take the slow path (encoding/json keeps the last; so would we, but the
// object walker refuses them everywhere).
func parseStringMap(p *parser, dst *map[string]string) bool {
	if p.null() {
		*dst = nil
		return true
	}
	out := make(map[string]string)
	ok := p.object(func(key []byte) bool {
		if !utf8.Valid(key) || p.peek() != '"' {
			return false // keys to repair and null values: encoding/json's
		}
		s, ok := p.str()
		out[string(key)] = s
		return ok
	})
	*dst = out
	return ok
}

func fastBundleStatus(p *parser, s *ManifestBundleStatus) bool {
	return p.object(func(key []byte) bool {
		switch string(key) {
		case "conditions":
			return parseList(p, &s.Conditions, fastCondition)
		case "resourceStatus":
			// The list form; the object forms take the slow path
			// (ResourceStatus.UnmarshalJSON).
			return parseList(p, (*[]workv1.ManifestCondition)(&s.ResourceStatus), fastManifestCondition)
		}
		return !folds(key, "conditions", "resourceStatus") && p.skip()
	})
}

func fastManifestStatus(p *parser, s *ManifestStatus) bool {
	return p.object(func(key []byte) bool {
		switch string(key) {
		case "reconcileStatus":
			return p.object(func(key []byte) bool {
				if string(key) == "conditions" {
					return parseList(p, &s.ReconcileStatus.Conditions, fastCondition)
				}
				return !folds(key, "conditions") && p.skip()
			})
		case "resourceMeta":
			return fastResourceMeta(p, &s.ResourceMeta)
		case "conditions":
			return parseList(p, &s.Conditions, fastCondition)
		case "statusFeedback":
			return fastFeedbackResult(p, &s.StatusFeedback)
		case "contentStatus":
			raw, ok := p.value()
			s.ContentStatus = bytes.Clone(raw) // as json.RawMessage.UnmarshalJSON, null included
			return ok
		}
		return !folds(key, "reconcileStatus", "resourceMeta", "conditions", "statusFeedback", "contentStatus") && p.skip()
	})
}

// workv1 and metav1 types: every key they know, nothing else.

func fastDeleteOption(p *parser, d *workv1.DeleteOption) bool {
	return p.object(func(key []byte) bool {
		switch string(key) {
		case "propagationPolicy":
			return parseStr(p, &d.PropagationPolicy)
		case "selectivelyOrphans":
			return parsePtr(p, &d.SelectivelyOrphan, func(p *parser, s *workv1.SelectivelyOrphan) bool {
				return p.object(func(key []byte) bool {
					return string(key) == "orphaningRules" && parseList(p, &s.OrphaningRules, func(p *parser, r *workv1.OrphaningRule) bool {
						return fastResourceIdentifier(p, (*workv1.ResourceIdentifier)(r))
					})
				})
			})
		case "ttlSecondsAfterFinished":
			return parsePtr(p, &d.TTLSecondsAfterFinished, parseInt64)
		}
		return false
	})
}

func fastResourceIdentifier(p *parser, r *workv1.ResourceIdentifier) bool {
	return p.object(func(key []byte) bool {
		switch string(key) {
		case "group":
			return parseStr(p, &r.Group)
		case "resource":
			return parseStr(p, &r.Resource)
		case "name":
			return parseStr(p, &r.Name)
		case "namespace":
			return parseStr(p, &r.Namespace)
		}
		return false
	})
}

func fastConfigOption(p *parser, c *workv1.ManifestConfigOption) bool {
	return p.object(func(key []byte) bool {
		switch string(key) {
		case "resourceIdentifier":
			return fastResourceIdentifier(p, &c.ResourceIdentifier)
		case "feedbackRules":
			return parseList(p, &c.FeedbackRules, fastFeedbackRule)
		case "updateStrategy":
			return parsePtr(p, &c.UpdateStrategy, fastUpdateStrategy)
		case "conditionRules":
			return parseList(p, &c.ConditionRules, fastConditionRule)
		case "feedbackScrapeType":
			return parseStr(p, &c.FeedbackScrapeType)
		}
		return false
	})
}

func fastFeedbackRule(p *parser, r *workv1.FeedbackRule) bool {
	return p.object(func(key []byte) bool {
		switch string(key) {
		case "type":
			return parseStr(p, &r.Type)
		case "jsonPaths":
			return parseList(p, &r.JsonPaths, func(p *parser, jp *workv1.JsonPath) bool {
				return p.object(func(key []byte) bool {
					switch string(key) {
					case "name":
						return parseStr(p, &jp.Name)
					case "version":
						return parseStr(p, &jp.Version)
					case "path":
						return parseStr(p, &jp.Path)
					}
					return false
				})
			})
		}
		return false
	})
}

func fastUpdateStrategy(p *parser, u *workv1.UpdateStrategy) bool {
	return p.object(func(key []byte) bool {
		switch string(key) {
		case "type":
			return parseStr(p, &u.Type)
		case "serverSideApply":
			return parsePtr(p, &u.ServerSideApply, func(p *parser, s *workv1.ServerSideApplyConfig) bool {
				return p.object(func(key []byte) bool {
					switch string(key) {
					case "force":
						return parseBool(p, &s.Force)
					case "fieldManager":
						return parseStr(p, &s.FieldManager)
					case "ignoreFields":
						return parseList(p, &s.IgnoreFields, func(p *parser, f *workv1.IgnoreField) bool {
							return p.object(func(key []byte) bool {
								switch string(key) {
								case "condition":
									return parseStr(p, &f.Condition)
								case "jsonPaths":
									return parseList(p, &f.JSONPaths, parseStr[string])
								case "jsonPointers":
									return parseList(p, &f.JSONPointers, parseStr[string])
								case "jqPathExpressions":
									return parseList(p, &f.JQPathExpressions, parseStr[string])
								}
								return false
							})
						})
					}
					return false
				})
			})
		}
		return false
	})
}

func fastConditionRule(p *parser, r *workv1.ConditionRule) bool {
	return p.object(func(key []byte) bool {
		switch string(key) {
		case "condition":
			return parseStr(p, &r.Condition)
		case "type":
			return parseStr(p, &r.Type)
		case "celExpressions":
			return parseList(p, &r.CelExpressions, parseStr[string])
		case "message":
			return parseStr(p, &r.Message)
		case "messageExpression":
			return parseStr(p, &r.MessageExpression)
		}
		return false
	})
}

func fastCondition(p *parser, c *metav1.Condition) bool {
	return p.object(func(key []byte) bool {
		switch string(key) {
		case "type":
			return parseStr(p, &c.Type)
		case "status":
			return parseStr(p, &c.Status)
		case "observedGeneration":
			return parseInt64(p, &c.ObservedGeneration)
		case "lastTransitionTime":
			return parseTime(p, &c.LastTransitionTime)
		case "reason":
			return parseStr(p, &c.Reason)
		case "message":
			return parseStr(p, &c.Message)
		}
		return false
	})
}

func fastManifestCondition(p *parser, c *workv1.ManifestCondition) bool {
	return p.object(func(key []byte) bool {
		switch string(key) {
		case "resourceMeta":
			return fastResourceMeta(p, &c.ResourceMeta)
		case "statusFeedback":
			return fastFeedbackResult(p, &c.StatusFeedbacks)
		case "conditions":
			return parseList(p, &c.Conditions, fastCondition)
		}
		return false
	})
}

func fastResourceMeta(p *parser, r *workv1.ManifestResourceMeta) bool {
	return p.object(func(key []byte) bool {
		switch string(key) {
		case "ordinal":
			n := int64(r.Ordinal)
			if !parseInt64(p, &n) || n < math.MinInt32 || n > math.MaxInt32 {
				return false
			}
			r.Ordinal = int32(n)
			return true
		case "group":
			return parseStr(p, &r.Group)
		case "version":
			return parseStr(p, &r.Version)
		case "kind":
			return parseStr(p, &r.Kind)
		case "resource":
			return parseStr(p, &r.Resource)
		case "name":
			return parseStr(p, &r.Name)
		case "namespace":
			return parseStr(p, &r.Namespace)
		}
		return false
	})
}

func fastFeedbackResult(p *parser, r *workv1.StatusFeedbackResult) bool {
	return p.object(func(key []byte) bool {
		return string(key) == "values" && parseList(p, &r.Values, fastFeedbackValue)
	})
}

func fastFeedbackValue(p *parser, fv *workv1.FeedbackValue) bool {
	return p.object(func(key []byte) bool {
		switch string(key) {
		case "name":
			return parseStr(p, &fv.Name)
		case "fieldValue":
			f := &fv.Value
			return p.object(func(key []byte) bool {
				switch string(key) {
				case "type":
					return parseStr(p, &f.Type)
				case "integer":
					return parsePtr(p, &f.Integer, parseInt64)
				case "string":
					return parsePtr(p, &f.String, parseStr[string])
				case "boolean":
					return parsePtr(p, &f.Boolean, parseBool)
				case "jsonRaw":
					return parsePtr(p, &f.JsonRaw, parseStr[string])
				}
				return false
			})
		}
		return false
	})
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
