#!/usr/bin/env bash
# Runs host-built binaries against REAL libibverbs and the REAL Soft-RoCE kernel driver (rdma_rxe)
# inside a QEMU guest (TCG: no KVM needed), for `make test-rxe` and `make bench-rxe`.
#   rxe_vm.sh WORKDIR GUEST_SCRIPT [FILE...]
# FILEs (binaries and scripts) are copied to the guest's /bin with the shared libraries they need;
# GUEST_SCRIPT runs as /bin/run.sh with rxe0 up (bound to a guest-internal dummy netdev,
# 192.0.2.1: no traffic leaves the guest). Its output goes to WORKDIR/console.log and stdout;
# the exit code is the script's. Everything comes from Debian packages: this script installs
# qemu-system-x86, busybox-static, ibverbs-providers, ibverbs-utils, rdma-core, perftest, cpio and
# iproute2 when missing (apt-get update first; needs root), and extracts the kernel and its
# modules from the linux-image-amd64 package (downloaded, not installed).
set -euo pipefail
W=$1; SCRIPT=$(realpath "$2"); shift 2
FILES=(); for f in "$@"; do FILES+=("$(realpath "$f")"); done
mkdir -p "$W"; W=$(cd "$W" && pwd)
PKGS="qemu-system-x86 busybox-static ibverbs-providers ibverbs-utils rdma-core perftest cpio iproute2"
missing=""
for p in $PKGS; do dpkg -s "$p" >/dev/null 2>&1 || missing="$missing $p"; done
if [ -n "$missing" ]; then
  if [ "$(id -u)" != 0 ]; then echo "rxe_vm: missing packages:$missing (run as root to install them)" >&2; exit 1; fi
  echo "rxe_vm: installing$missing" >&2
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq >/dev/null
  apt-get install -y -qq --no-install-recommends $missing >/dev/null
