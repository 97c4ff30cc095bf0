package transport

import (
	"context"
	"net"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/encoding"
)

// BenchmarkCallShape measures what one 8 KiB message and its empty answer
// cost as a unary call (the shape of Handoff, which carries every replica
// batch) and on a stream kept open, over the peers' TLS on loopback with
// both ends in this process. It answers whether replica batches would be
// cheaper on a stream: on two cores, 2026-12-05, 92.7 µs unary against
// 44.4 µs streamed (medians of three runs of 2 s). The payload is raw
// bytes, so protobuf is left out of both.
//
// Whole, the stream did not pay. Replica batches on one stream per
// successor (a protocol version 3, tried the same day) left issue 19's
// worst replication cell where it was: every key in debt, three nodes,
// 64 callers, replication on ÷ off 0.889 against 0.884 (medians of eight
// runs each, alternated, 0.85–0.97 either way), and replication's node
// CPU per decision 2.99 µs against 2.86. A node makes about a hundred of
// these calls a second, two successors every 20 ms: saving 50 µs on each
// is half a percent of a core, under that cell's noise.
func BenchmarkCallShape(b *testing.B) {
	cc := callShapeConn(b)
	payload := make([]byte, 8<<10)
	var answer []byte
	b.Run("unary", func(b *testing.B) {
		ctx := context.Background()
		for b.Loop() {
			if err := cc.Invoke(ctx, "/bench.Shape/Unary", &payload, &answer); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("stream", func(b *testing.B) {
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		st, err := cc.NewStream(ctx, &callShapeDesc.Streams[0], "/bench.Shape/Stream")
		if err != nil {
			b.Fatal(err)
		}
		for b.Loop() {
			if err := st.SendMsg(&payload); err != nil {
				b.Fatal(err)
			}
			if err := st.RecvMsg(&answer); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// rawCodec passes *[]byte through untouched, so that the two call shapes
// are measured without a serializer.
type rawCodec struct{}

func (rawCodec) Marshal(v any) ([]byte, error) { return *v.(*[]byte), nil }

func (rawCodec) Unmarshal(data []byte, v any) error {
	p := v.(*[]byte)
	*p = append((*p)[:0], data...)
	return nil
}

func (rawCodec) Name() string { return "weir-bench-raw" }

// grpc-go takes codecs only while the program initializes.
func init() { encoding.RegisterCodec(rawCodec{}) }

// callShapeDesc is a service of one unary method and one bidirectional
// stream, each answering every message with an empty one.
var callShapeDesc = grpc.ServiceDesc{
	ServiceName: "bench.Shape",
	HandlerType: (*any)(nil),
	Methods: []grpc.MethodDesc{{
		MethodName: "Unary",
		Handler: func(_ any, _ context.Context, dec func(any) error, _ grpc.UnaryServerInterceptor) (any, error) {
			var msg []byte
			if err := dec(&msg); err != nil {
				return nil, err
			}
			return &[]byte{}, nil
		},
	}},
	Streams: []grpc.StreamDesc{{
		StreamName: "Stream", ServerStreams: true, ClientStreams: true,
		Handler: func(_ any, st grpc.ServerStream) error {
			var msg []byte
			for {
				if err := st.RecvMsg(&msg); err != nil {
					return nil // the client is done
				}
				if err := st.SendMsg(&[]byte{}); err != nil {
					return err
				}
			}
		},
	}},
}

// callShapeConn serves callShapeDesc on loopback with the peers' TLS and
// returns a connection to it that speaks rawCodec.
func callShapeConn(b *testing.B) *grpc.ClientConn {
	b.Helper()
	creds := testCreds(b, "bench")
	gs := grpc.NewServer(grpc.Creds(credentials.NewTLS(creds.ServerConfig())))
	gs.RegisterService(&callShapeDesc, nil)
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	go func() { _ = gs.Serve(lis) }()
	b.Cleanup(gs.Stop)
	cc, err := grpc.NewClient(lis.Addr().String(),
		grpc.WithTransportCredentials(credentials.NewTLS(creds.ClientConfig())),
		grpc.WithDefaultCallOptions(grpc.CallContentSubtype(rawCodec{}.Name())))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = cc.Close() })
	return cc
}
