#!/usr/bin/env bash
# Provides QEMU 10 next to Debian 12's QEMU 7.2 (which stays installed and the default): the
# three packages qemu-system-x86, qemu-system-common and qemu-system-data of the version pinned
# in gt-launch/qemu10.pin (that crate compiles the same file in), fetched from Debian's
# bookworm-backports with a private apt sources list (the host's apt configuration is neither read for sources nor changed), checked against the
# pinned sha256 and unpacked with `dpkg-deb -x` into $VB_CACHE/qemu/<version>/ (default cache:
# .cache/ in the checkout). Their shared libraries are bookworm's own, already there with QEMU
# 7.2. guest-tests finds it with `--qemu 10` and passes `-L <that>/usr/share/qemu`, so its own
# option ROMs and qboot are used (SeaBIOS comes from the system's /usr/share/seabios).
#
# Idempotent: a complete unpack (stamp file with the three sha256) is left as it is. Needs no
# root. Environment: VB_CACHE, QEMU10_MIRROR (a Debian mirror or snapshot URL serving the pinned
# version, default http://deb.debian.org/debian). Prints the binary's path on its last line.
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=gt-launch/qemu10.pin
. gt-launch/qemu10.pin

cache=${VB_CACHE:-$PWD/.cache}
top="$cache/qemu"
dest="$top/$QEMU10_VERSION"
bin="$dest/usr/bin/qemu-system-x86_64"
pkgs=(qemu-system-x86 qemu-system-common qemu-system-data)
want_sha() { local v="QEMU10_SHA256_${1//-/_}"; echo "${!v}"; }
stamp_text() { for p in "${pkgs[@]}"; do echo "$p $QEMU10_DEB_VERSION $(want_sha "$p")"; done; }

mkdir -p "$top"
exec 9>"$top/.lock"
flock 9
if [ -x "$bin" ] && [ "$(cat "$dest/.pinned" 2>/dev/null)" = "$(stamp_text)" ]; then
    echo "fetch-qemu10: QEMU $QEMU10_VERSION present"
    echo "$bin"
    exit 0
fi

work=$(mktemp -d "$top/.fetch.XXXXXX")
trap 'rm -rf "$work"' EXIT
mkdir -p "$work"/{lists/partial,cache/archives/partial,debs,root,parts}
echo "deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] ${QEMU10_MIRROR:-http://deb.debian.org/debian} $QEMU10_SUITE main" \
    >"$work/sources.list"
apt_opts=(
    -o "Dir::Etc::SourceList=$work/sources.list" -o "Dir::Etc::SourceParts=$work/parts"
    -o "Dir::State::Lists=$work/lists" -o "Dir::Cache=$work/cache"
    -o "Dir::Etc::Preferences=/dev/null" -o "Dir::Etc::PreferencesParts=$work/parts"
    -o "Debug::NoLocking=1" -o "APT::Sandbox::User=$(id -un)"
)
echo "fetch-qemu10: QEMU $QEMU10_DEB_VERSION from $QEMU10_SUITE"
apt-get -q "${apt_opts[@]}" update >"$work/apt-update.log" 2>&1 || {
    cat "$work/apt-update.log" >&2
    echo "fetch-qemu10: apt-get update of $QEMU10_SUITE failed" >&2
    exit 1
}
(cd "$work/debs" && apt-get -q "${apt_opts[@]}" download "${pkgs[@]/%/=$QEMU10_DEB_VERSION}") || {
    echo "fetch-qemu10: version $QEMU10_DEB_VERSION is not in $QEMU10_SUITE any more: pin the current one in gt-launch/qemu10.pin or set QEMU10_MIRROR to a snapshot" >&2
    exit 1
}
for p in "${pkgs[@]}"; do
    deb=$(ls "$work/debs/${p}_"*.deb)
    got=$(sha256sum "$deb" | cut -d' ' -f1)
    if [ "$got" != "$(want_sha "$p")" ]; then
        echo "fetch-qemu10: $p: sha256 $got, pinned $(want_sha "$p")" >&2
        exit 1
    fi
    dpkg-deb -x "$deb" "$work/root"
done
missing=$(ldd "$work/root/usr/bin/qemu-system-x86_64" | awk '/not found/ { print $1 }')
if [ -n "$missing" ]; then
    echo "fetch-qemu10: libraries missing (install QEMU 7.2 first: ci/install-deps.sh): $missing" >&2
    exit 1
fi
ver=$("$work/root/usr/bin/qemu-system-x86_64" -version | head -1)
case "$ver" in
    *"version $QEMU10_VERSION "*) ;;
    *) echo "fetch-qemu10: unpacked binary says '$ver'" >&2; exit 1 ;;
esac
stamp_text >"$work/root/.pinned"
rm -rf "$dest"
mv "$work/root" "$dest"
echo "fetch-qemu10: $ver"
echo "$bin"
