"""redis-py against Weir's RESP endpoint.

Run by TestRedisPy (api/resp/redispy_test.go) with Debian's /usr/bin/python3
and python3-redis, against a node whose clock does not move:

    python3 redispy_check.py HOST PORT TOKEN EXPORT_ONLY_TOKEN VERSION

TOKEN may decide on keys under tenant:acme:; EXPORT_ONLY_TOKEN on the
limit export only.

It prints one line per failed check and exits 1, or prints "ok".
"""
import sys

import redis

host, port, token, export_only, version = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4], sys.argv[5]
failures = []


def expect(what, got, want):
    if got != want:
        failures.append(f"{what}: got {got!r}, want {want!r}")


def expect_error(what, cls, fn, contains=""):
    try:
        got = fn()
    except cls as e:
        if contains not in str(e):
            failures.append(f"{what}: {type(e).__name__} {e!r}, want it to contain {contains!r}")
        return
    except Exception as e:  # noqa: BLE001 - any other error is a failure
        failures.append(f"{what}: {type(e).__name__} {e!r}, want {cls.__name__}")
        return
    failures.append(f"{what}: answered {got!r}, want {cls.__name__}")


# AUTH: nothing but the connection commands before it; a wrong token is refused.
anon = redis.Redis(host=host, port=port)
expect("PING before AUTH", anon.ping(), True)
expect_error("WEIR.TAKE before AUTH", redis.exceptions.AuthenticationError,
             lambda: anon.execute_command("WEIR.TAKE", "export", "tenant:acme:a"), "Authentication required")
expect_error("a wrong token", redis.exceptions.ResponseError,
             lambda: redis.Redis(host=host, port=port, password="not-a-token").ping(), "WRONGPASS")

r = redis.Redis(host=host, port=port, password=token, decode_responses=True)

# WEIR.TAKE: [allowed, remaining, retry_after_ms, reset_after_ms]; export is 6 at 2/s.
expect("first take", r.execute_command("WEIR.TAKE", "export", "tenant:acme:a"), [1, 5, 0, 500])
expect("take of 5", r.execute_command("WEIR.TAKE", "export", "tenant:acme:a", 5), [1, 0, 0, 3000])
expect("denied take", r.execute_command("WEIR.TAKE", "export", "tenant:acme:a"), [0, 0, 500, 3000])
expect_error("outside the token's prefix", redis.exceptions.NoPermissionError,
             lambda: r.execute_command("WEIR.TAKE", "export", "tenant:evil:a"))
expect_error("unknown limit", redis.exceptions.ResponseError,
             lambda: r.execute_command("WEIR.TAKE", "nope", "tenant:acme:a"), 'unknown limit "nope"')

# CL.THROTTLE: redis-cell's [limited, limit, remaining, retry_after_s, reset_after_s].
expect("CL.THROTTLE", r.execute_command("CL.THROTTLE", "tenant:acme:u", 15, 30, 60), [0, 16, 15, -1, 2])
expect("CL.THROTTLE of 15", r.execute_command("CL.THROTTLE", "tenant:acme:u", 15, 30, 60, 15), [0, 16, 0, -1, 32])
expect("CL.THROTTLE limited", r.execute_command("CL.THROTTLE", "tenant:acme:u", 15, 30, 60), [1, 16, 0, 2, 32])
# Its buckets are the limit "cl.throttle": a token confined to other limits may not use it.
limited = redis.Redis(host=host, port=port, password=export_only)
expect("export-only token's take", limited.execute_command("WEIR.TAKE", "export", "x")[0], 1)
expect_error("export-only token's CL.THROTTLE", redis.exceptions.NoPermissionError,
             lambda: limited.execute_command("CL.THROTTLE", "x", 15, 30, 60))

# Leases: acquire, renew, release; export-db has 2 permits.
granted, lease_id, fencing, ttl, retry = r.execute_command("WEIR.ACQUIRE", "export-db", "tenant:acme:db", "TTL", 5000)
expect("ACQUIRE", (granted, ttl, retry), (1, 5000, 0))
expect("fencing token", fencing > 0, True)
second = r.execute_command("WEIR.ACQUIRE", "export-db", "tenant:acme:db")
third = r.execute_command("WEIR.ACQUIRE", "export-db", "tenant:acme:db")
expect("third ACQUIRE", (third[0], third[1], third[2], third[3]), (0, "", 0, 0))
expect("RENEW", r.execute_command("WEIR.RENEW", lease_id, 7000), 7000)
expect("RELEASE", r.execute_command("WEIR.RELEASE", lease_id), "OK")
expect("RELEASE again", r.execute_command("WEIR.RELEASE", second[1]), "OK")
expect_error("RENEW after RELEASE", redis.exceptions.ResponseError,
             lambda: r.execute_command("WEIR.RENEW", lease_id), "NOTFOUND")

# Pipelines: redis-py's default pipeline() is MULTI ... EXEC.
p = r.pipeline()
for _ in range(4):
    p.execute_command("WEIR.TAKE", "search", "tenant:acme:p")
p.ping()
expect("transaction pipeline", p.execute(),
       [[1, 2, 0, 1000], [1, 1, 0, 2000], [1, 0, 0, 3000], [0, 0, 1000, 3000], True])
p = r.pipeline(transaction=False)
for _ in range(2):
    p.execute_command("WEIR.TAKE", "search", "tenant:acme:q")
p.execute_command("WEIR.TAKE", "search", "tenant:evil:q")
got = p.execute(raise_on_error=False)
expect("plain pipeline", got[:2], [[1, 2, 0, 1000], [1, 1, 0, 2000]])
expect("plain pipeline's refusal", isinstance(got[2], redis.exceptions.NoPermissionError), True)
with r.pipeline() as p:
    p.execute_command("WEIR.TAKE", "search", "tenant:acme:r")
    p.execute_command("WEIR.TAKE", "search", "tenant:evil:r")
    got = p.execute(raise_on_error=False)
expect("transaction with a refusal", got[0], [1, 2, 0, 1000])
expect("transaction's refusal", isinstance(got[1], redis.exceptions.NoPermissionError), True)

# INFO and HELLO, as a client library reads them.
info = r.info()
expect("INFO redis_version", info.get("redis_version"), "7.2.0")
expect("INFO weir_version", str(info.get("weir_version")), version)
expect("INFO role", info.get("role"), "master")
expect("INFO cluster_enabled", info.get("cluster_enabled"), 0)
expect("INFO connected_clients >= 1", info.get("connected_clients", 0) >= 1, True)
hello = r.execute_command("HELLO", 2)
expect("HELLO", dict(zip(hello[0::2], hello[1::2])).get("version"), version)

if failures:
    print("\n".join(failures))
    sys.exit(1)
print("ok")
