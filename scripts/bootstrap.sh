#!/usr/bin/env bash
# Install what rackgate needs on this machine, once: system packages (podman, runc,
# debootstrap, and for the tests chromium and promtool) and the Python virtual environment .venv.
# Safe to run again: it only installs what is missing.
#
# Usage: scripts/bootstrap.sh [--test]     --test adds what `make test` needs (chromium,
#                                          promtool, Open MPI with mpi4py)
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
venv="$root/.venv"
with_tests=false
[[ "${1:-}" == "--test" ]] && with_tests=true

say() { printf 'bootstrap: %s\n' "$*" >&2; }

# command -> Debian package that provides it
declare -A needs=([podman]=podman [runc]=runc [debootstrap]=debootstrap
                  [ipmi_sim]=openipmi [ipmitool]=ipmitool)  # the demo rack's IPMI BMC
$with_tests && needs[chromium]=chromium
$with_tests && needs[promtool]=prometheus   # `promtool test rules` for the alert rules
$with_tests && needs[mpirun]=openmpi-bin    # the MPI probe is run for real in the unit tests

missing=()
for cmd in "${!needs[@]}"; do
  command -v "$cmd" >/dev/null 2>&1 || missing+=("${needs[$cmd]}")
done
# ... with Debian's mpi4py for the system python3 the probe runs under
if $with_tests && ! /usr/bin/python3 -c 'import mpi4py' >/dev/null 2>&1; then
  missing+=(python3-mpi4py)
fi
py_ok=true
python3 -c 'import sys; sys.exit(sys.version_info < (3, 11))' 2>/dev/null || py_ok=false
if $py_ok && [[ ! -x "$venv/bin/python" ]]; then
  tmp="$(mktemp -d)"; python3 -m venv "$tmp/v" >/dev/null 2>&1 || missing+=(python3-venv); rm -rf "$tmp"
fi
$py_ok || missing+=(python3 python3-venv)

if ((${#missing[@]})); then
  if [[ $(id -u) -ne 0 ]] || ! command -v apt-get >/dev/null; then
    say "missing: ${missing[*]}"
    say "install them as root (Debian/Ubuntu: apt-get install -y ${missing[*]}), then run this again"
    exit 2
  fi
  say "installing ${missing[*]} with apt-get"
  export DEBIAN_FRONTEND=noninteractive
  # Install tools, start no daemons (prometheus ships a server next to promtool):
  # policy-rc.d answering 101 tells invoke-rc.d not to start services. An existing
  # policy is left as it is.
  if [[ ! -e /usr/sbin/policy-rc.d ]]; then
    printf '#!/bin/sh\nexit 101\n' >/usr/sbin/policy-rc.d && chmod 755 /usr/sbin/policy-rc.d
    trap 'rm -f /usr/sbin/policy-rc.d' EXIT
  fi
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

# The Python environment: rebuilt when pyproject.toml changes.
stamp="$venv/.rackgate-installed"
if [[ ! -f "$stamp" || "$root/pyproject.toml" -nt "$stamp" ]]; then
  say "creating $venv and installing rackgate with its dev tools (a few minutes the first time)"
  python3 -m venv "$venv"
  "$venv/bin/python" -m pip install -q --upgrade pip 2> >(grep -v "is ignored: it is neither a file nor a directory" >&2)
  "$venv/bin/python" -m pip install -q -e "$root[dev]" 2> >(grep -v "is ignored: it is neither a file nor a directory" >&2)
  touch "$stamp"
fi
