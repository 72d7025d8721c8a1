#!/bin/sh
# Every read path beside its loop floor, in alternating rounds, on every
# geometry of the scaling table (reader/benches/scaling.rs): the ratios
# the table's rows give when the load changes between a path and its floor.
#
#     reader/benches/alternating.sh            # ~3 min on 2 CPUs
#
# One line per geometry and path: CPUs, slots, path, ns per call of the
# path and of its floor, the ratio of the medians and the median of the
# rounds' own ratios; then the paths above 2x by either.
set -eu
cd "$(dirname "$0")/../.."
out=$(mktemp)
trap 'rm -f "$out"' EXIT
cargo bench -p perfabi-reader --bench read_fixed --no-run >"$out" 2>&1 || {
    echo "alternating.sh: cargo bench --no-run failed; run it to see why" >&2
    exit 1
}
# The binary cargo names ("Executable benches/read_fixed.rs (PATH)").
bin=$(sed -n 's/.*Executable benches\/read_fixed\.rs (\(.*\))$/\1/p' "$out")
[ -x "$bin" ] || { echo "alternating.sh: no bench binary in cargo's output" >&2; exit 1; }
: >"$out"
for cpus in 2 3 4 16 60 64 68 256 500 512 513 520 1000 1024 1040; do
    for slots in 30 1024 4080; do
        "$bin" --cpus "$cpus" --slots "$slots" | awk -v c="$cpus" -v s="$slots" '
            NR > 1 { printf "%5s %5s %-9s %11s %11s %6s %6s\n", c, s, $1, $2, $4, $9, $13 }' |
            tr -d ';' | tee -a "$out"
    done
done
echo "-- above 2x (ratio of medians, or median of the rounds' ratios):"
awk '$6 > 2 || $7 > 2' "$out"
echo "-- $(awk '$6 > 2 || $7 > 2' "$out" | wc -l) of $(wc -l < "$out") rows above 2x"
