#!/usr/bin/env bash
# Waits until a loadgen suite started in the background has started its
# servers and begins its cells (its "cells of" line in LOG, the suite's
# standard error), for the results scripts that sample the servers while
# the cells run. Fails, showing LOG, if the suite (PID) ends first.
#   bench/suite-started.sh LOG PID
set -eu
log=$1 pid=$2
until grep -q 'cells of' "$log" 2>/dev/null; do
	kill -0 "$pid" 2>/dev/null || { cat "$log" >&2; exit 1; } # the suite ended before its cells
	sleep 0.2 # polling interval
done
