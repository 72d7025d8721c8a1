/*
 * The perfabi PMDA's performance metrics domain (unassigned in PCP's
 * stdpmid as of PCP 6; the agent's -d option changes it).
 */
#define PERFABI 502
