# Shell helpers shared by bench/run.sh and bench/cluster.sh (sourced, not
# run). The sourcing script sets NAME (for messages) and keeps the PIDs it
# starts in the array pids; bench_cleanup kills exactly those, never by
# pattern, and removes the scratch directory $tmp.

tmp=$(mktemp -d)
pids=()

# bench_cleanup is the EXIT trap: on failure it shows the last lines of
# every server log, then stops the processes this script started.
bench_cleanup() {
	local rc=$? p f
	if ((rc != 0)); then
		for f in "$tmp"/*.log; do
			[[ -e $f ]] || continue
			echo "--- last lines of $(basename "$f"):" >&2
			tail -n 20 "$f" >&2
		done
	fi
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
	for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
	rm -rf "$tmp"
}
trap bench_cleanup EXIT
trap 'exit 130' INT TERM

die() { echo "$NAME: $*" >&2; exit 1; }

# port_open PORT: true when something accepts connections on 127.0.0.1:PORT.
port_open() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

# wait_port PORT PID NAME LOG: wait up to 10 s for PORT to accept, failing
# early when the process PID has exited.
wait_port() {
	local deadline=$((SECONDS + 10))
	until port_open "$1"; do
		kill -0 "$2" 2>/dev/null || { cat "$4" >&2; die "$3 exited before listening on $1"; }
		((SECONDS < deadline)) || { cat "$4" >&2; die "$3 not listening on $1 after 10 s"; }
		sleep 0.05
	done
}

# pick_port VAR: unless VAR is set, set it to a random loopback port that
# nothing listens on and no other VAR holds. (A process may still take it
# before ours binds; the server then exits and wait_port says so.)
taken=" "
pick_port() {
	local p i
	if [[ -n ${!1:-} ]]; then
		! port_open "${!1}" || die "$1=${!1} is already in use"
		taken+="${!1} "
		return
	fi
	for i in {1..100}; do
		p=$((20000 + RANDOM % 40000))
		if [[ $taken != *" $p "* ]] && ! port_open "$p"; then
			printf -v "$1" %s "$p"
			taken+="$p "
			return
		fi
	done
	die "no free port found for $1"
}

# build_bins builds bin/weir and bin/loadgen unless BUILD=0.
build_bins() {
	if [[ ${BUILD:-1} != 0 ]]; then
		echo "building bin/weir and bin/loadgen" >&2
		mkdir -p bin
		CGO_ENABLED=0 go build -o bin/weir ./cmd/weir
		CGO_ENABLED=0 go build -o bin/loadgen ./bench/loadgen
	fi
}
