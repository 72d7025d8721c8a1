#!/usr/bin/env python3
"""Writes perfabi's Grafana dashboard, dashboards/perfabi-host.json.

The dashboard is data: the panels below, each a title, a unit and its
PromQL queries. This script lays them out as Grafana's JSON model (rows of
two time series panels) so the JSON is never edited by hand:

    python3 reader/prometheus/mixin/dashboard.py          # rewrite the JSON
    python3 reader/prometheus/mixin/dashboard.py --check  # fail if stale

Queries use three variables of the dashboard: $job and $instance (which
targets) and Grafana's $__rate_interval. reader/prometheus/tests/mixin.rs
evaluates every query against a real Prometheus scraping perfabi-exportd,
perfabi-bpfd and a segment directory, and checks that each returns data.

Units: perfabi exposes what its families declare (microseconds of CPU and
pressure time, KiB of memory, nanoseconds of latency); the queries turn
them into seconds, bytes and ratios.
"""

import json
import sys
from pathlib import Path

OUT = Path(__file__).resolve().parent / "dashboards" / "perfabi-host.json"
UID = "perfabi-host"

# The targets the variables pick.
SEL = 'job=~"$job", instance=~"$instance"'


# CPU modes: time not working; every mode counted once (guest and
# guest_nice are already in user and nice).
IDLE = 'mode=~"idle|iowait|steal"'
NOT_GUEST = 'mode!~"guest|guest_nice"'


def rate(metric, extra="", by=None):
    """rate() of `metric` over the dashboard's interval, summed `by` labels."""
    sel = SEL + (", " + extra if extra else "")
    inner = f"rate({metric}{{{sel}}}[$__rate_interval])"
    return f"sum by ({by}) ({inner})" if by else inner


def quantile(q, metric, by):
    """The q-quantile of a histogram family, in seconds (buckets of ns)."""
    return (
        f"histogram_quantile({q}, sum by ({by}, le) "
        f"({rate(metric + '_bucket')})) / 1e9"
    )


def q(expr, legend):
    """One query of a panel: its PromQL and its legend."""
    return {"expr": expr, "legend": legend}


