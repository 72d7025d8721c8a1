/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The network group, network.interface.{in,out}.{packets,bytes} per
 * device, counted as perfabi_sources.ko counts them (read the header
 * comment of kmod/perfabi_src_net.c):
 *
 * Received: one packet per netif_receive_skb, bytes skb->len plus the
 * link-layer header the driver already pulled (skb->data - mac header),
 * as drivers count for /proc/net/dev. The tracepoint fires once per skb
 * as the stack receives it: an skb GRO merged from several frames counts
 * once here while a driver counts every frame, and a packet re-injected by
 * a stacked device (VLAN, bridge, bond) is seen with its lower device
 * only. Transmitted: net_dev_xmit with rc NETDEV_TX_OK (0), bytes the
 * tracepoint's skb_len. A loopback device (IFF_LOOPBACK) counts without
 * the link-layer header both ways, as its driver does.
 *
 * Devices are found by the loader (src/net.rs, every 250 ms) in the
 * network namespace it runs in (the initial one for a daemon started on
 * the host, as the module's) and put in `net_devs` under their key
 * (namespace inode, ifindex): a device of another namespace is not in
 * the map, so it is not counted, and the same ifindex in two namespaces
 * is two keys. A packet of a device not (yet) in `net_devs` is not
 * counted.
 */
#ifndef __PERFABI_NET_BPF_H
#define __PERFABI_NET_BPF_H

/* A device's key in `net_devs` (src/net.rs builds the same bytes). */
struct net_key {
	__u32 netns;	/* its network namespace's inode (ns.inum) */
	__u32 ifindex;
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 1024);
	__type(key, struct net_key);
	__type(value, struct inst);
} net_devs SEC(".maps");

/* NETDEV_TX_OK (include/linux/netdevice.h): the driver took the skb. */
#define NET_TX_OK 0

/* skb->mac_header when no mac header is set (skb_mac_header_was_set(),
 * include/linux/skbuff.h: the field's all-ones value). */
#define NET_MAC_UNSET 0xffff

static __always_inline struct inst *net_find(bool btf, struct net_device *dev)
{
	struct net_key k = {};

	k.netns = btf ? dev->nd_net.net->ns.inum : BPF_CORE_READ(dev, nd_net.net, ns.inum);
	k.ifindex = KREAD(btf, dev, ifindex);
	return bpf_map_lookup_elem(&net_devs, &k);
}

/* netif_receive_skb: one packet; its bytes with the link-layer header. */
static __always_inline void handle_net_rx(bool btf, struct sk_buff *skb)
{
	struct net_device *dev = KREAD(btf, skb, dev);
	__u64 len, head, data, mac;
	struct inst *d;

	if (!dev)
		return;
	d = net_find(btf, dev);
	if (!d)
		return;
	len = KREAD(btf, skb, len);
	mac = KREAD(btf, skb, mac_header);
	if (!(KREAD(btf, dev, flags) & IFF_LOOPBACK) && mac != NET_MAC_UNSET) {
		head = (__u64)KREAD(btf, skb, head);
		data = (__u64)KREAD(btf, skb, data);
		if (head + mac < data)
			len += data - (head + mac);
	}
	value_add(d->slot + PERFABI_FAM_NET_IN_PACKETS_AT, 1);
	value_add(d->slot + PERFABI_FAM_NET_IN_BYTES_AT, len);
}

/* net_dev_xmit: sent if the driver took it. */
static __always_inline void handle_net_tx(bool btf, int rc, struct net_device *dev,
					  unsigned int skb_len)
{
	unsigned int hdr;
	struct inst *d;

	if (rc != NET_TX_OK || !dev)
		return;
	d = net_find(btf, dev);
	if (!d)
		return;
	if (KREAD(btf, dev, flags) & IFF_LOOPBACK) {
		hdr = KREAD(btf, dev, hard_header_len);
		skb_len -= skb_len < hdr ? skb_len : hdr;
	}
	value_add(d->slot + PERFABI_FAM_NET_OUT_PACKETS_AT, 1);
	value_add(d->slot + PERFABI_FAM_NET_OUT_BYTES_AT, skb_len);
}

SEC("tp_btf/netif_receive_skb")
int BPF_PROG(tp_net_rx, struct sk_buff *skb)
{
	handle_net_rx(true, skb);
	return 0;
}

SEC("raw_tp/netif_receive_skb")
int BPF_PROG(raw_net_rx, struct sk_buff *skb)
{
	handle_net_rx(false, skb);
	return 0;
}

SEC("tp_btf/net_dev_xmit")
int BPF_PROG(tp_net_tx, struct sk_buff *skb, int rc, struct net_device *dev,
	     unsigned int skb_len)
{
	handle_net_tx(true, rc, dev, skb_len);
	return 0;
}

SEC("raw_tp/net_dev_xmit")
int BPF_PROG(raw_net_tx, struct sk_buff *skb, int rc, struct net_device *dev,
	     unsigned int skb_len)
{
	handle_net_tx(false, rc, dev, skb_len);
	return 0;
}

#endif /* __PERFABI_NET_BPF_H */
