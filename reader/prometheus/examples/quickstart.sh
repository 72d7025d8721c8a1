#!/bin/sh
# The exporter and the endpoint for a minute's look: start both, ask
# /metrics in both formats, stop both.
set -eu
BIN=${BIN:-target/release}                  # where cargo build put them
SEGMENT=${SEGMENT:-/dev/shm/perfabi.seg}
LISTEN=${LISTEN:-127.0.0.1:9464}
"$BIN/perfabi-exportd" --path "$SEGMENT" & exporter=$!
"$BIN/perfabi-prometheus" "$SEGMENT" --listen "$LISTEN" & endpoint=$!
trap 'kill $exporter $endpoint' EXIT
# 503 until the exporter has published its segment.
for _ in 1 2 3 4 5 6 7 8 9 10; do
    curl -sf -o /dev/null "http://$LISTEN/metrics" && break
    sleep 0.5
done
curl -s "http://$LISTEN/metrics" | grep '^perfabi_kernel_all_pswitch'
curl -s -H 'Accept: application/openmetrics-text; version=1.0.0' \
    "http://$LISTEN/metrics" | tail -1
