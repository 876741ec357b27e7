#!/bin/sh
# node_init.sh WORKDIR HOSTNAME: PID 1 of a local machine (machine.py starts it in new
# PID, mount, network, UTS, IPC and cgroup namespaces, already inside the machine's own
# cgroups). It gives the machine a private view of the host, waits until the host has
# wired its network (WORKDIR/net.ready), runs cloud-init's four stages (NoCloud seed in
# /var/lib/cloud/seed/nocloud), imports the preloaded images once containerd runs, and
# reaps orphans until it is killed:
#  - /sys is this network namespace's sysfs; /sys/fs/cgroup holds fresh mounts of every
#    cgroup hierarchy, whose root is the machine's own cgroup (cgroup namespace);
#  - /etc, /run, /var/lib, /var/log and /usr/local are overlays on the host's (upper
#    layers in WORKDIR/ov), so the machine writes there without touching the host;
#  - the dirs a node keeps state in are bind mounts of WORKDIR/data/<dir> (not overlay:
#    containerd's overlayfs snapshotter cannot use an overlay as its upper dir);
#  - the host's systemd and D-Bus sockets are hidden: nothing inside reaches the host's.
set -eu
W=$1
NAME=$2
PRIVATE_DIRS="/etc/kubernetes /etc/containerd /etc/cni/net.d /var/lib/kubelet /var/lib/containerd
/var/lib/etcd /var/lib/cni /var/log/pods /var/log/containers /run/containerd"

grep -E '^[^ ]+ /sys/fs/cgroup/[^ ]+ cgroup2? ' /proc/self/mounts > "$W/cgroup.mounts" || true
: > "$W/cgroup.links"
for l in /sys/fs/cgroup/*; do
  if [ -L "$l" ]; then echo "$(basename "$l") $(readlink "$l")" >> "$W/cgroup.links"; fi
done
umount -l /sys
mount -t sysfs sysfs /sys
mount -t tmpfs -o mode=755 cgroup /sys/fs/cgroup
while read -r _src dir fstype opts _rest; do
  o=$(echo "$opts" | tr , '\n' | grep -vE '^(rw|ro|relatime|noatime|nosuid|nodev|noexec)$' | paste -sd, -)
  mkdir -p "$dir"
  if [ -n "$o" ]; then mount -t "$fstype" -o "$o" "$fstype" "$dir"; else mount -t "$fstype" "$fstype" "$dir"; fi
done < "$W/cgroup.mounts"
while read -r link target; do ln -s "$target" "/sys/fs/cgroup/$link"; done < "$W/cgroup.links"

for d in /etc /run /var/lib /var/log /usr/local; do
  n=$(echo "$d" | tr / _)
  mkdir -p "$W/ov/$n/upper" "$W/ov/$n/work"
  mount -t overlay "shoal-local$n" -o "lowerdir=$d,upperdir=$W/ov/$n/upper,workdir=$W/ov/$n/work" "$d"
done
rm -rf /run/systemd /run/dbus
for d in $PRIVATE_DIRS; do
  n=$(echo "$d" | sed 's#^/##; s#/#-#g')
  mkdir -p "$W/data/$n" "$d"
  mount --bind "$W/data/$n" "$d"
done

hostname "$NAME"
echo "$NAME" > /etc/hostname
ip link set lo up
echo ready > "$W/init.ready"

(
  i=0
  while [ ! -e "$W/net.ready" ] && [ $i -lt 600 ]; do sleep 0.1; i=$((i + 1)); done
  {
    cloud-init init --local && cloud-init init && cloud-init modules --mode config &&
      cloud-init modules --mode final
    echo "cloud-init stages exited $?"
  } > "$W/log/cloud-init.out" 2>&1 < /dev/null
) &
if [ -s "$W/preload" ]; then
  (
    i=0
    while ! ctr version > /dev/null 2>&1 && [ $i -lt 3600 ]; do sleep 1; i=$((i + 1)); done
    # "import ARCHIVE [NAME...]": import, then tag the image it held with each NAME
    while read -r verb archive names; do
      [ "$verb" = import ] || continue
      ref=$(ctr -n k8s.io images import "$archive" | sed -n 's/^unpacking \([^ ]*\) .*/\1/p' | head -n 1)
      for name in $names; do ctr -n k8s.io images tag --force "$ref" "$name"; done
    done < "$W/preload"
    echo "preload done"
  ) > "$W/log/preload.out" 2>&1 < /dev/null &
fi
exec /usr/bin/python3 -c '
import os, time
while True:
    try:
        os.wait()
    except ChildProcessError:
        time.sleep(0.2)
'
