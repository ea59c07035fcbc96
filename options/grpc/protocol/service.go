package protocol

import (
	"context"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/emptypb"
)

// ServiceName is the gRPC service workwire's broker serves and its transport
// calls: OCM's, so that OCM agents and brokers and workwire's talk to each
// other.
const ServiceName = "io.cloudevents.v1.CloudEventService"

// Full method names of the service.
const (
	PublishMethod   = "/" + ServiceName + "/Publish"
	SubscribeMethod = "/" + ServiceName + "/Subscribe"
)

// Response header keys a broker sends when a Subscribe stream starts, once
// the subscription is in place (events published from then on reach it).
const (
	// HeaderSubscriptionID names the subscription. OCM's agents refuse a
	// stream without exactly one.
	HeaderSubscriptionID = "subscription-id"
	// HeaderHeartbeatInterval is the broker's heartbeat interval as a Go
	// duration ("10s"), so a client knows how long a stream may be silent.
	// workwire's broker sends it unless heartbeats are off; OCM's does not.
	HeaderHeartbeatInterval = "heartbeat-interval"
	// HeaderDataTypes lists, comma-separated, the data types the stream
	// carries ("*" for every one). workwire's broker sends it; a broker that
	// does not (OCM's) serves one data type per stream.
	HeaderDataTypes = "data-types"
)

// CloudEventServiceClient calls a broker.
type CloudEventServiceClient interface {
	// Publish hands one event to the broker.
	Publish(ctx context.Context, in *PublishRequest, opts ...grpc.CallOption) (*emptypb.Empty, error)
	// Subscribe opens a stream of the events routed to a source or an agent.
	Subscribe(ctx context.Context, in *SubscriptionRequest, opts ...grpc.CallOption) (grpc.ServerStreamingClient[CloudEvent], error)
}

type client struct{ cc grpc.ClientConnInterface }

// NewCloudEventServiceClient returns a client of the service over cc.
func NewCloudEventServiceClient(cc grpc.ClientConnInterface) CloudEventServiceClient {
	return client{cc}
}

func (c client) Publish(ctx context.Context, in *PublishRequest, opts ...grpc.CallOption) (*emptypb.Empty, error) {
	out := new(emptypb.Empty)
	if err := c.cc.Invoke(ctx, PublishMethod, in, out, opts...); err != nil {
		return nil, err
	}
	return out, nil
}

func (c client) Subscribe(ctx context.Context, in *SubscriptionRequest, opts ...grpc.CallOption) (grpc.ServerStreamingClient[CloudEvent], error) {
	stream, err := c.cc.NewStream(ctx, &serviceDesc.Streams[0], SubscribeMethod, opts...)
	if err != nil {
		return nil, err
	}
	s := &grpc.GenericClientStream[SubscriptionRequest, CloudEvent]{ClientStream: stream}
	if err := s.SendMsg(in); err != nil {
		return nil, err
	}
	if err := s.CloseSend(); err != nil {
		return nil, err
	}
	return s, nil
}

// CloudEventServiceServer is what a broker implements. Embed
// UnimplementedCloudEventServiceServer for methods it leaves out.
type CloudEventServiceServer interface {
	Publish(context.Context, *PublishRequest) (*emptypb.Empty, error)
	Subscribe(*SubscriptionRequest, grpc.ServerStreamingServer[CloudEvent]) error
}

// UnimplementedCloudEventServiceServer answers every method Unimplemented.
type UnimplementedCloudEventServiceServer struct{}

// Publish answers Unimplemented.
func (UnimplementedCloudEventServiceServer) Publish(context.Context, *PublishRequest) (*emptypb.Empty, error) {
	return nil, status.Error(codes.Unimplemented, "Publish is not implemented")
}

// Subscribe answers Unimplemented.
func (UnimplementedCloudEventServiceServer) Subscribe(*SubscriptionRequest, grpc.ServerStreamingServer[CloudEvent]) error {
	return status.Error(codes.Unimplemented, "Subscribe is not implemented")
}

// RegisterCloudEventServiceServer registers srv with s under ServiceName.
func RegisterCloudEventServiceServer(s grpc.ServiceRegistrar, srv CloudEventServiceServer) {
	s.RegisterService(&serviceDesc, srv)
}

var serviceDesc = grpc.ServiceDesc{
	ServiceName: ServiceName,
	HandlerType: (*CloudEventServiceServer)(nil),
	Methods: []grpc.MethodDesc{{
		MethodName: "Publish",
		Handler: func(srv any, ctx context.Context, dec func(any) error, interceptor grpc.UnaryServerInterceptor) (any, error) {
			in := new(PublishRequest)
			if err := dec(in); err != nil {
				return nil, err
			}
			if interceptor == nil {
				return srv.(CloudEventServiceServer).Publish(ctx, in)
			}
			info := &grpc.UnaryServerInfo{Server: srv, FullMethod: PublishMethod}
			return interceptor(ctx, in, info, func(ctx context.Context, req any) (any, error) {
				return srv.(CloudEventServiceServer).Publish(ctx, req.(*PublishRequest))
			})
		},
	}},
	Streams: []grpc.StreamDesc{{
		StreamName:    "Subscribe",
		ServerStreams: true,
		Handler: func(srv any, stream grpc.ServerStream) error {
			in := new(SubscriptionRequest)
			if err := stream.RecvMsg(in); err != nil {
				return err
			}
			return srv.(CloudEventServiceServer).Subscribe(in, &grpc.GenericServerStream[SubscriptionRequest, CloudEvent]{ServerStream: stream})
		},
	}},
	Metadata: "workwire/grpc/v1/cloudevents.proto",
}
