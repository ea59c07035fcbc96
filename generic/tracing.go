package generic

import (
	"context"

	cloudevents "github.com/cloudevents/sdk-go/v2"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/workwire/sdk-go/generic/types"
)

// Traces cross the wire in the CloudEvents distributed tracing extension:
// the traceparent and tracestate attributes, in W3C Trace Context format.
// A send is a producer span, child of the caller's; the handling of a
// received event a consumer span, child of the sender's.

// TracerName is the instrumentation name of workwire's spans.
const TracerName = "github.com/workwire/sdk-go"

var traceContext = propagation.TraceContext{}

// eventCarrier reads and writes the tracing extension of a CloudEvent.
type eventCarrier struct{ evt *cloudevents.Event }

func (c eventCarrier) Get(key string) string {
	v, _, _ := types.StringExtension(c.evt, key)
	return v
}

func (c eventCarrier) Set(key, value string) { c.evt.SetExtension(key, value) }

func (c eventCarrier) Keys() []string { return []string{"traceparent", "tracestate"} }

// startSend starts the producer span of sending evt, and writes its
// context into evt.
func (c *core[T]) startSend(ctx context.Context, et types.EventType, evt *cloudevents.Event) (context.Context, trace.Span) {
	ctx, span := c.tracer.Start(ctx, "send "+string(et.SubResource)+"."+string(et.Action), trace.WithSpanKind(trace.SpanKindProducer))
	if span.IsRecording() {
		span.SetAttributes(eventAttributes(c, et, evt)...)
	}
	if span.SpanContext().IsValid() {
		traceContext.Inject(ctx, eventCarrier{evt})
	}
	return ctx, span
}

// startProcess starts the consumer span of handling evt, child of the
// span its sender put in it, if any.
func (c *core[T]) startProcess(ctx context.Context, et types.EventType, evt *cloudevents.Event) (context.Context, trace.Span) {
	if _, ok := evt.Extensions()["traceparent"]; ok {
		ctx = traceContext.Extract(ctx, eventCarrier{evt})
	}
	ctx, span := c.tracer.Start(ctx, "process "+string(et.SubResource)+"."+string(et.Action), trace.WithSpanKind(trace.SpanKindConsumer))
	if span.IsRecording() {
		span.SetAttributes(eventAttributes(c, et, evt)...)
	}
	return ctx, span
}

func eventAttributes[T Object](c *core[T], et types.EventType, evt *cloudevents.Event) []attribute.KeyValue {
	return []attribute.KeyValue{
		attribute.String("workwire.side", string(c.side)),
		attribute.String("cloudevents.event_id", evt.ID()),
		attribute.String("cloudevents.event_type", evt.Type()),
		attribute.String("cloudevents.event_source", evt.Source()),
		attribute.String("workwire.data_type", et.DataType.String()),
	}
}

// endSpan ends span, recording err.
func endSpan(span trace.Span, err error) {
	if err != nil {
		span.RecordError(err)
		span.SetStatus(codes.Error, err.Error())
	}
	span.End()
}
