#!/usr/bin/env bash
# Install what rackgate needs on this machine, once, then prove that it works:
#   1. system packages: podman, runc, debootstrap, the demo rack's IPMI simulator, and the
#      container name service of the network backend podman uses here (below); with --test
#      also what the tests run on the host (chromium, promtool, Open MPI with mpi4py);
#   2. the Python virtual environment .venv (rebuilt when pyproject.toml changes);
#   3. the container base image (scripts/build-image.sh: rebuilt when its recipe changes);
#   4. a self-check: two throw-away containers from that image, on a throw-away podman
#      network, must reach each other by address and by name. A failure stops here with
#      one line naming the package or setting to fix. It is skipped while nothing it
#      depends on has changed since it last passed (.state/bootstrap/network-check.ok).
# Safe to run again: it only installs what is missing, and prints nothing when all is well.
#
# Usage: scripts/bootstrap.sh [--test]                  install, then self-check
#        scripts/bootstrap.sh --print-packages [--test] print every Debian package this may
#            install, with or without --test (the list is the same), one per line, and do
#            nothing else (../shared/tools/hidden-deps reads it)
#
# Container names: the demo rack and the molecule scenarios never rely on the network's
# DNS: every container gets its peers' fixed addresses in /etc/hosts (--add-host). The
# name service is installed for the user's own tooling, and it is the one that matches
# the network backend podman chose on this machine: on Debian 12, podman 4.3 installed
# without recommends runs the CNI backend, where only the dnsname plugin resolves names
# (netavark is not installed: switching backends needs `podman system reset`, which
# would delete every container and network of the machine); where podman runs netavark
# (podman 5, Debian 13), its name service is aardvark-dns. If that package cannot be
# installed, this says so once and goes on: nothing of rackgate needs it.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
venv="$root/.venv"
with_tests=false
print_packages=false
for arg in "$@"; do
  case "$arg" in
    --test) with_tests=true ;;
    --print-packages) print_packages=true ;;
    *) echo "usage: scripts/bootstrap.sh [--print-packages] [--test]" >&2; exit 2 ;;
  esac
done
export CONTAINERS_CONF="${CONTAINERS_CONF:-$root/molecule/containers.conf}"

say() { printf 'bootstrap: %s\n' "$*" >&2; }

# command -> Debian package that provides it
declare -A needs=([podman]=podman [runc]=runc [debootstrap]=debootstrap
                  [ipmi_sim]=openipmi [ipmitool]=ipmitool)  # the demo rack's IPMI BMC
# ... and for the tests (--test)
declare -A test_needs=([chromium]=chromium   # renders the HTML report (e2e)
                       [promtool]=prometheus # `promtool test rules` for the alert rules
                       [mpirun]=openmpi-bin  # the MPI probe is run for real in the unit tests
                       [fio]=fio             # retest collects fio on local hosts (integration)
                       # the fabric tests run the real opensm and infiniband-diags against
                       # ibsim, the simulated fabric (ibsim-run preloads libumad2sim0's library)
                       [ibsim]=ibsim-utils [opensm]=opensm [ibnetdiscover]=infiniband-diags)
if $with_tests; then
  for cmd in "${!test_needs[@]}"; do needs[$cmd]="${test_needs[$cmd]}"; done
fi
# network backend (podman info) -> the package that resolves container names on it
declare -A name_service=([cni]=golang-github-containernetworking-plugin-dnsname
                         [netavark]=aardvark-dns)

if $print_packages; then
  printf '%s\n' "${needs[@]}" "${test_needs[@]}" python3-mpi4py python3 python3-venv \
    "${name_service[@]}" | sort -u
  exit 0
fi

installed() { [[ "$(dpkg-query -W -f='${Status}' "$1" 2>/dev/null)" == "install ok installed" ]]; }

apt_install() {  # packages... ; returns apt-get's status, prints nothing on success
  if [[ $(id -u) -ne 0 ]] || ! command -v apt-get >/dev/null; then
    say "missing: $*"
    say "install them as root (Debian/Ubuntu: apt-get install -y $*), then run this again"
    exit 2
  fi
  export DEBIAN_FRONTEND=noninteractive
  # Install tools, start no daemons (prometheus ships a server next to promtool):
  # policy-rc.d answering 101 tells invoke-rc.d not to start services. An existing
  # policy is left as it is.
  local made_policy=false
  if [[ ! -e /usr/sbin/policy-rc.d ]]; then
    printf '#!/bin/sh\nexit 101\n' >/usr/sbin/policy-rc.d && chmod 755 /usr/sbin/policy-rc.d
    made_policy=true
  fi
  local rc=0
  if ! ${apt_updated:-false}; then
    apt-get update -qq || rc=$?
    apt_updated=true
  fi
  ((rc == 0)) && { apt-get install -y -qq --no-install-recommends "$@" >/dev/null || rc=$?; }
  $made_policy && rm -f /usr/sbin/policy-rc.d
  return "$rc"
}

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
  say "installing ${missing[*]} with apt-get"
  apt_install "${missing[@]}"
fi

