// SPDX-License-Identifier: GPL-2.0
/*
 * perfabi_sources, cost reports: the PERFABI-MEASURE line of one probe's
 * measured cost (module parameter measure=N), called by each subsystem's
 * measurement.
 */
#include <linux/math64.h>
#include <linux/printk.h>

#include "perfabi_src.h"

/**
 * src_report() - log one probe's measured cost against this_cpu_add()
 * @m: the measurement
 * @probe: the probe's name (the marker's key)
 * @ps: picoseconds per call
 */
void src_report(const struct src_measure *m, const char *probe, u64 ps)
{
	u64 r = m->base_ps ? div64_u64(ps * 100, m->base_ps) : 0;

	pr_info("PERFABI-MEASURE sources_%s_ps=%llu this_cpu_add_ps=%llu ratio=%llu.%02llu n=%u\n",
		probe, ps, m->base_ps, div_u64(r, 100), r % 100, m->n);
}
