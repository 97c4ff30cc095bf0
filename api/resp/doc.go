// Package resp serves Weir over the Redis protocol (RESP2 and RESP3), so
// that any language's Redis client can ask for decisions: go-redis,
// redis-py, redis-cli, and redis-cell users by changing an address. It
// sees the node only through api.Decider, as the HTTP and gRPC transports
// do, runs the same input checks (api.ValidateChecks and friends) and
// answers errors with the same details. `weir serve --resp-addr :6380`
// turns it on; it is off by default.
//
// # Commands
//
// Names are case-insensitive. Integers are decimal, without spaces or
// fractions. Durations are integer milliseconds except in CL.THROTTLE,
// which speaks redis-cell's seconds. Every command gets exactly one reply,
// in order, also when pipelined.
//
//	WEIR.TAKE limit key [cost]
//	    Spends cost (default 1, at most the limit's capacity) from (limit,
//	    key) of the limits file.
//	    Reply: [allowed (1|0), remaining, retry_after_ms, reset_after_ms]
//	    retry_after_ms is 0 when allowed; both round up, as on HTTP.
//
//	WEIR.MTAKE limit key cost [limit key cost ...]
//	    Spends every check or none (at most 100 checks).
//	    Reply: [allowed, retry_after_ms, [allowed, remaining, retry_after_ms, reset_after_ms]...]
//	    one inner array per check, in order; retry_after_ms is the largest
//	    over the denied checks.
//
//	WEIR.CTAKE request_id budget_ms limit key cost [limit key cost ...]
//	    The Go client's take (package api/client sends its takes here when
//	    a member advertises its RESP address): everything a gRPC Take
//	    carries for the client, and everything its answer carries back,
//	    so the client's features work over either. request_id (at most 32
//	    bytes, "" for none) deduplicates retries exactly as a gRPC
//	    TakeRequest's request_id: the owner answers a repeated id with its
//	    first decision. budget_ms (0 for none, at most a day) is the
//	    caller's remaining deadline, bounding the decision as a gRPC
//	    deadline does. A cost of 0 means 1, as in a gRPC Check; inline
//	    limits stay on gRPC. Reply, one flat array:
//	    [allowed, retry_after_ms, rules_version, ring_epoch, forwarded,
//	     per check: limit, allowed, remaining, capacity, retry_after_ms,
//	     reset_after_ms, source (0 owner, 1 fallback, 2 allotment), window_ms]
//	    Errors are WEIR.MTAKE's, except -QUOTA for a tenant's bucket quota
//	    and -DEADLINE when budget_ms ran out, which the gRPC Take also
//	    tells apart (ResourceExhausted, DeadlineExceeded). Why a command of
//	    its own rather than gRPC: a lone caller's gRPC take crosses four
//	    goroutine hand-offs (the client's writer and reader, the server's
//	    reader and writer); a RESP connection is read and answered by one
//	    goroutine on each side, which is most of a lone caller's latency.
//
//	CL.THROTTLE key max_burst count period [quantity]
//	    redis-cell's command, arguments and reply:
//	    [limited (0|1), limit (max_burst+1), remaining, retry_after_s (-1 when allowed), reset_after_s]
//	    It is the inline limit {algorithm: gcra, burst: max_burst+1, rate:
//	    count/period s} on the bucket ("cl.throttle", key), so the limits
//	    file must set inline_limits: true, and the parameters may change
//	    from call to call as in redis-cell.
//
//	WEIR.ACQUIRE limit key [TTL ms] [WAIT ms] [HOLDER name]
//	    Asks for a permit of a concurrency limit.
//	    Reply: [granted (1|0), id, fencing_token, ttl_ms, retry_after_ms]
//	    a refusal has id "", fencing_token 0 and ttl_ms 0.
//
//	WEIR.RENEW id [ttl_ms]    Reply: the new ttl_ms; -NOTFOUND when expired or unknown.
//	WEIR.RELEASE id           Reply: +OK, also when already released.
//
//	PING [message], ECHO message, HELLO [2|3 [AUTH user pass] [SETNAME name]],
//	AUTH [user] password, CLIENT SETNAME|GETNAME|SETINFO|ID, SELECT 0, QUIT,
//	COMMAND, COMMAND COUNT|LIST|INFO name...|DOCS [name...]
//	    As Redis 7 answers them, enough for go-redis, redis-py and
//	    redis-cli to connect (go-redis sends HELLO 3 and CLIENT SETINFO on
//	    every new connection). HELLO 3 switches the connection to RESP3;
//	    the Weir replies are the same in both. HELLO's version is Weir's
//	    (Config.Version; weir serve sets its build's version).
//
//	INFO [section ...]
//	    Redis's sections and the fields clients and dashboards read:
//	    redis_version (7.2.0, the Redis whose replies these follow),
//	    weir_version, redis_mode standalone, process_id, tcp_port,
//	    uptime_in_seconds; connected_clients; used_memory and
//	    used_memory_rss (the Go runtime's heap in use and memory held);
//	    loading 0; total_connections_received, total_commands_processed,
//	    instantaneous_ops_per_sec (over the time since the previous INFO);
//	    role master; used_cpu_sys/user; cluster_enabled 0 (every node
//	    answers every key, so a cluster client must not redirect); and an
//	    empty Keyspace, since buckets are not keys.
//
//	MULTI, EXEC, DISCARD, UNWATCH
//	    redis-py's default pipeline() and go-redis's TxPipelined send
//	    MULTI ... EXEC. Commands after MULTI are answered +QUEUED and run
//	    at EXEC, in order, their answers in one array. The batch is not
//	    atomic: each command decides as if sent alone, commands of other
//	    connections may run between them, and a denial or an error does
//	    not undo the commands before it (WEIR.MTAKE is the all-or-nothing
//	    take). A command refused while queuing (unknown, wrong argument
//	    count, AUTH or HELLO, or past the queue's bounds: MaxPipeline
//	    commands, MaxRequestBytes of arguments) makes EXEC answer
//	    -EXECABORT and run nothing, as in Redis. WATCH is -ERR: there are
//	    no keys to watch. QUIT inside MULTI closes the connection.
//
// # redis-cell compatibility
//
// Weir's gcra decides exactly as redis-cell's: emission interval
// period/count, tolerance (max_burst+1) x interval, and reply seconds
// rounded as redis-cell rounds them (whole seconds, plus one when the rest
// holds a whole millisecond). The tests replay redis-cell's README
// example and its own decision table (it_rate_limits) through go-redis.
// As in redis-cell, quantity 0 peeks (the key's state, not limited,
// nothing spent) and a quantity above max_burst+1 answers limited with
// retry_after -1 and the key's state, spending nothing: both are a take of
// cost 0 at the key's owner (api.Check). The differences that remain, each
// pinned by a test:
//
//   - negative values are -ERR: a negative quantity (redis-cell gives
//     tokens back), max_burst (redis-cell limits every call), count or
//     period (redis-cell computes a negative emission interval);
//   - the limits file's bounds apply: count at most 10^15, max_burst+1 at
//     most 10^15, period 1 s to 366 days (redis-cell takes any int64),
//     key at most 512 bytes; errors say so in Weir's words (redis-cell:
//     "Couldn't parse as integer", "Zero rates are not supported");
//   - there is no keyspace: a bucket is not a Redis key with a TTL, so
//     GET, DEL, TTL and SCAN do not see it, and it is not persisted (it
//     is handed over and replicated like any bucket, with its
//     parameters);
//   - every CL.THROTTLE bucket belongs to the limit named
//     Config.ThrottleLimit ("cl.throttle"): the limits file must not
//     define it and must set inline_limits: true, and a token confined to
//     a list of limits needs "cl.throttle" in it (else -NOPERM);
//   - when a key's parameters shrink, Weir clamps its debt to the new
//     capacity (the limits file's rule for a changed limit), where
//     redis-cell keeps the whole arrival time, so the next retry and reset
//     can be earlier than redis-cell's by the difference.
//
// Weir's arithmetic is exact (integers), where redis-cell truncates the
// emission interval to whole nanoseconds; they can differ by a nanosecond
// on rates that do not divide.
//
// # Errors
//
// An error reply carries the same detail as HTTP's 4xx/5xx body and never
// the caller's key:
//
//	-ERR <detail>           invalid input (HTTP 400): wrong arguments, unknown limit, cost above capacity
//	-NOTFOUND <detail>      unknown or expired lease (HTTP 404)
//	-UNAVAILABLE <detail>   fail-closed limit whose owner is unreachable, deadline (HTTP 503 limiter_unavailable)
//	-OVERLOADED <detail>    bucket cap reached (HTTP 503 limiter_overloaded)
//	-NOAUTH, -WRONGPASS     with Config.Authenticate set (see below)
//	-NOPERM <detail>        the connection's caller may not use this limit or key (HTTP 403)
//	-ERR internal error     anything else; logged
//
// A command that fails any check runs nothing and spends nothing.
//
// # Bounds
//
// Commands are read by the package's own reader, not redcon's (which
// panics on a bulk length near 2^63 and loops for as long as a multibulk
// count says). It checks every header before allocating: at most MaxArgs
// arguments (512), each at most MaxBulkBytes (4096), MaxRequestBytes (1
// MiB) in all, inline commands and header lines at most 16 KiB. A
// violation is answered "-ERR Protocol error: ..." and the connection
// closed, as Redis does. Answers are written when MaxPipeline (1024) are
// pending or when the reader would wait for the network, so a connection
// holds at most its read buffer, one command and MaxPipeline answers; a
// client that does not read its answers is cut off after WriteTimeout
// (10 s). Read deadlines close a connection that holds the server without
// sending commands: IdleTimeout (5 min; Redis's default is never) between
// commands, CommandTimeout (10 s) from a command's first byte to its last,
// and, with Authenticate set, AuthTimeout (10 s) from accept to a
// successful AUTH, however much the connection sends meanwhile. Before AUTH
// a command may have at most PreAuthMaxArgs (8) arguments and
// PreAuthMaxBytes (16 KiB), so an unauthenticated connection holds its
// read buffer and 16 KiB for at most AuthTimeout.
// Replies are encoded with github.com/tidwall/redcon's writer.
//
// # Authentication and TLS
//
// Config.TLS makes every connection speak TLS. Config.Authenticate is the
// hook for caller credentials: when set, every command but AUTH, HELLO,
// PING and QUIT answers -NOAUTH until AUTH [user] password or HELLO ...
// AUTH user password succeeds; what the hook returns is kept with the
// connection, and Config.Context turns it into each command's context, so
// the Decider can authorize the caller (a refusal is -NOPERM). Without it,
// connections need no AUTH, as a Redis without passwords. The node sets
// both from its tokens file (the password is the token) and TLS from its
// public certificate.
//
// # Concurrency
//
// A Server is safe for concurrent use. Serve runs one goroutine per
// connection; Shutdown stops accepting, lets each connection finish the
// command it is on, and waits; Close cuts them off.
package resp