# (row title, [(panel title, unit, description, [queries])])
ROWS = [
    (
        "CPU",
        [
            (
                "CPU utilisation",
                "percentunit",
                "Share of CPU time not idle, not waiting for I/O and not stolen.",
                [
                    q(
                        "1 - "
                        + rate("perfabi_kernel_cpu_time_total", IDLE, "instance")
                        + " / "
                        + rate("perfabi_kernel_cpu_time_total", NOT_GUEST, "instance"),
                        "{{instance}}",
                    )
                ],
            ),
            (
                "CPU time by mode",
                "short",
                "CPUs' worth of time spent in each mode but idle "
                "(guest time is already in user and nice).",
                [
                    q(
                        rate(
                            "perfabi_kernel_cpu_time_total",
                            'mode!~"idle|guest|guest_nice"',
                            "instance, mode",
                        )
                        + " / 1e6",
                        "{{instance}} {{mode}}",
                    )
                ],
            ),
            (
                "Context switches",
                "ops",
                "Context switches per second (from /proc/stat by "
                "perfabi-exportd, from the scheduler by perfabi-bpfd).",
                [
                    q(
                        rate("perfabi_kernel_all_pswitch_total", by="job, instance"),
                        "{{instance}} {{job}}",
                    )
                ],
            ),
            (
                "Softirqs by kind",
                "ops",
                "Softirqs handled per second, from /proc/softirqs.",
                [
                    q(
                        rate("perfabi_kernel_softirqs_total", by="instance, kind"),
                        "{{instance}} {{kind}}",
                    )
                ],
            ),
            (
                "Interrupts: the ten busiest IRQs",
                "ops",
                "Interrupts per second of the ten busiest IRQs.",
                [
                    q(
                        "topk(10, "
                        + rate(
                            "perfabi_kernel_interrupts_count_total",
                            by="instance, irq",
                        )
                        + ")",
                        "{{instance}} {{irq}}",
                    )
                ],
            ),
            (
                "Interrupt handler time, 99th percentile",
                "s",
                "Time in interrupt handlers, all IRQs (perfabi-bpfd).",
                [
                    q(
                        quantile(
                            0.99, "perfabi_kernel_interrupts_handler_time", "instance"
                        ),
                        "{{instance}}",
                    )
                ],
            ),
        ],
    ),
    (
        "Load and filesystems",
        [
            (
                "Load average",
                "short",
                "Runnable and uninterruptible tasks, averaged over 1, 5 and "
                "15 minutes (/proc/loadavg; perfabi-exportd stores "
                "thousandths).",
                [
                    q(
                        f"perfabi_kernel_all_load{{{SEL}}} / 1000",
                        "{{instance}} {{interval}}",
                    )
                ],
            ),
            (
                "Filesystem space available",
                "percentunit",
                "Share of each mount's space available to users (statvfs), "
                "read-only mounts left out.",
                [
                    q(
                        f"perfabi_filesys_avail{{{SEL}}} / (perfabi_filesys_capacity{{{SEL}}} > 0)"
                        f" unless on (job, instance, mountpoint) "
                        f"(perfabi_filesys_readonly{{{SEL}}} == 1)",
                        "{{instance}} {{mountpoint}}",
                    )
                ],
            ),
        ],
    ),
    (
        "Pressure",
        [
            (
                "Pressure stall: some tasks",
                "percentunit",
                "Share of time some runnable tasks were stalled on the "
                "resource (/proc/pressure).",
                [
                    q(
                        rate(f"perfabi_kernel_all_pressure_{r}_some_total", by="instance")
                        + " / 1e6",
                        "{{instance}} " + r,
                    )
                    for r in ("cpu", "memory", "io")
                ],
            ),
            (
                "Pressure stall: all tasks",
                "percentunit",
                "Share of time all non-idle tasks were stalled on the "
                "resource (/proc/pressure).",
                [
                    q(
                        rate(f"perfabi_kernel_all_pressure_{r}_full_total", by="instance")
                        + " / 1e6",
                        "{{instance}} " + r,
                    )
                    for r in ("memory", "io")
                ],
            ),
        ],
    ),
    (
        "Memory",
        [
            (
                "Memory",
                "bytes",
                "From /proc/meminfo: total, available (without swapping), "
                "page cache, anonymous, slab.",
                [
                    q(f"perfabi_{m}{{{SEL}}} * 1024", "{{instance}} " + legend)
                    for m, legend in (
                        ("mem_physmem", "total"),
                        ("mem_util_available", "available"),
                        ("mem_util_cached", "cached"),
                        ("mem_util_anonpages", "anonymous"),
                        ("mem_util_slab", "slab"),
                    )
                ],
            ),
            (
                "Page faults",
                "ops",
                "Page faults per second, and the major ones (that read "
                "from disk).",
                [
                    q(rate("perfabi_mem_vmstat_pgfault_total"), "{{instance}} all"),
                    q(rate("perfabi_mem_vmstat_pgmajfault_total"), "{{instance}} major"),
                ],
            ),
            (
                "Swap",
                "ops",
                "Pages swapped in and out per second.",
                [
                    q(rate("perfabi_mem_vmstat_pswpin_total"), "{{instance}} in"),
                    q(rate("perfabi_mem_vmstat_pswpout_total"), "{{instance}} out"),
                ],
            ),
            (
                "Swap used",
                "bytes",
                "SwapTotal less SwapFree.",
                [
                    q(
                        f"(perfabi_mem_util_swapTotal{{{SEL}}} - "
                        f"perfabi_mem_util_swapFree{{{SEL}}}) * 1024",
                        "{{instance}}",
                    )
                ],
            ),
        ],
    ),
    (
        "Disks",
        [
            (
                "Disk throughput",
                "Bps",
                "Bytes read and written per second, by device.",
                [
                    q(
                        rate("perfabi_disk_dev_read_bytes_total", by="job, instance, device"),
                        "{{instance}} {{device}} read ({{job}})",
                    ),
                    q(
                        rate("perfabi_disk_dev_write_bytes_total", by="job, instance, device"),
                        "{{instance}} {{device}} written ({{job}})",
                    ),
                ],
            ),
            (
                "Disk requests",
                "iops",
                "Reads and writes completed per second, by device.",
                [
                    q(
                        rate("perfabi_disk_dev_read_total", by="job, instance, device"),
                        "{{instance}} {{device}} reads ({{job}})",
                    ),
                    q(
                        rate("perfabi_disk_dev_write_total", by="job, instance, device"),
                        "{{instance}} {{device}} writes ({{job}})",
                    ),
                ],
            ),
            (
                "Disk request time",
                "s",
                "Time from issue to the driver to completion, median and "
                "99th percentile (perfabi-bpfd).",
                [
                    q(
                        quantile(p, "perfabi_disk_dev_request_latency", "instance, device"),
                        "{{instance}} {{device}} p" + str(int(p * 100)),
                    )
                    for p in (0.5, 0.99)
                ],
            ),
        ],
    ),
    (
        "Network",
        [
            (
                "Network traffic",
                "Bps",
                "Bytes received and transmitted per second, by interface "
                "(link-layer headers included).",
                [
                    q(
                        rate(
                            "perfabi_network_interface_in_bytes_total",
                            by="job, instance, interface",
                        ),
                        "{{instance}} {{interface}} in ({{job}})",
                    ),
                    q(
                        rate(
                            "perfabi_network_interface_out_bytes_total",
                            by="job, instance, interface",
                        ),
                        "{{instance}} {{interface}} out ({{job}})",
                    ),
                ],
            ),
            (
                "Network packets",
                "pps",
                "Packets received and transmitted per second, by interface.",
                [
                    q(
                        rate(
                            "perfabi_network_interface_in_packets_total",
                            by="job, instance, interface",
                        ),
                        "{{instance}} {{interface}} in ({{job}})",
                    ),
                    q(
                        rate(
                            "perfabi_network_interface_out_packets_total",
                            by="job, instance, interface",
                        ),
                        "{{instance}} {{interface}} out ({{job}})",
                    ),
                ],
            ),
        ],
    ),
    (
        "Scheduler (perfabi-bpfd)",
        [
            (
                "Wakeups and migrations",
                "ops",
                "Task wakeups and migrations between CPUs per second.",
                [
                    q(rate("perfabi_kernel_sched_wakeups_total"), "{{instance}} wakeups"),
                    q(
                        rate("perfabi_kernel_sched_migrations_total"),
                        "{{instance}} migrations",
                    ),
                ],
            ),
            (
                "Wakeup latency",
                "s",
                "Time from a task's wakeup to its running, median and 99th "
                "percentile.",
                [
                    q(
                        quantile(p, "perfabi_kernel_sched_wakeup_latency", "instance"),
                        "{{instance}} p" + str(int(p * 100)),
                    )
                    for p in (0.5, 0.99)
                ],
            ),
        ],
    ),
    (
        "perfabi",
        [
            (
                "Scrapes",
                "short",
                "1 while the endpoint answers (0: it answers 503, its "
                "segment cannot be read, or it is down).",
                [q(f"up{{{SEL}}}", "{{instance}} {{job}}")],
            ),
            (
                "perfabi-exportd refreshes",
                "s",
                "How long one refresh of the host statistics took.",
                [
                    q(
                        f"perfabi_exportd_refresh_us{{{SEL}}} / 1e6",
                        "{{instance}}",
                    )
                ],
            ),
            (
                "perfabi-exportd losses",
                "short",
                "Devices left out (member table full) and DAMON events "
                "lost, over the last 15 minutes.",
                [
                    q(
                        f"increase(perfabi_exportd_skipped_instances_total{{{SEL}}}[15m])",
                        "{{instance}} devices left out",
                    ),
                    q(
                        f"increase(perfabi_exportd_damon_lost_events_total{{{SEL}}}[15m])",
                        "{{instance}} DAMON events lost",
                    ),
                ],
            ),
            (
                "perfabi-prometheus",
                "s",
                "Seconds each endpoint took to read and render its last page.",
                [
                    q(
                        f"perfabi_exporter_scrape_duration_seconds{{{SEL}}}",
                        "{{instance}} {{job}}",
                    )
                ],
            ),
            (
                "perfabi-prometheus memory",
                "bytes",
                "Resident memory of each endpoint.",
                [
                    q(
                        f"process_resident_memory_bytes{{{SEL}}}",
                        "{{instance}} {{job}}",
                    )
                ],
            ),
            (
                "Segment directories",
                "short",
                "Segment files merged by a perfabi-prometheus serving a "
                "directory, and the problems it leaves out, by code.",
                [
                    q(f"perfabi_directory_segments{{{SEL}}}", "{{instance}} segments"),
                    q(
                        f"perfabi_directory_problems{{{SEL}}}",
                        "{{instance}} {{code}}",
                    ),
                ],
            ),
        ],
    ),
]

