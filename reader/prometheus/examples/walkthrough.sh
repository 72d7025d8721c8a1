#!/bin/sh
# A Python program and a C program write their metrics, one endpoint serves
# them merged: the README's walk-through, from the repository's root, after
# its three installs. The endpoint stops when the script ends.
set -eu
BIN=${BIN:-target/release}                     # where cargo build put perfabi-prometheus
LISTEN=${LISTEN:-127.0.0.1:9464}
DIR=${PERFABI_DIR:-/dev/shm/perfabi-$(id -u)}  # the default segment directory
# 1. The programs: each writes a segment of its own in $DIR; what they
#    counted stays there after they exit.
python3 reader/python/examples/job_worker.py --jobs 20
APP=${TMPDIR:-/tmp}/myapp
cc reader/capi/examples/writer.c $(pkg-config --cflags --libs perfabi) -o "$APP"
"$APP" < /dev/null                             # counts 1000 requests (no Enter to wait for)
# 2. One endpoint for every program writing there.
"$BIN/perfabi-prometheus" "$DIR" --listen "$LISTEN" & endpoint=$!
trap 'kill $endpoint' EXIT
for _ in 1 2 3 4 5 6 7 8 9 10; do
    curl -sf -o /dev/null "http://$LISTEN/metrics" && break
    sleep 0.5
done
# 3. The page Prometheus scrapes: both programs' counters, merged.
curl -s "http://$LISTEN/metrics" | grep -e '^perfabi_jobs_processed_total' -e '^perfabi_myapp_requests_total'
