// SPDX-License-Identifier: GPL-2.0
/*
 * perfabi's eBPF writer: the families of perfabi_sources.ko (the one
 * definition, kmod/families, generated into perfabi_families.h) written
 * into a perfabi segment that lives in the BPF_F_MMAPABLE array map
 * `segment` (value_size 4096: element i is page i of the segment,
 * spec/PERFABI.md §9.1).
 *
 * The loader (perfabi-bpfd) lays the segment out with the Rust core's own
 * geometry before loading, fills the map, freezes it (BPF_MAP_FREEZE: no
 * process writes it from then on) and pins it. Only BPF writes it after
 * that: the tracepoint programs, per CPU, and the BPF_PROG_TYPE_SYSCALL
 * program `control` (heartbeat, close, the tables of instances that come
 * and go), which the loader runs with BPF_PROG_TEST_RUN.
 *
 * One object, one header per concern:
 *	seg.bpf.h	the map, the loader's globals, value_add(),
 *			hist_observe(), the nest-aware seq, the heartbeat
 *	sched.bpf.h	kernel.all.pswitch, kernel.sched.* (per CPU)
 *	block.bpf.h	disk.dev.* (per disk)
 *	net.bpf.h	network.interface.* (per device)
 *	irq.bpf.h	kernel.interrupts.* (per IRQ)
 *	damon.bpf.h	DAMON regions into the per-CPU rings
 *	control.bpf.h	the `control` program
 * Every tracepoint program comes twice, `tp_btf/` and `raw_tp/` calling
 * the same handler: the loader loads one flavour, by section prefix.
 */
#include "vmlinux_min.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>

#include "perfabi_families.h"

char LICENSE[] SEC("license") = "GPL";

#include "seg.bpf.h"
#include "sched.bpf.h"
#include "block.bpf.h"
#include "net.bpf.h"
#include "irq.bpf.h"
#include "damon.bpf.h"
#include "control.bpf.h"
