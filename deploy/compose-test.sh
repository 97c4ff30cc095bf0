#!/usr/bin/env bash
# compose-test.sh — build the scratch image, start the 3-node compose cluster
# and check it from the host through the published ports:
#   1. every node becomes healthy (docker HEALTHCHECK = `weir healthcheck`)
#      and sees 3 alive members;
#   2. every node answers decisions (HTTP API and `weir take`), and every
#      node reaches every other as owner (peer connections warmed);
#   3. the global limit holds: N >> capacity concurrent takes on one key,
#      spread over all 3 nodes, admit exactly `capacity`, all source=owner
#      (and, whatever the load, no more than capacity + fallback shares);
#   4. after `docker kill` of the key's owner, every request to the survivors
#      still gets an HTTP 200 decision (fallback or owner) within its deadline,
#      and the survivors take the key over as owner within a deadline.
# Prints PASS/FAIL/INFO lines; exits non-zero when any check fails. Always
# tears the cluster down (`compose down -v`). Needs go, make, docker, curl, jq.
#
# Knobs (environment): N (takes in the exactness check, default 300),
# PARALLEL (requests in flight per node, default 4), WEIR_IMAGE (tag to
# build, default weir:compose-test), WEIR_KEEP_IMAGE=1 (keep the image),
# WEIR_BIN (a prebuilt static binary to use instead of `make build`).
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(dirname "$here")
project=weir-compose-test
image=${WEIR_IMAGE:-weir:compose-test}
N=${N:-300}
PARALLEL=${PARALLEL:-4}
CAP=50 # capacity of the `compose` limit in deploy/limits.yaml (rate 1/h)
nodes=(weir1 weir2 weir3)
declare -A port=([weir1]=18181 [weir2]=18182 [weir3]=18183)

fails=0
checks=0
ts() { printf '[%3ds]' "$SECONDS"; }
pass() { checks=$((checks + 1)); echo "$(ts) PASS $*"; }
fail() { checks=$((checks + 1)); fails=$((fails + 1)); echo "$(ts) FAIL $*"; }
info() { echo "$(ts) INFO $*"; }
die() { fail "$*"; exit 1; }

for tool in docker curl jq; do
	command -v "$tool" >/dev/null || { echo "FAIL $tool not found"; exit 1; }
done
if docker compose version >/dev/null 2>&1; then
	dc=(docker compose)
elif docker-compose version >/dev/null 2>&1; then
	dc=(docker-compose)
else
	echo "FAIL neither 'docker compose' nor 'docker-compose' is installed"
	exit 1
fi
dc+=(-f "$here/docker-compose.yml" -p "$project")
export WEIR_IMAGE=$image

