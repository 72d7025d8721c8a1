#!/bin/bash
# Every read path beside its loop floor (read_fixed) in four code
# placements: the bench built with PERFABI_BENCH_PAD=0, 16, 32 and 48
# (bytes in its code section, so every function the linker places after
# them, the library's among them, moves by that much modulo a 64-byte
# line), the four binaries run in turn,
# RUNS times, at CPUS x SLOTS. A loop's time depends on where it lands
# (the floors' by up to 40 %); a ratio measured in one build holds for
# that build's placement only.
#
#     reader/benches/placements.sh [CPUS [SLOTS [RUNS]]]   # 2 30 15: ~1 min
#
# One line per placement and path: the medians over the runs of the
# path's ns, its floor's ns and the rounds' median ratio; then the
# highest ratio of each path.
set -euo pipefail
cd "$(dirname "$0")/../.."
cpus=${1:-2} slots=${2:-30} runs=${3:-15}
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
for pad in 0 16 32 48; do
    PERFABI_BENCH_PAD=$pad cargo bench -p perfabi-reader --bench read_fixed --no-run \
        >"$dir/build.log" 2>&1 || {
        echo "placements.sh: cargo bench --no-run failed (PERFABI_BENCH_PAD=$pad):" >&2
        tail -5 "$dir/build.log" >&2
        exit 1
    }
    bin=$(ls -t target/release/deps/read_fixed-* | grep -v '\.d$' | head -1)
    cp "$bin" "$dir/pad$pad"
done
# Leave the bench built as it is by default.
cargo bench -p perfabi-reader --bench read_fixed --no-run >/dev/null 2>&1
for _ in $(seq "$runs"); do
    for pad in 0 16 32 48; do
        "$dir/pad$pad" --cpus "$cpus" --slots "$slots" |
            awk -v p="$pad" 'NR > 1 { gsub(";", ""); print p, $1, $2, $4, $13 }' >>"$dir/rows"
    done
done
echo "$cpus CPUs x $slots slots, medians of $runs runs: path ns / floor ns, rounds' median ratio"
awk '
    { k = $1 " " $2; n[k]++; a[k, n[k]] = $3; b[k, n[k]] = $4; r[k, n[k]] = $5 }
    function med(arr, k, m,    i, j, t, v) {
        for (i = 1; i <= m; i++) v[i] = arr[k, i]
        for (i = 1; i <= m; i++) for (j = i + 1; j <= m; j++) if (v[j] < v[i]) { t = v[i]; v[i] = v[j]; v[j] = t }
        return v[int((m + 1) / 2)]
    }
    END {
        split("0 16 32 48", pads, " "); split("handle many family snapshot", paths, " ")
        for (i = 1; i <= 4; i++) {
            line = sprintf("pad %2s:", pads[i])
            for (j = 1; j <= 4; j++) {
                k = pads[i] " " paths[j]; m = n[k]
                x = med(r, k, m); if (x > hi[paths[j]]) hi[paths[j]] = x
                line = line sprintf("  %-8s %5.1f / %5.1f  %.2fx", paths[j], med(a, k, m), med(b, k, m), x)
            }
            print line
        }
        line = "highest:"
        for (j = 1; j <= 4; j++) line = line sprintf("  %-8s %.2fx", paths[j], hi[paths[j]])
        print line
    }' "$dir/rows"
