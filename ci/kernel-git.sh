#!/usr/bin/env bash
# ci/kernel-git.sh DIR: makes DIR a git repository holding Debian's linux-source-6.12 (the
# package images/kernels.toml names, sha256-checked), one commit with fixed author, committer
# and dates, so the commit id is the same on every machine. Used by experiments/exp-bisect.sh and
# ci/tree-kernel-smoke.sh. CPU: ~1 min (xz) + git add of ~80k files.
set -euo pipefail
cd "$(dirname "$0")/.."
DIR=${1:?usage: ci/kernel-git.sh DIR}
if [ -n "$(ls -A "$DIR" 2>/dev/null)" ]; then echo "$DIR exists and is not empty" >&2; exit 2; fi
CACHE=${VB_CACHE:-$PWD/.cache}
# The source's package, version and sha256, from the manifest's [sources."debian-6.12"].
read -r PKG VER SHA < <(awk '
    /^\[sources\."debian-6.12"\]/ { s = 1; next }
    /^\[/ { s = 0 }
    s && $1 == "package" { gsub(/"/, "", $3); p = $3 }
    s && $1 == "version" { gsub(/"/, "", $3); v = $3 }
    s && $1 == "sha256" { gsub(/"/, "", $3); h = $3 }
    END { print p, v, h }' images/kernels.toml)
DEB=$CACHE/debs/${PKG}_${VER}_all.deb
if [ ! -f "$DEB" ]; then
    mkdir -p "$CACHE/debs"
    # Package lists may be missing (install-deps.sh skips apt-get update when nothing is
    # missing): update once and retry.
    (cd "$CACHE/debs" && { apt-get download "$PKG=$VER" || { apt-get update -qq && apt-get download "$PKG=$VER"; }; })
fi
echo "$SHA  $DEB" | sha256sum -c --quiet
mkdir -p "$DIR"
dpkg-deb --fsys-tarfile "$DEB" | tar -xO ./usr/src/linux-source-6.12.tar.xz \
    | tar -xJ -C "$DIR" --strip-components=1
export GIT_AUTHOR_NAME=vb GIT_AUTHOR_EMAIL=vb@localhost GIT_COMMITTER_NAME=vb \
    GIT_COMMITTER_EMAIL=vb@localhost GIT_AUTHOR_DATE='2026-01-01T00:00:00Z' \
    GIT_COMMITTER_DATE='2026-01-01T00:00:00Z'
git -C "$DIR" init -q -b main
# Debian's top-level .gitignore ignores everything at the top level (`/*`): add by force.
git -C "$DIR" add -A -f .
git -C "$DIR" commit -q -m "Debian $PKG $VER"
git -C "$DIR" log --oneline -1
