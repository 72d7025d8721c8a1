// SPDX-License-Identifier: GPL-2.0
/*
 * perfabi_sources, tracepoints: a subsystem's tracepoints found by name
 * (for_each_kernel_tracepoint(), exported) and attached or detached
 * together.
 */
#include <linux/tracepoint.h>
#include <linux/string.h>
#include <linux/printk.h>

#include "perfabi_src.h"

struct src_tp_find {
	struct src_tp *tps;
	unsigned int nr;
};

static void src_tp_match(struct tracepoint *tp, void *priv)
{
	struct src_tp_find *f = priv;
	unsigned int i;

	for (i = 0; i < f->nr; i++)
		if (!f->tps[i].tp && !strcmp(tp->name, f->tps[i].name))
			f->tps[i].tp = tp;
}

/**
 * src_tps_find() - find a subsystem's tracepoints by name
 * @tps: the tracepoints (names and probes; the tp fields are filled)
 * @nr: how many
 * @subsys: the subsystem's name, for the log line
 *
 * Return: 0 if all are there, else -ENOENT (one dmesg line).
 */
int src_tps_find(struct src_tp *tps, unsigned int nr, const char *subsys)
{
	struct src_tp_find f = { tps, nr };
	unsigned int i;

	for (i = 0; i < nr; i++)
		tps[i].tp = NULL;
	for_each_kernel_tracepoint(src_tp_match, &f);
	for (i = 0; i < nr; i++) {
		if (!tps[i].tp) {
			pr_info(SRC_PFX "%s source off: this kernel has no %s tracepoint\n",
				subsys, tps[i].name);
			return -ENOENT;
		}
	}
	return 0;
}

/**
 * src_tps_register() - attach a subsystem's probes (src_tps_find() first)
 * @tps: the tracepoints
 * @nr: how many
 * @data: the probes' first argument
 * @subsys: the subsystem's name, for the log line
 *
 * All or nothing: on an error, the probes attached are detached and
 * waited for, so the caller may free what they use.
 *
 * Context: process context; may sleep.
 * Return: 0 or the error (logged).
 */
int src_tps_register(struct src_tp *tps, unsigned int nr, void *data, const char *subsys)
{
	unsigned int i;
	int err;

	for (i = 0; i < nr; i++) {
		err = tracepoint_probe_register(tps[i].tp, tps[i].probe, data);
		if (err) {
			pr_warn(SRC_PFX "%s source off: cannot attach to %s: %d\n", subsys,
				tps[i].name, err);
			src_tps_unregister(tps, i, data);
			/*
			 * The probes attached until now may be running on
			 * other CPUs: the caller frees what they use next.
			 */
			tracepoint_synchronize_unregister();
			return err;
		}
	}
	return 0;
}

/**
 * src_tps_unregister() - detach probes src_tps_register() attached
 * @tps: the tracepoints
 * @nr: how many
 * @data: the probes' first argument, as registered
 *
 * The caller waits for running probes (tracepoint_synchronize_unregister())
 * before freeing anything they use.
 *
 * Context: process context; may sleep.
 */
void src_tps_unregister(struct src_tp *tps, unsigned int nr, void *data)
{
	unsigned int i;

	for (i = 0; i < nr; i++)
		tracepoint_probe_unregister(tps[i].tp, tps[i].probe, data);
}
