#!/usr/bin/env bash
# Kernel matrix (issue 16): boots Debian's 5.10 (bullseye), 6.1 (bookworm), 6.12 (trixie) and
# sid's newest (7.2 on 2026-12-01) kernels one after the other with virtme-ng under qemu TCG and runs guest.sh in each, on this
# machine's root file system, with a scratch image as virtio-blk vda and a zram device.
#
#   bash tests/kernels/run.sh            # root; see README.md
#
# Env:
#   IODUMP_BIN               the iodump under test (default: the repo's target/debug/iodump);
#                            copied to IODUMP_KT_OUT/bin first, so a rebuild mid-run changes nothing
#   IODUMP_READ_BIN          an iodump with `export` (the analyze feature) to read the traces,
#                            when IODUMP_BIN was built without it (default: IODUMP_BIN)
#   IODUMP_KERNELS           which series, e.g. "6.1" (default "5.10 6.1 6.12 sid"; sid: the
#                            newest kernel of Debian unstable, whatever its version)
#   IODUMP_REQUIRE_KERNELS=1 a kernel that cannot be fetched or booted fails (default: skipped)
#   IODUMP_KERNEL_CACHE      fetched and unpacked kernels (default: the repo's target/kernels)
#   IODUMP_KT_OUT            results, logs, scratch images (default: the repo's target/kernel-matrix)
#   IODUMP_KERNEL_TIMEOUT    seconds per kernel, boot to power-off (default 1200)
#   IODUMP_MATRIX_BUDGET     seconds for the whole run, fetching included (default 3000)
#   IODUMP_KT_DEVICES, IODUMP_KT_FIO_IOS, IODUMP_KT_FS_FIO_IOS, IODUMP_KT_FS_SCHED
#                            passed to guest.sh in the guest when set (a part of the suite)
# Prints a table per kernel, every FAIL line, and closes with `N passed, M failed`; exits 1
# when anything failed.
set -uo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO=$(cd "$HERE/../.." && pwd)
BIN=${IODUMP_BIN:-$REPO/target/debug/iodump}
case $BIN in /*) ;; *) BIN=$PWD/$BIN ;; esac
READ_BIN=${IODUMP_READ_BIN:-}
case $READ_BIN in /*|'') ;; *) READ_BIN=$PWD/$READ_BIN ;; esac
KERNELS=${IODUMP_KERNELS:-5.10 6.1 6.12 sid}
REQUIRE=${IODUMP_REQUIRE_KERNELS:-0}
CACHE=${IODUMP_KERNEL_CACHE:-$REPO/target/kernels}
KT_OUT=${IODUMP_KT_OUT:-$REPO/target/kernel-matrix}
TIMEOUT=${IODUMP_KERNEL_TIMEOUT:-1200}
BUDGET=${IODUMP_MATRIX_BUDGET:-3000}
MAGIC=IODUMP-KERNEL-MATRIX-SCRATCH
START=$SECONDS

mkdir -p "$CACHE" "$KT_OUT" || exit 2
CACHE=$(cd "$CACHE" && pwd) KT_OUT=$(cd "$KT_OUT" && pwd)
log() { printf '[kernels %4ds] %s\n' $((SECONDS - START)) "$*"; }

suite_of() { # series -> Debian suite
  case $1 in 5.10) echo bullseye ;; 6.1) echo bookworm ;; 6.12) echo trixie ;; sid) echo sid ;; *) return 1 ;; esac
}

# A kernel's host-side result lines go to $KT_OUT/SERIES/host.txt; SKIP lines count apart.
hres() { echo "$2 kernel.$3 $4" >> "$KT_OUT/$1/host.txt"; log "$1: $2 kernel.$3 $4"; }
cant() { # SERIES NAME DETAIL: cannot fetch / cannot boot: a skip, or a failure when required
  if [ "$REQUIRE" = 1 ]; then hres "$1" FAIL "$2" "$3"; else hres "$1" SKIP "$2" "$3"; fi
}

# --- tools
missing=()
# vng (and the virtme-run it calls): pip's script directory may not be on PATH (pyenv without
# a rehash, pip --user)
if ! command -v vng >/dev/null && command -v python3 >/dev/null; then
  for d in "$(python3 -c 'import sysconfig; print(sysconfig.get_path("scripts"))' 2>/dev/null)" \
           "$(python3 -c 'import site; print(site.getuserbase())' 2>/dev/null)/bin"; do
    [ -x "$d/vng" ] && { PATH=$PATH:$d; break; }
  done
fi
for t in vng qemu-system-x86_64 depmod dpkg-deb apt-get apt-cache timeout fio mkfs.ext4 filefrag python3; do
  command -v "$t" >/dev/null || missing+=("$t")
done

# --- the private apt state: the system's Debian mirrors, the three suites
APT_DIR=$CACHE/apt
A=(-o "Dir::Etc::sourcelist=$APT_DIR/sources.list" -o Dir::Etc::sourceparts=/nonexistent
   -o "Dir::State::Lists=$APT_DIR/lists" -o "Dir::State::status=$APT_DIR/status"
   -o "Dir::Cache=$APT_DIR/cache" -o Dir::Etc::preferences=/nonexistent
   -o Dir::Etc::preferencesparts=/nonexistent -o APT::Sandbox::User=root -o Acquire::Retries=3)
APT_OK=0
apt_prepare() {
  mkdir -p "$APT_DIR/lists/partial" "$APT_DIR/cache/archives/partial"
  : > "$APT_DIR/status"
  # The system's mirrors (deb822 .sources or one-line .list): the first non-security URI and
  # the first security one.
  local mirrors
  mirrors=$(python3 - <<'EOF'
import glob, re
main = sec = None
for f in sorted(glob.glob("/etc/apt/sources.list.d/*.sources")):
    for st in re.split(r"\n\s*\n", open(f).read()):
        kv = dict(re.findall(r"^([A-Za-z-]+):\s*(.*)$", st, re.M))
        if kv.get("Enabled", "yes").lower() == "no" or "deb" not in kv.get("Types", "").split():
            continue
        uri, suites = kv.get("URIs", "").split()[:1], kv.get("Suites", "")
        if not uri:
            continue
        if "-security" in suites:
            sec = sec or uri[0]
        else:
            main = main or uri[0]
for f in ["/etc/apt/sources.list"] + sorted(glob.glob("/etc/apt/sources.list.d/*.list")):
    try:
        lines = open(f).read().splitlines()
    except OSError:
        continue
    for l in lines:
        m = re.match(r"^deb\s+(\[[^]]*\]\s+)?(\S+)\s+(\S+)", l)
        if m:
            if "-security" in m.group(3):
                sec = sec or m.group(2)
            else:
                main = main or m.group(2)
print(main or "", sec or "")
EOF
)
  local m ms k=/usr/share/keyrings/debian-archive-keyring.gpg s
  read -r m ms <<< "$mirrors"
  if [ -z "$m" ]; then log "no Debian mirror in /etc/apt/sources.list*"; return 1; fi
  [ -n "$ms" ] || log "no security mirror in the system's sources: main suites only"
  [ -f "$k" ] || { log "no $k (package debian-archive-keyring)"; return 1; }
  : > "$APT_DIR/sources.list"
  for s in bullseye bookworm trixie; do
    echo "deb [signed-by=$k] $m $s main" >> "$APT_DIR/sources.list"
    echo "deb [signed-by=$k] $m $s-updates main" >> "$APT_DIR/sources.list"
    [ -n "$ms" ] && echo "deb [signed-by=$k] $ms $s-security main" >> "$APT_DIR/sources.list"
  done
  echo "deb [signed-by=$k] $m sid main" >> "$APT_DIR/sources.list"
  log "apt-get update (private state in $APT_DIR)"
  if apt-get "${A[@]}" -q update > "$APT_DIR/update.log" 2>&1; then
    APT_OK=1
  else
    log "apt-get update failed: $(grep -E '^(E|W):' "$APT_DIR/update.log" | head -3 | tr '\n' ' ')"
    return 1
  fi
}

# fetch SERIES: sets KVER and KDIR to an unpacked, depmod'ed kernel (cached), or returns 1 with $WHY
fetch() {
  local series=$1 pkg ver deb d re
  [ "$series" = sid ] && { fetch_sid; return; }
  re="^linux-image-${series//./\\.}\.[0-9]+(-[0-9]+)?(\+deb[0-9]+)?-amd64$"
  WHY=
  if [ "$APT_OK" = 1 ]; then
    pkg=$(apt-cache "${A[@]}" search --names-only '^linux-image-' 2>/dev/null | awk '{print $1}' |
          grep -E "$re" | sort -V | tail -1)
    [ -n "$pkg" ] || WHY="no linux-image-$series.*-amd64 in $(suite_of "$series")"
  else
    WHY="apt-get update failed"
  fi
  if [ -z "${pkg:-}" ]; then # fall back to the last kernel fetched for this series
    pkg=$(cat "$CACHE/$series.current" 2>/dev/null)
    [ -n "$pkg" ] && [ -e "$CACHE/k/${pkg#linux-image-}/.ready" ] || { WHY="${WHY:-cannot fetch}; nothing cached"; return 1; }
    log "$series: $WHY; using the cached $pkg"
  fi
  ver=${pkg#linux-image-}
  d=$CACHE/k/$ver
  if [ ! -e "$d/.ready" ]; then
    log "$series: fetching $pkg"
    rm -rf "$d" "$CACHE/debs/$pkg"_*.deb
    mkdir -p "$CACHE/debs" "$d"
    (cd "$CACHE/debs" && apt-get "${A[@]}" -q download "$pkg") > "$CACHE/debs/$pkg.log" 2>&1 ||
      { WHY="apt-get download $pkg failed: $(grep -E '^(E|W):' "$CACHE/debs/$pkg.log" | head -2 | tr '\n' ' ')"; return 1; }
    deb=$(ls "$CACHE/debs/$pkg"_*.deb 2>/dev/null | head -1)
    dpkg-deb -x "$deb" "$d" || { WHY="dpkg-deb -x $deb failed"; return 1; }
    # trixie's debs carry their modules under usr/lib/modules
    [ -d "$d/lib/modules" ] || { [ -d "$d/usr/lib/modules" ] && ln -s usr/lib "$d/lib"; }
    [ -f "$d/boot/vmlinuz-$ver" ] && [ -d "$d/lib/modules/$ver" ] || { WHY="$deb has no boot/vmlinuz-$ver or modules"; return 1; }
    depmod -b "$d" "$ver" 2> "$d/depmod.log" || { WHY="depmod -b $d $ver failed: $(tail -1 "$d/depmod.log")"; return 1; }
    echo "$(basename "$deb")" > "$d/.ready"
    rm -f "$deb" # the unpacked tree is the cache
  fi
  echo "$pkg" > "$CACHE/$series.current"
  KVER=$ver KDIR=$d
}

# fetch_sid: sid's newest kernel. Since 7.x it comes in three packages with a merged /usr
# (linux-binary-V: the image under usr/lib/modules/V/vmlinuz; linux-modules-V; linux-base-V):
# unpacked into one tree laid out as the older packages are (boot/vmlinuz-V, lib/modules/V).
fetch_sid() {
  local pkg ver d p deb
  WHY=
  if [ "$APT_OK" = 1 ]; then
    pkg=$(apt-cache "${A[@]}" search --names-only '^linux-binary-' 2>/dev/null | awk '{print $1}' |
          grep -E '^linux-binary-[0-9]+\.[0-9]+(\.[0-9]+)?\+deb[0-9]+-amd64$' | sort -V | tail -1)
    [ -n "$pkg" ] || WHY="no linux-binary-*-amd64 in sid"
  else
    WHY="apt-get update failed"
  fi
  if [ -z "${pkg:-}" ]; then
    pkg=$(cat "$CACHE/sid.current" 2>/dev/null)
    [ -n "$pkg" ] && [ -e "$CACHE/k/${pkg#linux-binary-}/.ready" ] || { WHY="${WHY:-cannot fetch}; nothing cached"; return 1; }
    log "sid: $WHY; using the cached $pkg"
  fi
  ver=${pkg#linux-binary-}
  d=$CACHE/k/$ver
  if [ ! -e "$d/.ready" ]; then
    log "sid: fetching linux-binary-$ver, linux-modules-$ver, linux-base-$ver"
    rm -rf "$d"; mkdir -p "$CACHE/debs" "$d"
    for p in linux-binary-$ver linux-modules-$ver linux-base-$ver; do
      rm -f "$CACHE/debs/$p"_*.deb
      (cd "$CACHE/debs" && apt-get "${A[@]}" -q download "$p") > "$CACHE/debs/$p.log" 2>&1 ||
        { WHY="apt-get download $p failed: $(grep -E '^(E|W):' "$CACHE/debs/$p.log" | head -2 | tr '\n' ' ')"; return 1; }
      deb=$(ls "$CACHE/debs/$p"_*.deb 2>/dev/null | head -1)
      dpkg-deb -x "$deb" "$d" || { WHY="dpkg-deb -x $deb failed"; return 1; }
      rm -f "$deb"
    done
    [ -d "$d/lib/modules" ] || ln -s usr/lib "$d/lib"
    mkdir -p "$d/boot"
    cp "$d/usr/lib/modules/$ver/vmlinuz" "$d/boot/vmlinuz-$ver" 2>/dev/null ||
      { WHY="linux-binary-$ver has no usr/lib/modules/$ver/vmlinuz"; return 1; }
    depmod -b "$d" "$ver" 2> "$d/depmod.log" || { WHY="depmod -b $d $ver failed: $(tail -1 "$d/depmod.log")"; return 1; }
    echo "linux-binary-$ver" > "$d/.ready"
  fi
  echo "$pkg" > "$CACHE/sid.current"
  KVER=$ver KDIR=$d
}

# boot SERIES: the guest suite in one kernel
boot() {
  local series=$1 out=$KT_OUT/$1 img=$KT_OUT/$1.img nvimg=$KT_OUT/$1.nvme.img left tmo t0 rc
  left=$((BUDGET - (SECONDS - START)))
  tmo=$TIMEOUT
  [ "$left" -lt "$tmo" ] && tmo=$left
  if [ "$left" -lt 90 ]; then
    hres "$series" FAIL budget "not run: ${left}s left of the ${BUDGET}s budget"; return
  fi
  local v kt_env=""
  for v in IODUMP_KT_DEVICES IODUMP_KT_FIO_IOS IODUMP_KT_FS_FIO_IOS IODUMP_KT_FS_SCHED; do
    [ -n "${!v:-}" ] && kt_env+=" $v='${!v}'"
  done
  local attempt
  for attempt in 1 2 3; do
    # The scratch disk: sparse, with the signature guest.sh checks before it writes to vda.
    # And an NVMe namespace in an NVMe subsystem (which more than one controller may reach:
    # the kernel makes a multipath head, nvme0n1, over a hidden path disk, nvme0c0n1), signed too.
    rm -f "$img" "$nvimg"; truncate -s 512M "$img" && truncate -s 64M "$nvimg" &&
      printf '%s' "$MAGIC" | dd of="$img" conv=notrunc status=none &&
      printf '%s' "$MAGIC" | dd of="$nvimg" conv=notrunc status=none || { hres "$series" FAIL image "cannot create $img"; return; }
    log "$series: booting $KVER (timeout ${tmo}s)"
    t0=$SECONDS
    LAUNCH=$(date +%s.%N)
    (cd "$out" && timeout -k 20 "$tmo" vng --run "$KDIR/boot/vmlinuz-$KVER" --disable-kvm \
        --cpus 2 --memory 4G --verbose --rwdir "$out" \
        --qemu-opts="-drive file=$img,format=raw,if=none,id=scratch,cache=unsafe -device virtio-blk-pci,drive=scratch -drive file=$nvimg,format=raw,if=none,id=nvscratch,cache=unsafe -device nvme-subsys,id=iodsubsys,nqn=iodump-matrix -device nvme,serial=iodnvme,subsys=iodsubsys -device nvme-ns,drive=nvscratch,nsid=1" \
        --exec "env PATH='$PATH' HOME='${HOME:-/root}' IODUMP_GUEST=1 IODUMP_BIN='$RUN_BIN' IODUMP_READ_BIN='$RUN_READ_BIN' IODUMP_KMOD_DIR='$KDIR/lib/modules'$kt_env bash '$HERE/guest.sh' '$out'" \
        < /dev/null > "$out/console.log" 2>&1)
    rc=$?
    WALL=$((SECONDS - t0))
    # After a timeout, make sure this kernel's qemu (the one with our image) is gone.
    local pids i
    for i in $(seq 20); do
      pids=$(pgrep -f -- "file=$img," || true)
      [ -z "$pids" ] && break
      [ "$i" = 10 ] && kill -9 $pids 2>/dev/null
      sleep 1
    done
    rm -f "$img" "$nvimg"
    # A kernel that crashed while booting, before the suite's first line (guest.sh writes
    # `started` before anything else, so nothing of iodump had run): up to two more boots
    # (under TCG, sid's 7.2 dies now and then of an int3 Oops in sched_clock_* 1–2 s into
    # its boot, as it marks sched_clock stable: a static key patched while the other vCPU
    # runs that code; once twice in a row).
    if [ ! -e "$out/started" ] && [ "$attempt" -lt 3 ] &&
        grep -aq -e 'Kernel panic' -e 'Oops:' "$out/console.log"; then
      cp "$out/console.log" "$out/console.boot$attempt.log"
      log "$series: $KVER crashed while booting, before the suite ($(grep -a -m1 -e 'Oops:' -e 'Kernel panic' "$out/console.log" | cut -c1-120)); booting it again (its console: $out/console.boot$attempt.log)"
      left=$((BUDGET - (SECONDS - START)))
      [ "$left" -lt "$tmo" ] && tmo=$left
      [ "$left" -ge 90 ] && continue
    fi
    break
  done
  if [ ! -e "$out/started" ]; then
    cant "$series" boot "cannot boot $KVER (vng exited $rc after ${WALL}s; $(grep -v '^\s*$' "$out/console.log" | tail -2 | tr '\n' ' ' | cut -c1-300); see $out/console.log)"
    return
  fi
  # boot: launch to the suite's start by the guest's clock (set from the host's at boot), or
  # the guest's uptime when that clock looks wrong
  BOOT=$(awk -v l="$LAUNCH" -v w="$WALL" '{b = $4 - l; if (b <= 0 || b > w) b = $2; printf "%.0f", b}' "$out/started")
  echo "$BOOT" > "$out/boot_seconds"
  # The checks of what the guest recorded, here (fast) rather than over 9p in the guest.
  IODUMP_BIN=$RUN_BIN IODUMP_READ_BIN=$RUN_READ_BIN bash "$HERE/guest.sh" --check "$out"
  hres "$series" PASS boot "$KVER reached the suite after $BOOT s (guest uptime $(awk '{printf "%.0f", $2}' "$out/started") s)"
  if [ -e "$out/done" ]; then
    hres "$series" PASS suite "finished in $(awk '{printf "%.0f", $2}' "$out/done") s (${WALL}s wall)"
  elif [ "$rc" = 124 ] || [ "$rc" = 137 ]; then
    hres "$series" FAIL suite "did not finish within ${tmo}s (timeout; last: $(grep -a -- '^---' "$out/guest.log" | tail -1); see $out/console.log)"
  else
    hres "$series" FAIL suite "did not finish: vng exited $rc after ${WALL}s (guest crash? $(grep -a -v '^\s*$' "$out/console.log" | tail -2 | tr '\n' ' ' | cut -c1-300))"
  fi
}

# --- main
log "iodump $BIN; kernels $KERNELS; cache $CACHE; results $KT_OUT"
declare -A VER WALLS
# The binaries under test, copied (a rebuild during the run must not change them).
rm -rf "$KT_OUT/bin"; mkdir -p "$KT_OUT/bin"
RUN_BIN=$KT_OUT/bin/iodump RUN_READ_BIN=
if [ -x "$BIN" ] && cp "$BIN" "$RUN_BIN"; then
  log "iodump under test: $BIN ($(stat -c '%s bytes, %y' "$BIN")), copied to $RUN_BIN"
fi
if [ -n "$READ_BIN" ]; then
  RUN_READ_BIN=$KT_OUT/bin/iodump-read
  cp "$READ_BIN" "$RUN_READ_BIN" || RUN_READ_BIN=$READ_BIN
  log "traces read with $READ_BIN"
fi
RUN_READ_BIN=${RUN_READ_BIN:-$RUN_BIN}
APT_TRIED=0
for series in $KERNELS; do
  rm -rf "${KT_OUT:?}/$series"; mkdir -p "$KT_OUT/$series"
  VER[$series]=- WALLS[$series]=-
  if ! suite_of "$series" >/dev/null; then hres "$series" FAIL series "unknown (5.10, 6.1, 6.12 or sid)"; continue; fi
  if [ ${#missing[@]} -gt 0 ]; then cant "$series" tools "missing: ${missing[*]}"; continue; fi
  if [ ! -x "$RUN_BIN" ]; then hres "$series" FAIL binary "$BIN does not exist or is not executable"; continue; fi
  if [ "$APT_TRIED" = 0 ]; then APT_TRIED=1; apt_prepare; fi
  if ! fetch "$series"; then cant "$series" fetch "$WHY"; continue; fi
  VER[$series]=$KVER
  hres "$series" PASS fetch "$KVER ($(cat "$KDIR/.ready"))"
  WALL=-
  boot "$series"
  WALLS[$series]=$WALL
done

# --- summary
P=0 F=0 S=0
printf '\n%-6s %-24s %7s %7s %7s %7s %7s %7s  %s\n' kernel version boot_s suite_s wall_s passed failed skipped status
for series in $KERNELS; do
  o=$KT_OUT/$series
  cat "$o/host.txt" "$o/results.txt" 2>/dev/null | grep -E '^(PASS|FAIL|SKIP) ' > "$o/all.txt"
  p=$(grep -c '^PASS' "$o/all.txt") f=$(grep -c '^FAIL' "$o/all.txt") s=$(grep -c '^SKIP' "$o/all.txt")
  P=$((P + p)) F=$((F + f)) S=$((S + s))
  b=$(cat "$o/boot_seconds" 2>/dev/null); u=$(awk '{printf "%.0f", $2}' "$o/done" 2>/dev/null)
  st=PASS; [ "$s" -gt 0 ] && st=SKIP; [ "$f" -gt 0 ] && st=FAIL
  printf '%-6s %-24s %7s %7s %7s %7s %7s %7s  %s\n' "$series" "${VER[$series]:--}" "${b:--}" "${u:--}" \
    "${WALLS[$series]:--}" "$p" "$f" "$s" "$st"
done
for series in $KERNELS; do
  grep -E '^(FAIL|SKIP) ' "$KT_OUT/$series/all.txt" | sed "s/^/[$series] /"
done
# Recordings whose programs the kernel skipped as nested (`record --stats`): counted losses,
# shown so that a passing run still says which hook nests where.
for series in $KERNELS; do
  grep -H 'skipped as nested' "$KT_OUT/$series"/*/record.stderr 2>/dev/null | sed "s|^$KT_OUT/||; s/^/[$series] note: /"
done
echo "results and logs: $KT_OUT/<kernel>/ (all.txt, guest.log, console.log, one directory per recording)"
echo "total $((SECONDS - START)) s"
[ "$S" -gt 0 ] && echo "$S skipped (IODUMP_REQUIRE_KERNELS=1 makes them failures)"
echo "$P passed, $F failed"
[ "$F" = 0 ]
