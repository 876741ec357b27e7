#!/bin/sh
# machine_init.sh WORKDIR HOSTNAME: PID 1 of a namespace machine (machine.py starts it as
#   setpriv --pdeathsig KILL unshare --pid --fork --kill-child --mount-proc --net --uts --ipc
#           --mount --propagation private
# It gives the machine a private view of the host, then reaps orphans until SIGTERM:
#  - /sys is a fresh sysfs (this network namespace's devices), with the host's cgroup
#    hierarchies moved back under /sys/fs/cgroup;
#  - /etc, /run, /var/lib and /var/log are overlays whose upper layers are WORKDIR/ov, so the
#    machine can write there (hostname, hosts, ...) without touching the host;
#  - the dirs a node keeps state in are bind mounts of WORKDIR/data/<dir> (ext4, not overlay:
#    containerd's overlayfs snapshotter cannot use an overlay as its upper dir).
# When this process ends, the kernel kills everything else in the PID namespace and the
# mounts and network devices go with the namespaces.
set -eu
W=$1
NAME=$2
PRIVATE_DIRS="/etc/kubernetes /etc/containerd /etc/cni/net.d /var/lib/kubelet /var/lib/containerd
/var/lib/etcd /var/lib/cni /var/log/pods /var/log/containers /run/containerd"

mkdir -p "$W/cgroup"
mount --rbind /sys/fs/cgroup "$W/cgroup"
umount -l /sys
mount -t sysfs sysfs /sys
mount --move "$W/cgroup" /sys/fs/cgroup

for d in /etc /run /var/lib /var/log; do
  n=$(echo "$d" | tr / _)
  mkdir -p "$W/ov/$n/upper" "$W/ov/$n/work"
  mount -t overlay "shoal-k8s$n" -o "lowerdir=$d,upperdir=$W/ov/$n/upper,workdir=$W/ov/$n/work" "$d"
done
for d in $PRIVATE_DIRS; do
  n=$(echo "$d" | sed 's#^/##; s#/#-#g')
  mkdir -p "$W/data/$n" "$d"
  mount --bind "$W/data/$n" "$d"
done

hostname "$NAME"
echo "$NAME" > /etc/hostname
ip link set lo up
echo ready > "$W/init.ready"
exec /usr/bin/python3 -c '
import os, signal, sys, time
signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
while True:
    try:
        os.wait()
    except ChildProcessError:
        time.sleep(0.2)
'
