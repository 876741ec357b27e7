#!/bin/sh
# ns_init.sh WORKDIR: PID 1 of a fresh PID + network + mount namespace made by host.py with
#   setpriv --pdeathsig KILL unshare --pid --kill-child --net --mount-proc --propagation private
# It gives libvirtd a private view of the host, then runs it and waits for it:
#  - /sys is remounted so that it shows this network namespace's devices (as `ip netns exec` does);
#  - /run, /var/lib, /var/log and /var/cache become overlays whose upper layers live in
#    WORKDIR/ov, so the mount points below can be made without writing to the host;
#  - /run/libvirt, /var/{lib,log,cache}/libvirt and /etc/libvirt are bind mounts of WORKDIR's
#    run, lib, log, cache and etc: the client socket is WORKDIR/run/libvirt-sock on the host;
#  - /etc/passwd and /etc/group are copies that add libvirt-qemu (libvirtd resolves that
#    compiled-in user before it reads qemu.conf's user = "root").
# Nothing is written outside WORKDIR. When this process ends, the kernel kills whatever is left in
# the PID namespace (qemu, dnsmasq), and the network namespace with its bridge goes away.
# SIGTERM stops libvirtd, then this script ends.
set -eu
W=$1

overlay() {
  n=$(echo "$1" | tr / _)
  mkdir -p "$W/ov/$n/upper" "$W/ov/$n/work"
  mount -t overlay "shoal$n" -o "lowerdir=$1,upperdir=$W/ov/$n/upper,workdir=$W/ov/$n/work" "$1"
}

umount -l /sys
mount -t sysfs sysfs /sys
for d in /run /var/lib /var/log /var/cache; do overlay "$d"; done
for d in run lib log cache; do mkdir -p "$W/$d"; done
mkdir -p /run/libvirt /var/lib/libvirt /var/log/libvirt /var/cache/libvirt
[ -d /etc/libvirt ] || { overlay /etc; mkdir /etc/libvirt; }
mount --bind "$W/run" /run/libvirt
mount --bind "$W/lib" /var/lib/libvirt
mount --bind "$W/log" /var/log/libvirt
mount --bind "$W/cache" /var/cache/libvirt
mount --bind "$W/etc" /etc/libvirt
mount --bind "$W/passwd" /etc/passwd
mount --bind "$W/group" /etc/group
ip link set lo up

/usr/sbin/libvirtd >"$W/libvirtd.out" 2>&1 </dev/null &
LV=$!
# PID 1 gets only the signals it handles: pass SIGTERM on to libvirtd
trap 'kill -TERM "$LV" 2>/dev/null || :' TERM INT
# as PID 1, this shell also reaps the orphans libvirt daemonizes (qemu, dnsmasq) while it waits
while kill -0 "$LV" 2>/dev/null; do wait "$LV" || :; done
