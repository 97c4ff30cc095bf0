#!/usr/bin/env bash
# proto.sh regenerates the Go code of Weir's public gRPC contract:
#   api/weirv1/*.proto   ->  api/weirv1/*.pb.go
#   transport/peer.proto ->  transport/peerpb/*.pb.go
# It is what `make proto` runs. The output depends only on the .proto files and
# the tool versions, which it checks, so running it twice gives no diff.
set -euo pipefail

want_protoc="libprotoc 3.21.12"
want_gen_go="protoc-gen-go v1.36.12"
want_gen_grpc="protoc-gen-go-grpc 1.6.0"

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"

check() { # name, wanted version string, actual
	if [ "$3" != "$2" ]; then
		echo "proto.sh: $1 is \"$3\", want \"$2\" (generated code would drift)" >&2
		exit 1
	fi
}
check protoc "$want_protoc" "$(protoc --version)"
check protoc-gen-go "$want_gen_go" "$(protoc-gen-go --version)"
check protoc-gen-go-grpc "$want_gen_grpc" "$(protoc-gen-go-grpc --version)"

# The .proto files live beside their Go code in api/weirv1, and protoc sees
# them under the import path weir/v1/ (the mapping weir/v1=api/weirv1), after
# their package weir.v1: the descriptor registered at run time, the generated
# identifiers and gRPC's service metadata name weir/v1/limiter.proto, a name
# no other module's file takes in the global registry. The module option
# maps go_package github.com/weir-rl/weir/api/weirv1 to ./api/weirv1
# relative to the repository root.
protos=()
for f in api/weirv1/*.proto; do protos+=("weir/v1/${f#api/weirv1/}"); done
protoc \
	--proto_path=weir/v1=api/weirv1 \
	--go_out=. --go_opt=module=github.com/weir-rl/weir \
	--go-grpc_out=. --go-grpc_opt=module=github.com/weir-rl/weir \
	"${protos[@]}"

# The node-to-node peer service: transport/peer.proto -> transport/peerpb.
sh transport/gen.sh