DATASOURCE = {"type": "prometheus", "uid": "${datasource}"}


def panel(pid, title, unit, description, queries, x, y):
    """One time series panel at grid position (x, y)."""
    return {
        "id": pid,
        "type": "timeseries",
        "title": title,
        "description": description,
        "datasource": DATASOURCE,
        "gridPos": {"h": 8, "w": 12, "x": x, "y": y},
        "fieldConfig": {"defaults": {"unit": unit}, "overrides": []},
        "options": {
            "legend": {"displayMode": "list", "placement": "bottom", "showLegend": True},
            "tooltip": {"mode": "multi", "sort": "desc"},
        },
        "targets": [
            {
                "datasource": DATASOURCE,
                "expr": t["expr"],
                "legendFormat": t["legend"],
                "refId": chr(ord("A") + i),
            }
            for i, t in enumerate(queries)
        ],
    }


def variable(name, label, query):
    """A query variable over the targets' label values (All by default)."""
    return {
        "name": name,
        "label": label,
        "type": "query",
        "datasource": DATASOURCE,
        "query": {"query": query, "refId": name},
        "definition": query,
        "refresh": 2,
        "multi": True,
        "includeAll": True,
        "allValue": ".+",
        "current": {"selected": True, "text": ["All"], "value": ["$__all"]},
        "sort": 1,
    }


