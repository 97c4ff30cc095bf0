// Package peerpb is the generated protobuf and gRPC code for the Weir peer
// service (weir.peer.v1), the node-to-node protocol behind package transport.
//
// Do not edit the generated files; change ../peer.proto and run ../gen.sh.
// Nothing outside package transport should import peerpb: transport converts
// these messages to its own plain Go types at the edge.
package peerpb
