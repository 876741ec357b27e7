#!/bin/sh
# busybox udhcpc's event script for the tiny guest: apply the lease to the interface.
case "$1" in
  bound|renew)
    ip addr flush dev "$interface"
    ip addr add "$ip/$mask" dev "$interface"
    [ -n "$router" ] && ip route add default via "${router%% *}"
    ;;
esac
exit 0
