"""The MMV side of the comparison (pcp-agent/bench/mmv-vs-perfabi): the same
1,000 counters in 125 groups of 8, written with PCP's own pcp.mmv binding,
each group raised by one member after member (MMV has no group update),
ROUNDS times a second.

Usage: python3 mmv_writer.py SECONDS ROUNDS   (PCP_TMP_DIR names the mmv folder)
"""
import sys
import time

from pcp import mmv, pmapi
import cpmapi as api
import cmmv

def main():
    secs, rate = float(sys.argv[1]), float(sys.argv[2])
    m = mmv.MemoryMappedValues("bench")
    names = ["g%03d_c%d" % (g, c) for g in range(125) for c in range(8)]
    units = pmapi.pmUnits(0, 0, 1, 0, 0, api.PM_COUNT_ONE)
    for item, name in enumerate(names):
        m.add_metric(mmv.mmv_metric(name, item + 1, cmmv.MMV_TYPE_U64, cmmv.MMV_SEM_COUNTER, units))
    m.start()
    handles = [m.lookup_mapping(n, None) for n in names]
    groups = [handles[g * 8:(g + 1) * 8] for g in range(125)]
    t0 = time.monotonic()
    end = t0 + secs
    rounds = 0
    while time.monotonic() < end:
        for g in groups:
            for h in g:
                m.inc(h)
        rounds += 1
        wait = t0 + rounds / rate - time.monotonic()
        if wait > 0:
            time.sleep(wait)
    print("mmv_writer: %d rounds of 125 group updates" % rounds, file=sys.stderr)
    m.stop()

main()