def dashboard():
    """Grafana's JSON model of the dashboard."""
    panels = []
    y = 0
    pid = 1
    for row_title, row_panels in ROWS:
        panels.append(
            {
                "id": pid,
                "type": "row",
                "title": row_title,
                "collapsed": False,
                "gridPos": {"h": 1, "w": 24, "x": 0, "y": y},
                "panels": [],
            }
        )
        pid += 1
        y += 1
        for i, (title, unit, description, queries) in enumerate(row_panels):
            x = 0 if i % 2 == 0 else 12
            panels.append(panel(pid, title, unit, description, queries, x, y))
            pid += 1
            if i % 2 == 1 or i == len(row_panels) - 1:
                y += 8
    return {
        "uid": UID,
        "title": "perfabi / Host",
        "description": "Host statistics from perfabi-exportd, kernel "
        "histograms from perfabi-bpfd, and perfabi's own health.",
        "tags": ["perfabi"],
        "editable": True,
        "graphTooltip": 1,
        "refresh": "30s",
        "schemaVersion": 39,
        "time": {"from": "now-1h", "to": "now"},
        "timezone": "",
        "annotations": {"list": []},
        "links": [],
        "templating": {
            "list": [
                {
                    "name": "datasource",
                    "label": "Data source",
                    "type": "datasource",
                    "query": "prometheus",
                    "current": {},
                    "hide": 0,
                },
                variable("job", "Job", 'label_values(up{job=~"perfabi.*"}, job)'),
                variable(
                    "instance",
                    "Instance",
                    'label_values(up{job=~"$job"}, instance)',
                ),
            ]
        },
        "panels": panels,
        "version": 1,
    }


def render():
    """The dashboard's JSON text, as committed."""
    return json.dumps(dashboard(), indent=2, ensure_ascii=False) + "\n"


def main():
    text = render()
    if sys.argv[1:] == ["--check"]:
        if not OUT.exists() or OUT.read_text() != text:
            print(
                f"{OUT} is stale: run python3 {Path(__file__).name} and commit it",
                file=sys.stderr,
            )
            return 1
        return 0
    if sys.argv[1:]:
        print("usage: dashboard.py [--check]", file=sys.stderr)
        return 2
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