# The container name service of the backend podman uses here (see the header).
backend="$(podman info --format '{{.Host.NetworkBackend}}' 2>/dev/null || true)"
dns_package="${name_service[$backend]:-}"
if [[ -z "$dns_package" ]]; then
  say "podman reports the network backend '${backend:-nothing}' (podman info): expected cni or netavark; check podman and $CONTAINERS_CONF"
  exit 1
fi
if ! installed "$dns_package"; then
  say "installing $dns_package (container names on podman's $backend networks) with apt-get"
  apt_install "$dns_package" \
    || say "could not install $dns_package: containers on podman networks will not resolve each other's names by DNS (rackgate does not need it: its containers have /etc/hosts entries)"
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

# The base image the self-check, the demo rack and molecule start containers from.
image="$("$root/scripts/build-image.sh")"

# ---- Self-check: two containers on a podman network reach each other by address and name.
# Skipped while everything it depends on is as it was when it last passed.
check_dir="$root/.state/bootstrap"
check_stamp="$check_dir/network-check.ok"
key="$( { cat "${BASH_SOURCE[0]}" "$CONTAINERS_CONF"; echo "$image $backend"; podman --version
          dpkg-query -W -f='${Package} ${Version} ${Status}\n' podman runc conmon \
            golang-github-containernetworking-plugins "${name_service[@]}" netavark \
            dnsmasq-base iptables 2>/dev/null || true; } | sha256sum | cut -c1-16)"
if [[ -f "$check_stamp" && "$(cat "$check_stamp")" == "$key" ]]; then
  exit 0
fi

net=rackgate-selfcheck
subnet_prefix=10.89.250
a=rg-selfcheck-a; b=rg-selfcheck-b
a_ip="$subnet_prefix.10"; b_ip="$subnet_prefix.11"
port=7070
cleanup() {
  podman rm --force --time 0 "$a" "$b" >/dev/null 2>&1 || true
  podman network rm --force "$net" >/dev/null 2>&1 || true
}
fail() { cleanup; say "self-check failed: $*"; exit 1; }
one_line() { tr '\n' ' ' <<<"$1" | sed -E 's/ +/ /g; s/ $//' | tail -c 300; }
cleanup
trap cleanup EXIT

out="$(podman network create --label io.rackgate.selfcheck=1 --subnet "$subnet_prefix.0/24" "$net" 2>&1)" \
  || fail "podman cannot create a network ($(one_line "$out")): check the $backend backend's packages (cni: golang-github-containernetworking-plugins; netavark: netavark) and $CONTAINERS_CONF"
# b answers one line to every connection for at most 60 s, then exits by itself.
server='import socket
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("0.0.0.0", int(__import__("sys").argv[1]))); s.listen(8); s.settimeout(60)
while True:
    c, _ = s.accept(); c.sendall(b"rackgate\n"); c.close()'
out="$(podman run --detach --name "$b" --hostname "$b" --network "$net" --ip "$b_ip" \
         --add-host "$a:$a_ip" "$image" python3 -c "$server" "$port" 2>&1)" \
  || fail "podman cannot start a container from $image ($(one_line "$out")): check runc and the [engine] settings in $CONTAINERS_CONF"
# a reaches b by address, then by the name its /etc/hosts carries (--add-host), then asks
# the network's DNS for b's DNS-only name. Each attempt is bounded (5 s, 10 tries).
client='import socket, sys, time
port = int(sys.argv[1])
def reach(target):
    why = "no attempt"
    for _ in range(10):
        try:
            with socket.create_connection((target, port), timeout=5) as c:
                if c.recv(64) == b"rackgate\n":
                    return "ok"
                why = "wrong answer"
        except OSError as exc:
            why = str(exc)
        time.sleep(0.5)
    return why
for what, target in zip(("address", "name", "dns"), sys.argv[2:]):
    print(what, reach(target), flush=True)'
out="$(podman run --rm --name "$a" --hostname "$a" --network "$net" --ip "$a_ip" \
         --add-host "$b:$b_ip" "$image" timeout 120 python3 -c "$client" "$port" \
         "$b_ip" "$b" "$b.dns.podman" 2>&1)" \
  || fail "the check container did not run ($(one_line "$out")): check podman with $CONTAINERS_CONF"
result() { sed -n "s/^$1 //p" <<<"$out"; }
[[ "$(result address)" == ok ]] \
  || fail "$a cannot reach $b at $b_ip on a podman network ($(result address)): check the $backend backend (bridge, iptables) and that nothing else uses $subnet_prefix.0/24"
[[ "$(result name)" == ok ]] \
  || fail "$a cannot reach $b by name ($(result name)): its /etc/hosts entry from --add-host is missing and no container DNS answered; install $dns_package, and check that $CONTAINERS_CONF does not set no_hosts"
if installed "$dns_package" && [[ "$(result dns)" != ok ]]; then
  fail "$dns_package is installed but podman's container DNS does not answer for $b.dns.podman ($(result dns)): check that the firewall lets the podman bridge reach port 53"
fi
mkdir -p "$check_dir"
echo "$key" >"$check_stamp"
