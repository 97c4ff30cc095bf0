// Package simnet is a simulated network for in-process tests of cluster code,
// without root, namespaces or real sockets.
//
// A Network holds named hosts (address strings such as "10.0.0.1"), a
// partition matrix and a packet-loss rate. Code under test reaches it through
// three seams:
//
//   - Transport: a hashicorp/memberlist NodeAwareTransport bound to one
//     host:port, for gossip (packets) and push/pull (streams);
//   - Listen: a net.Listener on host:port, for a gRPC server;
//   - Dial: a dialer from a host to host:port, for grpc.WithContextDialer.
//
// # Fault semantics
//
// The matrix is directional: a link from→to is open unless it was cut
// (Cut, CutOneWay, Split) or either end is isolated (Isolate). Heal opens
// every link; Loss sets the drop probability for packets and is not changed
// by Heal. A host always reaches itself.
//
// Packets behave like UDP: a packet across a closed link, to an address
// nobody listens on, lost to Loss, or arriving at a full receive queue is
// dropped silently; WriteTo never fails for those reasons.
//
// Streams behave like TCP through a silent iptables DROP rule:
//
//   - Dialing across a closed link hangs until the dialer's context or
//     timeout ends (and succeeds if the link opens in time). Dialing an open
//     address with no listener is refused at once.
//   - On an established stream, bytes flow from writer to reader only while
//     the link writer→reader is open. Across a new cut, reads block until
//     their deadline, and writes are buffered (up to a window, then block
//     until their deadline) as TCP would retransmit; when the link heals,
//     the buffered bytes are delivered in order. End of stream (Close) is
//     delivered the same way.
//   - Deadlines (SetDeadline, SetReadDeadline, SetWriteDeadline) work as in
//     net.Conn: an expired operation fails with an error whose Timeout()
//     is true (os.ErrDeadlineExceeded).
//
// Loss applies to packets only: streams are reliable, like TCP.
//
// Delay(host, d) makes a host slow without making it unreachable: every
// stream byte it writes becomes readable d later (in order), while its
// packets, and so its gossip, are on time.
//
// # Shutdown
//
// Transport.Shutdown closes the transport's listener, every stream it dialed
// or accepted, and aborts its dials in progress, so the goroutines of a
// memberlist that used it end promptly. Listener.Close closes only the
// listener (accepted conns belong to their server, as with net.Listener).
// Network.Close closes everything.
//
// # Concurrency
//
// All methods of Network, Transport, Listener and the conns are safe for
// concurrent use. One mutex in the Network guards the matrix and the address
// tables; each stream direction has its own mutex and never holds the
// Network's while waiting.
//
// The random source for Loss is seeded (New(seed)), so a test that drives
// packets in a deterministic order drops the same ones; goroutine
// scheduling still varies between runs.
package simnet
