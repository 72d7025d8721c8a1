"""A job worker instrumented for prometheus_client, ported to perfabi by
changing one import. Run it, then look with `perfabi-cat PATH` (the path
it prints) or read the whole segment directory.

    python3 job_worker.py            # until Ctrl-C
    python3 job_worker.py --jobs 20  # 20 jobs, then exit
"""

import argparse
import random
import time

# Was: from prometheus_client import Counter, Gauge, Histogram
from perfabi.client import Counter, Gauge, Histogram, segment_path

JOBS = Counter("jobs_processed_total", "Jobs processed", ["queue"])
IN_FLIGHT = Gauge("jobs_in_flight", "Jobs being processed")
DURATION = Histogram("job_duration_seconds", "Time per job")


@DURATION.time()
@IN_FLIGHT.track_inprogress()
def process(queue: str) -> None:
    time.sleep(random.uniform(0.0, 0.01))
    JOBS.labels(queue).inc()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--jobs", type=int, default=-1, help="jobs to do (default: no end)")
    n = ap.parse_args().jobs
    print(segment_path(), flush=True)
    done = 0
    try:
        while done != n:
            process("slow" if done % 4 == 0 else "fast")
            done += 1
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    main()
