#!/bin/sh
# The fleet path, step by step: pmdaperfabi's metrics from pmcd, the same
# from pmproxy's /metrics (the page Prometheus scrapes), and in a pmlogger
# archive replayed with pmval and pmdumplog. Defaults: this machine's pmcd
# and pmproxy on their standard ports; the variables point it elsewhere
# (pcp-agent/tests/fleet.rs runs it against a private pmcd and pmproxy).
set -eu
PMCD=${PMCD:-localhost:44321}                 # pmcd (host:port)
PMPROXY=${PMPROXY:-http://localhost:44322}    # pmproxy's web API
METRIC=${METRIC:-perfabi.exportd.refreshes}   # a counter to follow
CONFIG=${CONFIG:-/var/lib/pcp/pmdas/perfabi/pmlogger.config}
LOG_SECONDS=${LOG_SECONDS:-35}                # the shipped config logs every 10 s
ARCHIVE=${ARCHIVE:-$(mktemp -d)/perfabi}

echo "== 1. pmcd serves the agent's metrics"
pminfo -h "$PMCD" -f perfabi.segment.available "$METRIC"

echo "== 2. pmproxy serves them as Prometheus text: dots become underscores"
name=$(echo "$METRIC" | tr . _)
curl -sf "$PMPROXY/metrics?names=$METRIC" | grep -E "^(# TYPE )?$name[ {]"

echo "== 3. pmlogger records them for $LOG_SECONDS s into $ARCHIVE"
pmlogger -h "$PMCD" -c "$CONFIG" -T "${LOG_SECONDS}sec" -l "$ARCHIVE.log" "$ARCHIVE"

echo "== 4. the archive: the counter's rate between records, and its values"
pmval -U "$ARCHIVE" -f 1 "$METRIC"
pmdumplog "$ARCHIVE" "$METRIC" | grep "($METRIC)"
