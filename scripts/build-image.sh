#!/usr/bin/env bash
# Build the rackgate base image (Debian + systemd + python3) from Debian's mirror, for one
# Debian release: bookworm (12, the default) or trixie (13).
# Nothing can be pulled from a registry here, so the image is made locally:
#   debootstrap --variant=minbase  ->  tar | podman import
# The mirror is the one this machine's own APT sources use (scripts/debian-mirror.sh).
# The image's /etc/apt/sources.list names it the way a real node's does: "<suite>" and
# "<suite>-updates" from the archive mirror, "<suite>-security" from the security mirror
# when this machine has one, component main. Only the file is written: no index is
# downloaded at build time (APT's lists are emptied), so the build costs what it did.
# The image is named after the suite (localhost/rackgate-<suite>); its tag is the sha256
# of the recipe (this script, packages.txt, mirrors, suite), so the image is rebuilt only
# when it is missing or its recipe changed.
#
# Usage: scripts/build-image.sh            build if missing, print the image name
#        scripts/build-image.sh --name     print the image name only
# Environment: RACKGATE_DEBIAN_MIRROR, RACKGATE_DEBIAN_SECURITY_MIRROR (default: this
#              machine's, from scripts/debian-mirror.sh; an empty security mirror adds no
#              security line), RACKGATE_DEBIAN_SUITE (bookworm or trixie; default
#              bookworm), CONTAINERS_CONF.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/.." && pwd)"
mirror="$("$here/debian-mirror.sh")"
security_mirror="$("$here/debian-mirror.sh" --security)"
suite="${RACKGATE_DEBIAN_SUITE:-bookworm}"
case "$suite" in
  bookworm|trixie) ;;
  *) echo "build-image: RACKGATE_DEBIAN_SUITE is '$suite'; the releases rackgate is tested on are bookworm (12) and trixie (13)" >&2; exit 2 ;;
esac
packages_file="$root/molecule/image/packages.txt"
export CONTAINERS_CONF="${CONTAINERS_CONF:-$root/molecule/containers.conf}"

recipe_hash="$( { cat "$here/build-image.sh" "$packages_file"; echo "$mirror $security_mirror $suite"; } | sha256sum | cut -c1-12)"
image="localhost/rackgate-$suite:$recipe_hash"

if [[ "${1:-}" == "--name" ]]; then
  echo "$image"
  exit 0
fi

if podman image exists "$image"; then
  echo "$image"
  exit 0
fi

for tool in debootstrap podman; do
  command -v "$tool" >/dev/null || { echo "build-image: '$tool' is missing; run scripts/bootstrap.sh (or apt-get install podman runc debootstrap)" >&2; exit 2; }
done

packages="$(grep -v '^\s*#' "$packages_file" | grep -v '^\s*$' | paste -sd, -)"
rootfs="$(mktemp -d /var/tmp/rackgate-rootfs.XXXXXX)"
trap 'rm -rf "$rootfs"' EXIT

echo "build-image: debootstrap $suite from $mirror (about a minute)..." >&2
debootstrap --variant=minbase --include="$packages" "$suite" "$rootfs" "$mirror" >"$rootfs.log" 2>&1 || {
  echo "build-image: debootstrap failed; last lines of $rootfs.log:" >&2
  tail -n 20 "$rootfs.log" >&2
  exit 1
}
rm -f "$rootfs.log"
# APT sources as on a real node (debootstrap wrote "<suite> main" from the mirror only).
{
  echo "# Written by rackgate scripts/build-image.sh: the build machine's Debian mirrors."
  echo "deb $mirror $suite main"
  echo "deb $mirror $suite-updates main"
  if [[ -n "$security_mirror" ]]; then
    echo "deb $security_mirror $suite-security main"
  fi
} > "$rootfs/etc/apt/sources.list"
# A container gets its hostname and machine id from podman and systemd at start.
rm -f "$rootfs/etc/hostname"
: > "$rootfs/etc/machine-id"
rm -rf "$rootfs"/var/cache/apt/archives/*.deb "$rootfs"/var/lib/apt/lists/*

tar -C "$rootfs" -c . | podman import --quiet \
  --change 'CMD ["/sbin/init"]' \
  --change 'STOPSIGNAL SIGRTMIN+3' \
  --change 'ENV container=podman' \
  - "$image" >/dev/null
echo "build-image: built $image" >&2
echo "$image"
