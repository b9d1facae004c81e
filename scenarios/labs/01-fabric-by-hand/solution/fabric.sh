#!/usr/bin/env bash
# Lab 01: two racks by hand. h0 -- tor0 == tor1 -- h1
#   fabric.sh up     build it        fabric.sh down   remove it
# Every namespace name starts with $P (the checker sets it; default lab01-).
set -euo pipefail
P=${P:-lab01-}
ns() { ip netns exec "$P$1" "${@:2}"; }

up() {
	# 1. One network namespace per node.
	for n in h0 h1 tor0 tor1; do ip netns add "$P$n"; done
	# 2. Cables: a veth pair per link, each end made inside its node (so
	#    no name is ever used outside our namespaces, where a classmate's
	#    script could be making the same one).
	ip link add eth0 netns "${P}h0" type veth peer name s0 netns "${P}tor0"
	ip link add eth0 netns "${P}h1" type veth peer name s0 netns "${P}tor1"
	ip link add up0 netns "${P}tor0" type veth peer name up0 netns "${P}tor1"
	# 3. Addresses: one /24 per rack, the ToR is .1; a /31 between the ToRs.
	ns h0 ip addr add 10.1.0.2/24 dev eth0
	ns tor0 ip addr add 10.1.0.1/24 dev s0
	ns h1 ip addr add 10.1.1.2/24 dev eth0
	ns tor1 ip addr add 10.1.1.1/24 dev s0
	ns tor0 ip addr add 10.255.0.0/31 dev up0
	ns tor1 ip addr add 10.255.0.1/31 dev up0
	for n in h0 h1 tor0 tor1; do
		ns "$n" ip link set lo up
		for i in $(ns "$n" ls /sys/class/net); do ns "$n" ip link set "$i" up; done
	done
	# 4. Routes: servers send everything to their ToR; each ToR sends the
	#    other rack's /24 over the uplink, and forwards between its ports.
	ns h0 ip route add default via 10.1.0.1
	ns h1 ip route add default via 10.1.1.1
	ns tor0 ip route add 10.1.1.0/24 via 10.255.0.1
	ns tor1 ip route add 10.1.0.0/24 via 10.255.0.0
	ns tor0 sysctl -qw net.ipv4.ip_forward=1
	ns tor1 sysctl -qw net.ipv4.ip_forward=1
}

down() {
	# Deleting a namespace deletes the veth ends inside it, and so the pairs.
	for n in h0 h1 tor0 tor1; do ip netns delete "$P$n" 2>/dev/null || true; done
}

case "${1:-}" in
up) up ;;
down) down ;;
*) echo "usage: $0 up|down" >&2; exit 2 ;;
esac
