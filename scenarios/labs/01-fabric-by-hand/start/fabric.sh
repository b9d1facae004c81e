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
	# ---- modify here: give tor0, h1, tor1 and both uplinks their addresses
	# ---- end modify
	for n in h0 h1 tor0 tor1; do
		ns "$n" ip link set lo up
		for i in $(ns "$n" ls /sys/class/net); do ns "$n" ip link set "$i" up; done
	done
	# 4. Routes: servers send everything to their ToR; each ToR sends the
	#    other rack's /24 over the uplink, and forwards between its ports.
	# ---- modify here: default routes on h0 and h1, a route on each ToR to
	#      the other rack, and IP forwarding on the ToRs (sysctl)
	# ---- end modify
}

down() {
	# ---- modify here: remove every namespace this script made
	:
	# ---- end modify
}

case "${1:-}" in
up) up ;;
down) down ;;
*) echo "usage: $0 up|down" >&2; exit 2 ;;
esac
