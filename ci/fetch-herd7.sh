#!/usr/bin/env bash
# Provides herd7, the litmus-test checker of the Linux-kernel memory model (LKMM,
# tools/memory-model), on Debian 12: the packages herdtools7, libc6 and libgmp10 of the versions
# pinned in gt-ordering/herd7.pin (that crate compiles the same file in), fetched from Debian sid
# with a private apt sources list (the host's apt configuration is neither read for sources nor
# changed), checked against the pinned sha256 and unpacked with `dpkg-deb -x` into
# $VB_CACHE/herd7-<version>/ (default cache: .cache/ in the checkout). sid's herd7 needs sid's
# glibc, so it runs through sid's own loader with sid's libraries first on its path; bookworm's
# libc stays what every other program uses:
#   <dir>/usr/lib/x86_64-linux-gnu/ld-linux-x86-64.so.2 --library-path <dir>/usr/lib/x86_64-linux-gnu \
#       <dir>/usr/bin/herd7 -set-libdir <dir>/usr/share/herdtools7/herd -conf linux-kernel.cfg T.litmus
# <dir>/herd7 is that command as a wrapper script. guest-tests (`guest-tests ordering`) runs the
# same command itself; the LKMM files come from the kernel line's own linux-source, not from here.
#
# Idempotent: a complete unpack (stamp file with the three sha256) is left as it is. Needs no
# root. Environment: VB_CACHE, HERD7_MIRROR (a Debian mirror or snapshot URL serving the pinned
# versions, default http://deb.debian.org/debian). Prints the wrapper's path on its last line.
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=gt-ordering/herd7.pin
. gt-ordering/herd7.pin

cache=${VB_CACHE:-$PWD/.cache}
mkdir -p "$cache"
cache=$(cd "$cache" && pwd)
dest="$cache/herd7-$HERD7_VERSION"
pkgs=(herdtools7 libc6 libgmp10)
pinned() { local v="HERD7_${1}_${2//-/_}"; echo "${!v}"; }
stamp_text() { for p in "${pkgs[@]}"; do echo "$p $(pinned DEB "$p") $(pinned SHA256 "$p")"; done; }

exec 9>"$cache/.herd7.lock"
flock 9
if [ -x "$dest/herd7" ] && [ "$(cat "$dest/.pinned" 2>/dev/null)" = "$(stamp_text)" ]; then
    echo "fetch-herd7: herd7 $HERD7_VERSION present"
    echo "$dest/herd7"
    exit 0
fi

work=$(mktemp -d "$cache/.herd7-fetch.XXXXXX")
trap 'rm -rf "$work"' EXIT
mkdir -p "$work"/{lists/partial,cache/archives/partial,debs,root,parts}
echo "deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] ${HERD7_MIRROR:-http://deb.debian.org/debian} $HERD7_SUITE main" \
    >"$work/sources.list"
apt_opts=(
    -o "Dir::Etc::SourceList=$work/sources.list" -o "Dir::Etc::SourceParts=$work/parts"
    -o "Dir::State::Lists=$work/lists" -o "Dir::Cache=$work/cache"
    -o "Dir::Etc::Preferences=/dev/null" -o "Dir::Etc::PreferencesParts=$work/parts"
    -o "Debug::NoLocking=1" -o "APT::Sandbox::User=$(id -un)"
)
echo "fetch-herd7: herdtools7 $HERD7_DEB_herdtools7 with libc6 $HERD7_DEB_libc6 and libgmp10 $HERD7_DEB_libgmp10 from $HERD7_SUITE"
apt-get -q "${apt_opts[@]}" update >"$work/apt-update.log" 2>&1 || {
    cat "$work/apt-update.log" >&2
    echo "fetch-herd7: apt-get update of $HERD7_SUITE failed" >&2
    exit 1
}
specs=()
for p in "${pkgs[@]}"; do specs+=("$p=$(pinned DEB "$p")"); done
(cd "$work/debs" && apt-get -q "${apt_opts[@]}" download "${specs[@]}") || {
    echo "fetch-herd7: ${specs[*]}: not all in $HERD7_SUITE any more: pin the current versions in gt-ordering/herd7.pin or set HERD7_MIRROR to a snapshot.debian.org URL that has them" >&2
    exit 1
}
for p in "${pkgs[@]}"; do
    deb=$(ls "$work/debs/${p}_"*.deb)
    got=$(sha256sum "$deb" | cut -d' ' -f1)
    if [ "$got" != "$(pinned SHA256 "$p")" ]; then
        echo "fetch-herd7: $p: sha256 $got, pinned $(pinned SHA256 "$p")" >&2
        exit 1
    fi
    dpkg-deb -x "$deb" "$work/root"
done
# Only herd7 is kept of herdtools7's 20 programs (241 MB of binaries; herd7 is 18 MB).
find "$work/root/usr/bin" -mindepth 1 ! -name herd7 -delete
lib=usr/lib/x86_64-linux-gnu
for f in "$lib/ld-linux-x86-64.so.2" "$lib/libc.so.6" "$lib/libgmp.so.10" usr/bin/herd7 \
    usr/share/herdtools7/herd/stdlib.cat; do
    [ -e "$work/root/$f" ] || { echo "fetch-herd7: the packages hold no $f" >&2; exit 1; }
done
# The wrapper: relative to its own directory, so the unpacked tree may move with the cache.
cat >"$work/root/herd7" <<'WRAP'
#!/bin/sh
# herd7 of ci/fetch-herd7.sh: sid's binary through sid's loader and libraries.
d=$(cd "$(dirname "$0")" && pwd)
exec "$d/usr/lib/x86_64-linux-gnu/ld-linux-x86-64.so.2" --library-path "$d/usr/lib/x86_64-linux-gnu" \
    "$d/usr/bin/herd7" -set-libdir "$d/usr/share/herdtools7/herd" "$@"
WRAP
chmod +x "$work/root/herd7"
ver=$("$work/root/herd7" -version 2>&1 | head -1)
case "$ver" in
    "$HERD7_VERSION,"* | "$HERD7_VERSION "*) ;;
    *) echo "fetch-herd7: unpacked herd7 says '$ver'" >&2; exit 1 ;;
esac
# Two litmus tests it must decide (herd7's own RC11 model for C11 atomics; the LKMM comes later,
# from the kernel's source): store buffering is allowed with relaxed accesses and forbidden with
# sequentially consistent ones. Checks that the binary runs end to end and answers both ways.
sb() {
    cat <<LIT
C SB-$1
{}
P0(atomic_int *x, atomic_int *y) { int r0; atomic_store_explicit(x, 1, $1); r0 = atomic_load_explicit(y, $1); }
P1(atomic_int *x, atomic_int *y) { int r0; atomic_store_explicit(y, 1, $1); r0 = atomic_load_explicit(x, $1); }
exists (0:r0=0 /\\ 1:r0=0)
LIT
}
for want in memory_order_relaxed:Sometimes memory_order_seq_cst:Never; do
    sb "${want%%:*}" >"$work/sb.litmus"
    obs=$("$work/root/herd7" -model rc11.cat "$work/sb.litmus" 2>&1 | awk '/^Observation/ { print $3 }')
    if [ "$obs" != "${want#*:}" ]; then
        echo "fetch-herd7: store buffering with ${want%%:*}: herd7 says '${obs:-no observation}', not ${want#*:}" >&2
        exit 1
    fi
done
stamp_text >"$work/root/.pinned"
rm -rf "$dest"
mv "$work/root" "$dest"
echo "fetch-herd7: herd7 $ver ($(du -sh "$dest" | cut -f1))"
echo "$dest/herd7"
