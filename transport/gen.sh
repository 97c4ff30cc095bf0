#!/bin/sh
# gen.sh regenerates transport/peerpb from peer.proto. Output is reproducible
# with the pinned tools: protoc 3.21.12, protoc-gen-go v1.36.12,
# protoc-gen-go-grpc v1.6.0. Run from anywhere: sh transport/gen.sh
set -eu
cd "$(dirname "$0")"
protoc --proto_path=. \
	--go_out=peerpb --go_opt=paths=source_relative \
	--go-grpc_out=peerpb --go-grpc_opt=paths=source_relative \
	peer.proto
