#!/bin/bash
# build_guest.sh KERNEL_PACKAGE OUT_DIR: the tiny test guest, built only from Debian packages.
#   OUT_DIR/vmlinuz    the kernel of KERNEL_PACKAGE (apt-get download + dpkg-deb -x: not installed)
#   OUT_DIR/initrd.gz  ~1.2 MB: busybox-static, the 8 virtio-net modules, guest/init, guest/udhcpc.sh
# Needs apt-get, dpkg-deb, gzip and /bin/busybox (package busybox-static). host.py caches OUT_DIR.
set -euo pipefail
KPKG=$1
OUT=$2
HERE=$(cd "$(dirname "$0")" && pwd)
MODULES="virtio_ring virtio virtio_pci_legacy_dev virtio_pci_modern_dev virtio_pci failover
         net_failover virtio_net"

tmp=$(mktemp -d "${TMPDIR:-/tmp}/shoal-guest-build.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
# as root, apt would hand the download to user _apt, who cannot write into this private dir
(cd "$tmp" && apt-get download -q -o APT::Sandbox::User=root "$KPKG" >/dev/null && dpkg-deb -x ./*.deb x)

mkdir -p "$OUT"
cp "$tmp"/x/boot/vmlinuz-* "$OUT/vmlinuz"
root=$tmp/root
mkdir -p "$root"/{bin,dev,proc,sys,tmp,www,lib/modules}
cp /bin/busybox "$root/bin/busybox"
for m in $MODULES; do
  ko=$(find "$tmp/x/lib/modules" -name "$m.ko" | head -n 1)
  [[ -n $ko ]] || { echo "build_guest: module $m.ko not found in $KPKG" >&2; exit 1; }
  cp "$ko" "$root/lib/modules/"
done
install -m 755 "$HERE/guest/init" "$root/init"
install -m 755 "$HERE/guest/udhcpc.sh" "$root/udhcpc.sh"
# Debian has no cpio binary by default: busybox's applet writes the newc archive
(cd "$root" && find . | /bin/busybox cpio -o -H newc 2>/dev/null | gzip -1) > "$OUT/initrd.gz"