fi
cd "$W"
if [ ! -d kernel/lib/modules ]; then
  [ -n "$(apt-cache policy linux-image-amd64 | awk '/Candidate:/{print $2}' | grep -v none)" ] || apt-get update -qq >/dev/null
  KPKG=$(apt-cache depends linux-image-amd64 | awk '/Depends: linux-image-[0-9]/{print $2; exit}')
  echo "rxe_vm: downloading $KPKG (kernel + rdma_rxe module)" >&2
  rm -rf kernel kernel.tmp && mkdir kernel.tmp
  (cd kernel.tmp && apt-get download -qq "$KPKG" >/dev/null && dpkg-deb -x ./*.deb . && rm -f ./*.deb)
  mv kernel.tmp kernel
fi
KVER=$(ls kernel/lib/modules | head -1); KDIR=kernel/lib/modules/$KVER
R=$W/root; rm -rf "$R"; mkdir -p "$R"/{bin,proc,sys,dev,tmp,mods,etc/libibverbs.d}
cp /bin/busybox "$R/bin/"
for a in sh mount insmod ip sleep echo cat poweroff kill ls grep sed awk head tail wc date mkdir rm env true false uname cut tr dmesg; do
  ln -s busybox "$R/bin/$a"; done
# rdma_rxe needs the crc32 crypto algorithm: without crc32_generic "rdma link add" fails with ENOENT
for m in crc32_generic udp_tunnel ip6_udp_tunnel ib_core ib_uverbs rdma_rxe dummy; do
  f=$(find "$KDIR" -name "$m.ko*" | head -1)
  case "$f" in
    *.xz) xz -dc "$f" > "$R/mods/$m.ko";;
    *.zst) zstd -qdc "$f" > "$R/mods/$m.ko";;
    *) cp "$f" "$R/mods/$m.ko";;
  esac
done
PROV=$(ls /usr/lib/x86_64-linux-gnu/libibverbs/librxe-rdmav*.so | head -1)
mkdir -p "$R$(dirname "$PROV")"; cp "$PROV" "$R$PROV"; cp /etc/libibverbs.d/rxe.driver "$R/etc/libibverbs.d/"
LIBV=$(ls /usr/lib/x86_64-linux-gnu/libibverbs.so.1* | head -1)
BINS=(/usr/bin/rdma /usr/bin/ibv_devices /usr/bin/ibv_devinfo /usr/bin/ib_write_bw /usr/bin/ib_write_lat)
for b in "${BINS[@]}" "${FILES[@]}"; do cp "$b" "$R/bin/"; done
cp "$SCRIPT" "$R/bin/run.sh"; chmod +x "$R/bin/run.sh"
# shared libraries: those of every ELF copied, plus libibverbs itself (our binaries dlopen it)
for f in "${BINS[@]}" "${FILES[@]}" "$PROV" "$LIBV"; do
  ldd "$f" 2>/dev/null || true
done | awk '/=>/ {print $3} /ld-linux/ {print $1}' | sort -u | while read -r l; do
  [ -e "$l" ] || continue; mkdir -p "$R$(dirname "$l")"; cp -L "$l" "$R$l"; done
mkdir -p "$R$(dirname "$LIBV")"; cp -L "$LIBV" "$R$(dirname "$LIBV")/libibverbs.so.1"
cat > "$R/init" <<'INIT'
#!/bin/sh
mount -t proc proc /proc; mount -t sysfs sys /sys; mount -t devtmpfs dev /dev
for m in crc32_generic udp_tunnel ip6_udp_tunnel ib_core ib_uverbs rdma_rxe; do insmod /mods/$m.ko; done
insmod /mods/dummy.ko numdummies=1; ip link set lo up
ip addr add 192.0.2.1/24 dev dummy0; ip link set dummy0 up
rdma link add rxe0 type rxe netdev dummy0
ulimit -l unlimited 2>/dev/null
echo "RXE_VM_UP $(uname -r) $(ibv_devices | grep -c rxe0) device(s)"
/bin/run.sh; echo "RXE_VM_EXIT rc=$?"
poweroff -f
INIT
chmod +x "$R/init"
(cd "$R" && find . | cpio -o -H newc 2>/dev/null | gzip -1) > initrd.gz
# A guest kernel that hangs while booting under TCG (RCU stalls, seen once in CI, never reaching
# /init) is killed once RXE_VM_BOOT seconds pass without RXE_VM_UP, and booted once more.
set +e
for attempt in 1 2; do
  timeout "${RXE_VM_TIMEOUT:-900}" qemu-system-x86_64 -accel tcg -cpu max -m "${RXE_VM_MEM:-3072}" -smp 2 -nic none -nographic -no-reboot \
    -kernel kernel/boot/vmlinuz-"$KVER" -initrd initrd.gz -append "console=ttyS0 quiet panic=-1" </dev/null > console.log 2>&1 &
  qpid=$!
  waited=0
  while kill -0 "$qpid" 2>/dev/null && [ "$waited" -lt "${RXE_VM_BOOT:-300}" ] && ! grep -aq RXE_VM_UP console.log; do
    sleep 5; waited=$((waited + 5))
  done
  if kill -0 "$qpid" 2>/dev/null && ! grep -aq RXE_VM_UP console.log; then
    kill "$qpid" 2>/dev/null; wait "$qpid"
    echo "rxe_vm: attempt $attempt: the guest did not reach /init within ${RXE_VM_BOOT:-300} s; console ends:" >&2
    tr -d '\r' < console.log | tail -3 >&2
    qrc=124
    continue
  fi
  wait "$qpid"
  qrc=$?
  break
done
set -e
tr -d '\r' < console.log | grep -av '^\s*$' | grep -aEv '^\[ *[0-9]+\.[0-9]+\]' | grep -av 'SeaBIOS\|Booting from' | sed 's/\x1b[[0-9;?]*[a-zA-Z]//g' || true
rc=$(tr -d '\r' < console.log | sed -n 's/^RXE_VM_EXIT rc=\([0-9]*\).*/\1/p' | tail -1)
if [ -z "$rc" ]; then echo "rxe_vm: the guest did not finish (qemu exit $qrc); see $W/console.log" >&2; exit 1; fi
exit "$rc"
