#!/usr/bin/env bash
# Print the Debian mirror this build machine's own APT sources use, so that nothing in
# this repository names a package registry: the image build (scripts/build-image.sh), the
# Makefile and the molecule scenarios take their mirror from here.
#
# Usage: scripts/debian-mirror.sh              the archive mirror ("<codename>" entry)
#        scripts/debian-mirror.sh --security   the security mirror ("<codename>-security"
#                                              entry); empty output if the machine has none
# The URL is printed without a trailing slash, e.g. http://mirror.site.example/debian.
#
# Source: `apt-get indextargets`, which reads /etc/apt/sources.list and sources.list.d/
# (one-line and deb822 formats alike) as APT itself does; <codename> is VERSION_CODENAME
# from /etc/os-release.
# Environment: RACKGATE_DEBIAN_MIRROR, RACKGATE_DEBIAN_SECURITY_MIRROR override the probe
# (a set but empty RACKGATE_DEBIAN_SECURITY_MIRROR means "no security mirror").
# Exit status: 0 printed (or no security mirror), 2 no archive mirror could be found.
set -euo pipefail

want=archive
case "${1:-}" in
  "") ;;
  --security) want=security ;;
  *) echo "usage: $0 [--security]" >&2; exit 2 ;;
esac

if [[ $want == archive && -n "${RACKGATE_DEBIAN_MIRROR:-}" ]]; then
  echo "${RACKGATE_DEBIAN_MIRROR%/}"
  exit 0
fi
if [[ $want == security && -n "${RACKGATE_DEBIAN_SECURITY_MIRROR+set}" ]]; then
  [[ -n "$RACKGATE_DEBIAN_SECURITY_MIRROR" ]] && echo "${RACKGATE_DEBIAN_SECURITY_MIRROR%/}"
  exit 0
fi

hint="set RACKGATE_DEBIAN_MIRROR to the Debian mirror to use (e.g. http://mirror.site.example/debian)"
os_id="" codename=""
if [[ -r /etc/os-release ]]; then
  os_id="$(. /etc/os-release && echo "${ID:-}")"
  codename="$(. /etc/os-release && echo "${VERSION_CODENAME:-}")"
fi
if [[ "$os_id" != debian || -z "$codename" ]] || ! command -v apt-get >/dev/null; then
  echo "debian-mirror: not a Debian host with APT (/etc/os-release: ID=\"$os_id\" VERSION_CODENAME=\"$codename\"); $hint" >&2
  exit 2
fi

suite="$codename"
[[ $want == security ]] && suite="$codename-security"
# Fields: sources entry (file:line), repository URI, suite, component.
uri="$(apt-get indextargets --no-release-info \
         --format '$(SOURCESENTRY) $(REPO_URI) $(RELEASE) $(COMPONENT)' 'Created-By: Packages' \
       | awk -v suite="$suite" '$3 == suite { print $2; exit }')"

if [[ -n "$uri" ]]; then
  echo "${uri%/}"
elif [[ $want == archive ]]; then
  echo "debian-mirror: no APT source of this machine carries suite \"$suite\"; $hint" >&2
  exit 2
fi
