package generic

import (
	"context"
	"testing"

	cloudevents "github.com/cloudevents/sdk-go/v2/event"
	"go.opentelemetry.io/otel"

	"github.com/workwire/sdk-go/generic/types"
)

// The spans of one send and one receipt with the default, recording-nothing
// TracerProvider: the cost every event pays for tracing being possible.
func BenchmarkSpansWithoutATracerProvider(b *testing.B) {
	c := &core[Object]{side: SideSource, tracer: otel.GetTracerProvider().Tracer(TracerName)}
	et := types.EventType{SubResource: types.SubResourceSpec, Action: types.CreateRequest}
	evt := cloudevents.New()
	b.ReportAllocs()
	for b.Loop() {
		_, s := c.startSend(context.Background(), et, &evt)
		endSpan(s, nil)
		_, s = c.startProcess(context.Background(), et, &evt)
		endSpan(s, nil)
	}
}
