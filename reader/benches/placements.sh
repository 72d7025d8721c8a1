#!/bin/bash
# Every read path beside its loop floor (read_fixed) in four code
# placements: the bench built with PERFABI_BENCH_PAD=0, 16, 32 and 48
# (bytes in its code section, so every function the linker places after
# them, the library's among them, moves by that much modulo a 64-byte
# line), the four binaries run in turn, RUNS times, at CPUS x SLOTS. A
# loop's time depends on where it lands (the floors' by up to 40 %); a
# ratio measured in one build holds for that build's placement only.
#
#     reader/benches/placements.sh [CPUS [SLOTS [RUNS]]]   # 2 30 15: ~1 min
#
# One line per placement: each path's median ns, its floor's, and the
# median over the runs of the rounds' median ratio; then each path's
# highest ratio. The four binaries (~60 MB each, with debug info) are
# kept in a temporary directory until the end; the bench is built again
# without a pad at the end, however the script ends.
set -euo pipefail
cd "$(dirname "$0")/../.."
cpus=${1:-2} slots=${2:-30} runs=${3:-15}
dir=$(mktemp -d)
rebuild() {
    env -u PERFABI_BENCH_PAD cargo bench -p perfabi-reader --bench read_fixed --no-run \
        >"$dir/build.log" 2>&1 ||
        echo "placements.sh: building the bench without a pad failed; see cargo bench --no-run" >&2
    rm -rf "$dir"
}
trap rebuild EXIT
# Builds the bench with PAD bytes and copies it to $dir/padPAD.
build() {
    PERFABI_BENCH_PAD=$1 cargo bench -p perfabi-reader --bench read_fixed --no-run \
        >"$dir/build.log" 2>&1 || {
        echo "placements.sh: cargo bench --no-run failed (PERFABI_BENCH_PAD=$1):" >&2
        tail -5 "$dir/build.log" >&2
        exit 1
    }
    # The binary cargo names ("Executable benches/read_fixed.rs (PATH)").
    bin=$(sed -n 's/.*Executable benches\/read_fixed\.rs (\(.*\))$/\1/p' "$dir/build.log")
    [ -x "$bin" ] || { echo "placements.sh: no bench binary in cargo's output" >&2; exit 1; }
    cp "$bin" "$dir/pad$1"
}
for pad in 0 16 32 48; do
    build "$pad"
done
if cmp -s "$dir/pad0" "$dir/pad16"; then
    echo "placements.sh: the pad moved nothing (the linker dropped it?)" >&2
    exit 1
fi
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
