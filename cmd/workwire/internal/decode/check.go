package decode

import (
	"errors"
	"fmt"
	"strings"

	"github.com/workwire/sdk-go/codec"
	"github.com/workwire/sdk-go/generic"
	"github.com/workwire/sdk-go/generic/types"
	"github.com/workwire/sdk-go/options/grpc/protocol"
)

// check decodes evt as workwire's clients do before a handler sees it,
// with the SDK's own decoders: the header (type and extensions) of every
// event, then a work's spec or status with its codec (manifestbundles or
// manifests, through generic.Decode), a resync request's list of versions
// or hashes. Of another
// data type only the header is checked: its codec is the program's. A
// gRPC heartbeat is taken as it is. The error is the decoder's, with the
// place in the input of the attribute it is about, when it knows it.
func check(evt *event) error {
	if evt.Type() == protocol.HeartbeatType {
		return nil
	}
	h, err := types.ParseHeader(evt.Event)
	if err != nil {
		return evt.locate(&generic.DecodeError{EventID: evt.ID(), EventType: evt.Type(), Err: err})
	}
	var payload error // of a resync request
	switch dt := h.Type.DataType; {
	case h.Type.Action == types.ResyncRequest && h.Type.SubResource == types.SubResourceSpec:
		_, payload = types.DecodeResourceVersionList(evt.Data())
	case h.Type.Action == types.ResyncRequest:
		_, payload = types.DecodeStatusHashList(evt.Data())
	case dt == codec.ManifestBundlesDataType || dt == codec.ManifestBundlesDataType.Singular():
		_, err = generic.Decode(codec.NewManifestBundleCodec(), evt.Event)
	case dt == codec.ManifestsDataType || dt == codec.ManifestsDataType.Singular():
		_, err = generic.Decode(codec.NewManifestCodec(), evt.Event)
	}
	if payload != nil {
		return fmt.Errorf("%s%w", evt.where("data"), &generic.DecodeError{EventID: evt.ID(), EventType: evt.Type(), Err: fmt.Errorf("data: %w", payload)})
	}
	return evt.locate(err)
}

// locate returns err with the place of the attribute it is about, if the
// input told where that was: an extension (types.ExtensionError, or a
// codec.Error's field), the type, or the data (a codec.Error's field).
func (e *event) locate(err error) error {
	if err == nil {
		return nil
	}
	name := ""
	var ext *types.ExtensionError
	var cerr *codec.Error
	switch {
	case errors.As(err, &cerr) && strings.HasPrefix(cerr.Field, "extension "):
		name = strings.Trim(strings.TrimPrefix(cerr.Field, "extension "), `"`)
	case errors.As(err, &cerr) && strings.HasPrefix(cerr.Field, "data"):
		name = "data"
	case errors.As(err, &ext):
		name = ext.Name
	case errors.Is(err, types.ErrInvalidType) || errors.Is(err, codec.ErrUnsupportedType):
		name = "type"
	}
	if w := e.where(name); w != "" {
		return fmt.Errorf("%s%w", w, err)
	}
	return err
}
