"""Print the counters of a perfabi segment that moved most, per second.

Usage: python top_counters.py [SECONDS] [N]
The segment: $PERFABI_SEGMENT, else /dev/perfabi, else the eBPF writer's
/sys/fs/bpf/perfabi/kernel, else /dev/shm/perfabi.seg.
"""

import sys
import time

import perfabi

seconds = float(sys.argv[1]) if len(sys.argv) > 1 else 1.0
top = int(sys.argv[2]) if len(sys.argv) > 2 else 10

with perfabi.Segment() as seg:
    before = seg.snapshot()
    time.sleep(seconds)
    after = seg.snapshot()

rates = []
for fam in after.families:
    if fam.family.kind != "counter" or after.epoch != before.epoch:
        continue
    try:
        old = before.family(fam.family.name)
    except KeyError:
        continue  # a family that came meanwhile
    for v in fam.values:
        try:
            was = old.instance(v.instance.name).total
        except KeyError:
            continue
        if isinstance(v.total, int) and isinstance(was, int):
            name = fam.family.name
            if v.instance.name:
                name += f"{{{fam.family.dimension}={v.instance.name}}}"
            rates.append(((v.total - was) / seconds, fam.family.unit.text + "/s", name))

for rate, unit, name in sorted(rates, reverse=True)[:top]:
    print(f"{rate:14.1f} {unit:8} {name}")