tmp=$(mktemp -d)
cleanup() {
	local rc=$?
	set +e
	if [ "$rc" -ne 0 ] || [ "$fails" -gt 0 ]; then
		echo "---- last container logs ----"
		"${dc[@]}" logs --no-color --tail 15 2>&1 | tail -n 60
		echo "-----------------------------"
	fi
	"${dc[@]}" down -v --remove-orphans >/dev/null 2>&1 || echo "WARN compose down -v failed"
	info "cleanup: compose down -v done"
	[ "${WEIR_KEEP_IMAGE:-0}" = 1 ] || docker rmi "$image" >/dev/null 2>&1
	rm -rf "$tmp"
	exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

url() { echo "http://127.0.0.1:${port[$1]}"; }
# Container ids, filled once after `up` (docker-compose v1 is slow to ask).
declare -A cids=()
cid() { echo "${cids[$1]}"; }

# take NODE LIMIT KEY: one decision; prints "BODY HTTPCODE" (2 s deadline;
# code 000 when there was no answer).
take() {
	curl -sS --max-time 2 -o - -w ' %{http_code}' -H 'Content-Type: application/json' \
		--data-binary "{\"checks\":[{\"limit\":\"$2\",\"key\":\"$3\",\"cost\":1}]}" \
		"$(url "$1")/v1/take" 2>/dev/null || echo " 000"
}
# split "BODY CODE" from take into globals body and code.
split() { code=${1##* }; body=${1% *}; }

# ---- build ------------------------------------------------------------------
[ -n "${WEIR_BIN:-}" ] || command -v go >/dev/null || die "go not found (or set WEIR_BIN)"
"${dc[@]}" down -v --remove-orphans >/dev/null 2>&1 || true # a crashed earlier run
mkdir -p "$tmp/ctx"
if [ -n "${WEIR_BIN:-}" ]; then
	cp "$WEIR_BIN" "$tmp/ctx/weir" || die "copy WEIR_BIN=$WEIR_BIN"
	info "using prebuilt $WEIR_BIN (must be static: CGO_ENABLED=0)"
else
	# The Makefile's build: static and stamped with the version.
	make -s -C "$root" build BIN="$tmp/ctx" >/dev/null || die "make build"
fi
cp "$here/limits.yaml" "$tmp/ctx/limits.yaml"
"$tmp/ctx/weir" validate "$tmp/ctx/limits.yaml" >/dev/null || die "deploy/limits.yaml does not validate"
version=$("$tmp/ctx/weir" version)
vtag=$(echo "$version" | cut -d' ' -f2)
vcommit=$(echo "$version" | sed -n 's/.*(commit \([0-9a-f]*\).*/\1/p')
docker build -q -f "$here/Dockerfile" --build-arg VERSION="$vtag" --build-arg COMMIT="${vcommit:-unknown}" -t "$image" "$tmp/ctx" >/dev/null 2>"$tmp/build.err" ||
	{ cat "$tmp/build.err"; die "docker build"; }
label=$(docker image inspect -f '{{index .Config.Labels "org.opencontainers.image.version"}}' "$image")
inside=$(docker run --rm --entrypoint /weir "$image" version)
if [ "$inside" = "$version" ] && [ "$label" = "$vtag" ]; then
	pass "image carries the binary's version: $inside"
else
	fail "image version: label $label, weir version in the image $inside, want $version"
fi
user=$(docker image inspect -f '{{.Config.User}}' "$image")
hc=$(docker image inspect -f '{{json .Config.Healthcheck.Test}}' "$image")
size=$(docker image inspect -f '{{.Size}}' "$image")
if [ "$user" = "65532:65532" ] && [[ $hc == *healthcheck* ]]; then
	pass "image $image built FROM scratch: $((size / 1024 / 1024)) MiB, user $user, healthcheck $hc"
else
	fail "image config: user=$user healthcheck=$hc"
fi

# ---- start and wait for health ----------------------------------------------
"${dc[@]}" up -d >/dev/null 2>"$tmp/up.err" || { cat "$tmp/up.err"; die "compose up"; }
for n in "${nodes[@]}"; do
	cids[$n]=$("${dc[@]}" ps -q "$n")
	[ -n "${cids[$n]}" ] || die "no container for $n"
done
info "cluster started: ${nodes[*]} on 127.0.0.1:18181-18183 (load average $(cut -d' ' -f1-3 /proc/loadavg), $(nproc) CPUs)"
deadline=$((SECONDS + 60))
while :; do
	ok=0
	for n in "${nodes[@]}"; do
		h=$(docker inspect -f '{{.State.Health.Status}}' "$(cid "$n")" 2>/dev/null || echo none)
		alive=$(curl -sS --max-time 2 "$(url "$n")/v1/cluster" 2>/dev/null |
			jq '[.members[] | select(.state == "alive")] | length' 2>/dev/null || echo 0)
		[ "$h" = healthy ] && [ "$alive" = 3 ] && ok=$((ok + 1))
	done
	[ "$ok" = 3 ] && break
	[ "$SECONDS" -ge "$deadline" ] && die "cluster not healthy with 3 alive members within 60 s"
	sleep 0.5
done
pass "all 3 containers healthy (docker HEALTHCHECK) and each sees 3 alive members"
"$tmp/ctx/weir" status --addr "$(url weir1)" | sed 's/^/       /'

# ---- decisions through every node --------------------------------------------
for n in "${nodes[@]}"; do
	split "$(take "$n" export "smoke-$n-$$")"
	src=$(jq -r '.results[0].source' <<<"$body" 2>/dev/null || echo "?")
	if [ "$code" = 200 ] && [ "$(jq -r .allowed <<<"$body")" = true ]; then
		pass "$n: POST /v1/take export -> 200 allowed (source $src)"
	else
		fail "$n: POST /v1/take export -> $code $body"
	fi
	if out=$("$tmp/ctx/weir" take --addr "$(url "$n")" export "cli-$n-$$"); then
		pass "$n: weir take export -> exit 0 (allowed)"
	else
		fail "$n: weir take export -> exit $? $out"
	fi
done

# ---- warm the peer connections -------------------------------------------------
# A node's first forwards to a peer it has not talked to yet may miss the 50 ms
# forward deadline while the gRPC connection is dialled, and are then answered
# from the local fallback. Warm every node->owner pair before counting exactly.
declare -A warmkey=()
for ((i = 0; i < 200 && ${#warmkey[@]} < 3; i++)); do
	o=$(curl -sS --max-time 2 "$(url weir1)/v1/cluster?limit=export&key=warm-$$-$i" | jq -r .owner)
	[ -n "${port[$o]:-}" ] && [ -z "${warmkey[$o]:-}" ] && warmkey[$o]=warm-$$-$i
done
[ "${#warmkey[@]}" = 3 ] || die "could not find an export key owned by each node (${!warmkey[*]})"
cold=0
deadline=$((SECONDS + 20))
for n in "${nodes[@]}"; do
	for o in "${nodes[@]}"; do
		[ "$n" = "$o" ] && continue
		while :; do
			split "$(take "$n" export "${warmkey[$o]}")"
			[ "$(jq -r '.results[0].source' <<<"$body" 2>/dev/null)" = owner ] && break
			cold=$((cold + 1))
			[ "$SECONDS" -ge "$deadline" ] && die "$n does not reach owner $o within 20 s (HTTP $code $body)"
			sleep 0.2
		done
	done
done
pass "every node reaches every other node as owner ($cold cold forwards answered from fallback first)"

# ---- the global limit holds --------------------------------------------------
key="exact-$$-$RANDOM"
owners=""
for n in "${nodes[@]}"; do
	o=$(curl -sS --max-time 2 "$(url "$n")/v1/cluster?limit=compose&key=$key" | jq -r .owner)
	owners+="$o "
done
read -r owner o2 o3 <<<"$owners"
if [ "$owner" = "$o2" ] && [ "$owner" = "$o3" ] && [ -n "${port[$owner]:-}" ]; then
	pass "all nodes agree: owner of compose/$key is $owner"
else
	die "nodes disagree on the owner of compose/$key: $owners"
fi

printf '{"checks":[{"limit":"compose","key":"%s","cost":1}]}' "$key" >"$tmp/body.json"
per=$(((N + 2) / 3))
mkdir -p "$tmp/exact"
# One curl with one config that deals the requests round-robin over the three
# nodes, so every moment has requests in flight at all of them.
for ((i = 1; i <= per; i++)); do
	for n in "${nodes[@]}"; do
		printf 'url = "http://127.0.0.1:%s/v1/take"\noutput = "%s"\n' "${port[$n]}" "$tmp/exact/$n.$i"
	done
done >"$tmp/curl.conf"
start=$(date +%s%N)
curl -sS -Z --parallel-immediate --parallel-max "$((3 * PARALLEL))" --max-time 10 \
	-H 'Content-Type: application/json' --data-binary "@$tmp/body.json" \
	-w '%{http_code}\n' -K "$tmp/curl.conf" >"$tmp/codes" 2>"$tmp/curl.err" || true
ms=$((($(date +%s%N) - start) / 1000000))
total=$((per * 3))
ok200=$(grep -c '^200$' "$tmp/codes" || true)
{ cat "$tmp"/exact/* 2>/dev/null || true; } | jq -s '[.[] | .results[0]]' >"$tmp/exact.json"
allowed=$(jq '[.[] | select(.allowed)] | length' "$tmp/exact.json")
sources=$(jq -c 'group_by(.source) | map({(.[0].source): length}) | add' "$tmp/exact.json")
per_node=""
for n in "${nodes[@]}"; do
	a=$({ cat "$tmp/exact/$n".* 2>/dev/null || true; } | jq -s '[.[] | select(.allowed)] | length')
	per_node+="$n=$a "
done
info "$total concurrent takes (round-robin, $per per node, $((3 * PARALLEL)) in flight) in $ms ms: HTTP 200 $ok200, allowed $allowed ($per_node), sources $sources"
[ "$ok200" = "$total" ] && pass "every one of the $total takes got HTTP 200" || fail "only $ok200 of $total takes got HTTP 200"
# Safety holds whatever the load: the owner never admits past capacity, and
# each node that fell back adds at most its local share (docs/architecture.md §6.4).
share=$(((CAP + 2) / 3))
own_ok=$(jq '[.[] | select(.source == "owner" and .allowed)] | length' "$tmp/exact.json")
fb_nodes=0
for n in "${nodes[@]}"; do
	f=$({ cat "$tmp/exact/$n".* 2>/dev/null || true; } | jq -s '[.[] | select(.results[0].source == "fallback")] | length')
	[ "$f" -gt 0 ] && fb_nodes=$((fb_nodes + 1))
done
bound=$((CAP + fb_nodes * share))
[ "$own_ok" -le "$CAP" ] && [ "$allowed" -le "$bound" ] &&
	pass "bounded: owner admitted $own_ok <= $CAP; total $allowed <= $CAP + $fb_nodes local shares of $share" ||
	fail "over-admission: owner admitted $own_ok (cap $CAP), total $allowed (bound $bound)"
# Exactness needs every forward to reach the owner within the forward
# deadline (50 ms by default): a starved CPU turns forwards into fallbacks.
[ "$allowed" = "$CAP" ] && pass "global limit exact: $allowed of $total admitted, capacity $CAP" ||
	fail "global limit: $allowed admitted, want exactly $CAP"
if [ "$sources" = "{\"owner\":$total}" ]; then
	pass "all $total decisions came from the owner"
else
	fail "decision sources $sources, want all owner: forwards missed their deadline (load average $(cut -d' ' -f1-3 /proc/loadavg) on $(nproc) CPUs; WEIR_FORWARD_TIMEOUT raises it where supported)"
fi

# ---- kill the owner: survivors keep answering ---------------------------------
survivors=()
for n in "${nodes[@]}"; do [ "$n" != "$owner" ] && survivors+=("$n"); done
docker kill "$(cid "$owner")" >/dev/null || die "docker kill $owner"
kill_at=$SECONDS
info "killed $owner (owner of compose/$key); asking ${survivors[*]} until both answer as owner (deadline 30 s)"
# A concurrent burst at once, while the survivors still believe the owner is
# alive: each request must come back 200 within its 2 s deadline.
burst=40
mkdir -p "$tmp/kill"
for ((i = 1; i <= burst; i++)); do
	for n in "${survivors[@]}"; do
		printf 'url = "http://127.0.0.1:%s/v1/take"\noutput = "%s"\n' "${port[$n]}" "$tmp/kill/$n.$i"
	done
done >"$tmp/kill.conf"
t0=$(date +%s%N)
curl -sS -Z --parallel-immediate --parallel-max 16 --max-time 2 \
	-H 'Content-Type: application/json' --data-binary "@$tmp/body.json" \
	-w '%{http_code}\n' -K "$tmp/kill.conf" >"$tmp/kill.codes" 2>"$tmp/kill.err" || true
ms=$((($(date +%s%N) - t0) / 1000000))
b200=$(grep -c '^200$' "$tmp/kill.codes" || true)
{ cat "$tmp"/kill/* 2>/dev/null || true; } | jq -s '[.[] | .results[0]]' >"$tmp/kill.json"
bsrc=$(jq -c 'group_by(.source) | map({(.[0].source): length}) | add' "$tmp/kill.json")
fb=$(jq '[.[] | select(.source == "fallback")] | length' "$tmp/kill.json")
fb_allowed=$(jq '[.[] | select(.source == "fallback" and .allowed)] | length' "$tmp/kill.json")
own=$(jq '[.[] | select(.source == "owner")] | length' "$tmp/kill.json")
own_allowed=$(jq '[.[] | select(.source == "owner" and .allowed)] | length' "$tmp/kill.json")
info "burst of $((2 * burst)) concurrent takes on compose/$key right after the kill, in $ms ms: HTTP 200 $b200, sources $bsrc, allowed $fb_allowed fallback + $own_allowed owner"
[ "$b200" = $((2 * burst)) ] && pass "every request of the burst got an HTTP 200 decision within 2 s" ||
	fail "only $b200 of $((2 * burst)) burst requests got an HTTP 200 decision within 2 s"
sent=0 answered=0 bad=0 slowest=0
takeover=""
declare -A took=()
deadline=$((SECONDS + 30))
while [ "$SECONDS" -lt "$deadline" ]; do
	for n in "${survivors[@]}"; do
		for k in "compose $key" "export fresh-$n-$sent"; do
			t0=$(date +%s%N)
			split "$(take "$n" $k)"
			t=$((($(date +%s%N) - t0) / 1000000))
			[ "$t" -gt "$slowest" ] && slowest=$t
			sent=$((sent + 1))
			src=$(jq -r '.results[0].source // "none"' <<<"$body" 2>/dev/null || echo none)
			if [ "$code" != 200 ] || [ "$src" = none ]; then
				bad=$((bad + 1))
				echo "       $n $k -> HTTP $code $body"
				continue
			fi
			answered=$((answered + 1))
			[ "${k%% *}" = compose ] || continue
			a=$(jq -r .allowed <<<"$body")
			if [ "$src" = fallback ]; then
				fb=$((fb + 1))
				[ "$a" = true ] && fb_allowed=$((fb_allowed + 1))
			else
				own=$((own + 1))
				[ "$a" = true ] && own_allowed=$((own_allowed + 1))
				took[$n]=1
			fi
		done
	done
	if [ "${#took[@]}" = 2 ] && [ -z "$takeover" ]; then
		takeover=$((SECONDS - kill_at))
		deadline=$((SECONDS + 2)) # a little more traffic after the takeover
	fi
	sleep 0.1
done
info "then one at a time: $sent requests, $answered answered 200, slowest ${slowest} ms; exhausted key in all: $fb fallback ($fb_allowed allowed), $own owner ($own_allowed allowed)"
[ "$bad" = 0 ] && pass "every single request to the survivors got an HTTP 200 decision within 2 s ($answered/$sent)" ||
	fail "$bad of $sent requests to the survivors got no decision"
if [ -n "$takeover" ]; then
	pass "survivors took compose/$key over as owner ${takeover}s after the kill (fallback answers: $fb)"
else
	fail "survivors did not answer compose/$key as owner within 30 s"
fi
[ "$fb_allowed" -le $((2 * share)) ] && pass "fallback admitted $fb_allowed on the exhausted key, within 2 local shares (2x$share)" ||
	fail "fallback admitted $fb_allowed on the exhausted key, more than 2 local shares (2x$share)"
# A crash may lose the dead owner's debits: the node has no crash replication
# yet (docs/architecture.md §6.8), so the new owner starts the key full. Reported, not checked, until replication lands.
info "new owner admitted $own_allowed of $own on the exhausted key (0 = no debit lost in the crash)"
alive=$(curl -sS --max-time 2 "$(url "${survivors[0]}")/v1/cluster" |
	jq -r '[.members[] | "\(.name)=\(.state)"] | join(" ")')
info "${survivors[0]} sees: $alive"

# ---- verdict -------------------------------------------------------------------
if [ "$fails" -eq 0 ]; then
	echo "$(ts) PASS compose-test: $checks checks passed"
else
	echo "$(ts) FAIL compose-test: $fails of $checks checks failed"
	exit 1
fi
