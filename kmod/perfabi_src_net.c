// SPDX-License-Identifier: GPL-2.0
/*
 * perfabi_sources, net: network.interface.* per device of the initial
 * network namespace (the module's; devices of other namespaces are
 * ignored, and a device moved out of the initial one leaves it as
 * NETDEV_UNREGISTER says) from netif_receive_skb and net_dev_xmit.
 *
 * Received: one packet per netif_receive_skb, bytes skb->len plus the
 * link-layer header the driver already pulled (skb->data - mac header),
 * as drivers count for /proc/net/dev. The tracepoint fires once per skb
 * as the stack receives it: an skb GRO merged from several frames counts
 * once here while a driver counts every frame, and a packet re-injected
 * by a stacked device (VLAN, bridge, bond) is seen with its lower device
 * only. Transmitted: net_dev_xmit with rc NETDEV_TX_OK (0), bytes the
 * tracepoint's skb_len. The loopback driver is the exception: it counts
 * both ways after eth_type_trans() pulled the Ethernet header, so for a
 * loopback device (IFF_LOOPBACK) the header is left out both ways too, and
 * the counts equal /proc/net/dev's.
 *
 * Devices come and go through the netdevice notifier (NETDEV_REGISTER,
 * NETDEV_UNREGISTER, NETDEV_CHANGENAME; registering replays REGISTER for
 * the devices that exist). The notifier runs in process context under
 * RTNL, where sleeping is allowed: the perfabi instance calls are made
 * right there, so that instances exist as soon as the device does. They
 * sleep only on the perfabi module's own mutex (which is never held while
 * taking RTNL) and at most one RCU grace period, when value words are
 * reused. Probes look the device pointer up (compared, never
 * dereferenced) in an RCU hash of this module's entries.
 */
#include <linux/netdevice.h>
#include <linux/skbuff.h>
#include <linux/if_ether.h>
#include <linux/slab.h>
#include <linux/mutex.h>
#include <linux/rculist.h>
#include <linux/tracepoint.h>
#include <net/net_namespace.h>

#include "perfabi_src.h"

#define SRC_NET_HASH_BITS 8

enum { N_IN_PKTS, N_IN_BYTES, N_OUT_PKTS, N_OUT_BYTES, N_NR };
static const enum perfabi_fam net_fams[N_NR] = {
	PERFABI_FAM_NET_IN_PACKETS, PERFABI_FAM_NET_IN_BYTES, PERFABI_FAM_NET_OUT_PACKETS,
	PERFABI_FAM_NET_OUT_BYTES,
};

struct src_netdev {
	struct hlist_node node;		/* in src_net_ctx.devs (RCU), if !skipped */
	struct list_head list;		/* in netdev_list, under netdev_lock */
	const struct net_device *dev;	/* a key: never dereferenced by probes */
	bool skipped;
	bool l3;			/* loopback: counts without the link-layer header */
	unsigned short tx_hdr;		/* l3: the header to take off a sent skb's length */
	struct perfabi_member_handle *m[N_NR];
	char name[SRC_INSTANCE_LEN];
	struct rcu_head rcu;
};

struct src_net_ctx {
	struct hlist_head devs[1 << SRC_NET_HASH_BITS];
};

static struct src_net_ctx net_ctx;
static LIST_HEAD(netdev_list);
static DEFINE_MUTEX(netdev_lock);
static bool notifier_on;

static __always_inline struct src_netdev *netdev_find(const struct src_net_ctx *c,
						      const struct net_device *dev)
{
	struct src_netdev *n;

	hlist_for_each_entry_rcu(n, &c->devs[hash_ptr(dev, SRC_NET_HASH_BITS)], node)
		if (n->dev == dev)
			return n;
	return NULL;
}

/* netif_receive_skb: one packet; its bytes with the link-layer header. */
static void probe_rx(void *data, struct sk_buff *skb)
{
	struct src_netdev *n = netdev_find(data, skb->dev);
	unsigned int len = skb->len;

	if (!n)
		return;
	if (!n->l3 && skb_mac_header_was_set(skb) && skb_mac_header(skb) < skb->data)
		len += skb->data - skb_mac_header(skb);
	perfabi_member_add(n->m[N_IN_PKTS], 1);
	perfabi_member_add(n->m[N_IN_BYTES], len);
}

/* net_dev_xmit: sent if the driver took it (NETDEV_TX_OK). */
static void probe_tx(void *data, struct sk_buff *skb, int rc, struct net_device *dev,
		     unsigned int skb_len)
{
	struct src_netdev *n;

	if (rc != NETDEV_TX_OK)
		return;
	n = netdev_find(data, dev);
	if (!n)
		return;
	perfabi_member_add(n->m[N_OUT_PKTS], 1);
	perfabi_member_add(n->m[N_OUT_BYTES], skb_len - min(skb_len, (unsigned int)n->tx_hdr));
}

static struct src_tp net_tps[] = {
	{ .name = "netif_receive_skb", .probe = probe_rx },
	{ .name = "net_dev_xmit", .probe = probe_tx },
};

static struct src_netdev *netdev_entry(const struct net_device *dev)
{
	struct src_netdev *n;

	list_for_each_entry(n, &netdev_list, list)
		if (n->dev == dev)
			return n;
	return NULL;
}

static void netdev_remove(struct src_netdev *n)
{
	list_del(&n->list);
	if (!n->skipped) {
		hlist_del_rcu(&n->node);
		src_instances_del(n->m, N_NR);
	}
	kfree_rcu(n, rcu);
}

