#!/usr/bin/env bash
# Installs every Debian package the project needs on a fresh Debian 12 (bookworm) machine.
# Idempotent: when everything is already installed (and qemu-utils is the 7.2 that matches
# qemu-system-x86) it changes nothing. Needs root.
#
# qemu-utils is pinned to bookworm's 7.2: a newer qemu-utils (e.g. 10.0 from backports) Breaks
# qemu-system-common 7.2. The version is read from apt-cache at run time, not hard-coded.
# QEMU 10 is not installed here: ci/fetch-qemu10.sh unpacks bookworm-backports' packages into
# the cache beside 7.2 (ci/test.sh and `QEMU=10 ci/main-job.sh` run it); it needs the shared
# libraries QEMU 7.2 brings, which this script installs.
set -euo pipefail

PKGS=(
    qemu-system-x86 qemu-utils           # guests (TCG), qemu-img; qemu-storage-daemon comes with qemu-system-common
    busybox-static cpio fio rt-tests sg3-utils   # guest tools and host-side checks
    ccache build-essential bc bison flex libelf-dev libssl-dev   # kernel builds
    dpkg-dev libaio-dev zlib1g-dev       # apt-get source / dpkg-source, static fio
    xz-utils file patch git ca-certificates python3
    e2fsprogs gzip                       # the write log's ext4 (mkfs.ext4 in a suite's prepare) and replay checker (e2fsck)
    debian-archive-keyring               # with trixie's keys: the 7.3 kernels' private trixie-backports list
    slurm-wlm munge                      # the single-node Slurm cluster of the --executor slurm test
    shellcheck                           # ci/test.sh lints every shell script with it
)

if [ "$(id -u)" != 0 ]; then
    echo "install-deps.sh: must run as root" >&2
    exit 2
fi

installed() { dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q 'install ok installed'; }
version_of() { dpkg-query -W -f='${Version}' "$1" 2>/dev/null; }

missing=()
for p in "${PKGS[@]}"; do
    installed "$p" || missing+=("$p")
done
# images/kernels.toml fetches the 7.3 kernels from trixie-backports, signed by trixie's archive
# key: bookworm's keyring has it from 2023.3+deb12u1 on; an older one is upgraded.
if [ ! -s /usr/share/keyrings/debian-archive-trixie-automatic.gpg ] &&
    [[ " ${missing[*]} " != *" debian-archive-keyring "* ]]; then
    missing+=(debian-archive-keyring)
fi
qu=$(version_of qemu-utils || true)
qs=$(version_of qemu-system-x86 || true)
if [ ${#missing[@]} -eq 0 ] && [[ "$qu" == 1:7.2* ]] && [ "$qu" = "$qs" ]; then
    echo "install-deps: all ${#PKGS[@]} packages present (qemu-system-x86 and qemu-utils $qu); nothing to do"
    exit 0
fi

echo "install-deps: missing: ${missing[*]:-none}; qemu-utils=${qu:-none} qemu-system-x86=${qs:-none}"
apt-get update

# The qemu-system-x86 candidate (bookworm 7.2) and the qemu-utils of the same version, else the
# newest 7.2 qemu-utils apt knows.
sys_ver=$(apt-cache policy qemu-system-x86 | awk '/Candidate:/ { print $2 }')
utils_ver=$(apt-cache madison qemu-utils | awk -F'|' -v want="$sys_ver" '
    { gsub(/ /, "", $2) } $2 == want { print $2; found = 1; exit }
    $2 ~ /^1:7\.2/ && best == "" { best = $2 }
    END { if (!found && best != "") print best }')
if [ -z "$utils_ver" ] || [[ "$sys_ver" != 1:7.2* ]]; then
    echo "install-deps: cannot find QEMU 7.2 (qemu-system-x86 candidate '$sys_ver', qemu-utils '$utils_ver')" >&2
    exit 1
fi
echo "install-deps: qemu-system-x86 $sys_ver, qemu-utils $utils_ver"

args=()
for p in "${PKGS[@]}"; do
    case "$p" in
        qemu-utils) args+=("qemu-utils=$utils_ver") ;;
        qemu-system-x86) args+=("qemu-system-x86=$sys_ver") ;;
        *) args+=("$p") ;;
    esac
done
DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends --allow-downgrades "${args[@]}"
echo "install-deps: done"
