"""A Python worker of reader/prometheus/tests/workers.rs.

Usage: worker.py DIR SLOT CHUNK PAUSE_US

Writes a segment of its own in DIR through ``perfabi.client``, with the
families every worker of the test has (the same names and metadata in C,
Python and Rust, so a reader merges them): the counter workers_requests,
the histogram workers_latency (bounds 10, 100, 1000) and the gauge
workers_slot (``livemax``), set to SLOT + 1. Prints ``segment PATH``, then
for ever: a batch of 10 * CHUNK requests, each one ``inc()`` and one
``observe(i % 1100)`` for the i-th request of its life, sleeping PAUSE_US
microseconds after every CHUNK of them (a kill lands inside a batch), and
``batch N`` once batch N is complete. It runs until killed.
"""

import sys
import time

from perfabi.client import Counter, Gauge, Histogram, configure, segment_path

directory, slot, chunk, pause_us = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
configure(directory=directory, name="worker-py")
REQUESTS = Counter("workers_requests", "Requests served")
LATENCY = Histogram("workers_latency", "Request latency", buckets=[10, 100, 1000])
SLOT = Gauge("workers_slot", "The highest live worker slot", multiprocess_mode="livemax")
SLOT.set(slot + 1)
print("segment", segment_path(), flush=True)
i = 0
batch = 0
while True:
    for _ in range(10):
        for _ in range(chunk):
            REQUESTS.inc()
            LATENCY.observe(i % 1100)
            i += 1
        time.sleep(pause_us / 1e6)
    batch += 1
    print("batch", batch, flush=True)