static void netdev_add(const struct net_device *dev)
{
	struct src_netdev *n = kzalloc(sizeof(*n), GFP_KERNEL);

	if (!n)
		return;
	n->dev = dev;
	if (dev->flags & IFF_LOOPBACK) {
		n->l3 = true;
		n->tx_hdr = dev->hard_header_len;
	}
	src_instance_name(n->name, dev->name);
	list_add_tail(&n->list, &netdev_list);
	if (src_instances_add(net_fams, N_NR, n->name, n->m)) {
		n->skipped = true;
		return;
	}
	hlist_add_head_rcu(&n->node, &net_ctx.devs[hash_ptr(dev, SRC_NET_HASH_BITS)]);
}

static int netdev_event(struct notifier_block *nb, unsigned long event, void *ptr)
{
	struct net_device *dev = netdev_notifier_info_to_dev(ptr);
	struct src_netdev *n;

	if (!net_eq(dev_net(dev), &init_net))
		return NOTIFY_DONE;
	if (event != NETDEV_REGISTER && event != NETDEV_UNREGISTER &&
	    event != NETDEV_CHANGENAME)
		return NOTIFY_DONE;
	mutex_lock(&netdev_lock);
	n = netdev_entry(dev);
	/* A new name is a new instance string: the old instance goes. */
	if (n && event != NETDEV_REGISTER)
		netdev_remove(n);
	if (event != NETDEV_UNREGISTER && (!n || event == NETDEV_CHANGENAME))
		netdev_add(dev);
	mutex_unlock(&netdev_lock);
	return NOTIFY_DONE;
}

static struct notifier_block netdev_nb = {
	.notifier_call = netdev_event,
};

/**
 * src_net_start() - the net source: families, devices, probes
 *
 * Context: process context (module load); may sleep.
 * Return: 0, or an error: the source is off (logged).
 */
int src_net_start(void)
{
	int err;

#ifndef PERFABI_SRC_NET_PROTO
	pr_info(SRC_PFX "net source off: built for a kernel whose netif_receive_skb/net_dev_xmit prototypes differ from the probes'\n");
	return -EOPNOTSUPP;
#endif
	err = src_tps_find(net_tps, ARRAY_SIZE(net_tps), "net");
	if (err)
		return err;
	err = src_families_add(PERFABI_FAM_NET_FIRST, PERFABI_FAM_NET_LAST);
	if (err)
		return err;
	err = register_netdevice_notifier(&netdev_nb);
	if (err) {
		pr_warn(SRC_PFX "net source off: register_netdevice_notifier: %d\n", err);
		goto free;
	}
	notifier_on = true;
	err = src_tps_register(net_tps, ARRAY_SIZE(net_tps), &net_ctx, "net");
	if (err)
		goto free;
	return 0;
free:
	src_net_free();
	return err;
}

/** src_net_stop_probes() - detach the net probes (the caller waits for them) */
void src_net_stop_probes(void)
{
	src_tps_unregister(net_tps, ARRAY_SIZE(net_tps), &net_ctx);
}

/**
 * src_net_free() - stop hearing of devices, delete the net families, free all
 *
 * Context: process context, no probe running any more; may sleep.
 */
void src_net_free(void)
{
	struct src_netdev *n, *tmp;

	if (notifier_on)
		unregister_netdevice_notifier(&netdev_nb);
	notifier_on = false;
	mutex_lock(&netdev_lock);
	list_for_each_entry_safe(n, tmp, &netdev_list, list)
		netdev_remove(n);
	mutex_unlock(&netdev_lock);
	src_families_del(PERFABI_FAM_NET_FIRST, PERFABI_FAM_NET_LAST);
}

/**
 * src_net_measure() - time the net probes on a scratch device
 * @m: the scratch members and iterations
 *
 * A real skb of 100 bytes (14 of them an Ethernet header already pulled)
 * whose dev is a scratch key, in a scratch context holding one device.
 */
void src_net_measure(const struct src_measure *m)
{
	static const char fake_dev;
	struct net_device *dev = (struct net_device *)&fake_dev;
	struct src_net_ctx *c = kzalloc(sizeof(*c), GFP_KERNEL);
	struct src_netdev *n = kzalloc(sizeof(*n), GFP_KERNEL);
	struct sk_buff *skb = alloc_skb(256, GFP_KERNEL);
	unsigned int i;
	u64 ps;

	if (!c || !n || !skb)
		goto out;
	skb_reserve(skb, NET_IP_ALIGN);
	skb_put(skb, 100);
	skb_reset_mac_header(skb);
	skb_pull(skb, ETH_HLEN);
	skb->dev = dev;
	n->dev = dev;
	for (i = 0; i < N_NR; i++)
		n->m[i] = m->cnt;
	hlist_add_head_rcu(&n->node, &c->devs[hash_ptr(dev, SRC_NET_HASH_BITS)]);
	ps = SRC_TIME_PS(m->n, probe_rx(c, skb));
	src_report(m, "netif_receive_skb", ps);
	ps = SRC_TIME_PS(m->n, probe_tx(c, skb, NETDEV_TX_OK, dev, skb->len));
	src_report(m, "net_dev_xmit", ps);
	skb->dev = NULL;
out:
	kfree_skb(skb);
	kfree(n);
	kfree(c);
}
