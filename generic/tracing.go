package generic

import (
	"context"

	cloudevents "github.com/cloudevents/sdk-go/v2/event"
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
	ctx, span := c.tracer.Start(ctx, spanName("send ", et), producer)
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
	ctx, span := c.tracer.Start(ctx, spanName("process ", et), consumer)
	if span.IsRecording() {
		span.SetAttributes(eventAttributes(c, et, evt)...)
	}
	return ctx, span
}

// The span kinds, made once: an option is an interface value.
var (
	producer = trace.WithSpanKind(trace.SpanKindProducer)
	consumer = trace.WithSpanKind(trace.SpanKindConsumer)
)

// spanNames holds the name of every span of the protocol's event types, so
// that naming one, on every send and receipt, allocates nothing.
var spanNames = func() map[spanKey]string {
	m := map[spanKey]string{}
	for _, verb := range []string{"send ", "process "} {
		for _, sub := range []types.SubResource{types.SubResourceSpec, types.SubResourceStatus} {
			for _, a := range []types.Action{types.CreateRequest, types.UpdateRequest, types.DeleteRequest, types.ResyncRequest, types.ResyncResponse} {
				m[spanKey{verb, sub, a}] = verb + string(sub) + "." + string(a)
			}
		}
	}
	return m
}()

type spanKey struct {
	verb string
	sub  types.SubResource
	act  types.Action
}

// spanName is "<verb><subresource>.<action>", such as "send spec.create_request".
func spanName(verb string, et types.EventType) string {
	if n, ok := spanNames[spanKey{verb, et.SubResource, et.Action}]; ok {
		return n
	}
	return verb + string(et.SubResource) + "." + string(et.Action)
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
