#!/usr/bin/env bash
# Run `molecule test --all` for roles on Debian releases, JOBS roles at a time (default 3),
# each in its own containers (RACKGATE_MOLECULE_INSTANCE=rg-<role>; multi-container
# scenarios name their own), with its log in .state/molecule/<release>/<role>.log. Prints
# one line per role and release with its time; a failed one's log tail follows. Exit
# status 1 if any failed.
#
# Usage: scripts/molecule-all.sh [ROLE[:RELEASE] ...]
#   ROLE            on MOLECULE_DISTRO (bookworm or trixie; default bookworm)
#   ROLE:RELEASE    on that release, e.g. common:trixie
#   no argument     every role with a molecule/ folder, on MOLECULE_DISTRO
# Every (role, release) runs in one pool, JOBS at a time, longest first as the order of
# ROLE_ORDER below, the second release of a role queued last; a role never runs on two
# releases at once (its scenarios use fixed container names and addresses: a per-role
# flock makes the second wait). Each release's base image is built first when missing
# (scripts/build-image.sh with RACKGATE_DEBIAN_SUITE=<release>).
# Environment: MOLECULE_DISTRO, JOBS, RACKGATE_DEBIAN_MIRROR, RACKGATE_DEBIAN_SECURITY_MIRROR
#   (default: this machine's own, from scripts/debian-mirror.sh, as the Makefile sets
#   them); scenarios read the mirrors in molecule.yml, and MOLECULE_DISTRO names the release
#   to them.
# Most of a scenario's time is spent waiting on podman and apt, so a few at once finish
# sooner than one after the other, even on two cores.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
jobs="${JOBS:-3}"
default_release="${MOLECULE_DISTRO:-bookworm}"
releases=(bookworm trixie)
# Set but empty RACKGATE_DEBIAN_SECURITY_MIRROR means "no security mirror": kept as it is.
export RACKGATE_DEBIAN_MIRROR="${RACKGATE_DEBIAN_MIRROR:-$("$root/scripts/debian-mirror.sh")}"
if [[ -z "${RACKGATE_DEBIAN_SECURITY_MIRROR+set}" ]]; then
  RACKGATE_DEBIAN_SECURITY_MIRROR="$("$root/scripts/debian-mirror.sh" --security)"
fi
export RACKGATE_DEBIAN_SECURITY_MIRROR

items=("$@")
if ((${#items[@]} == 0)); then
  for dir in "$root"/roles/*/; do
    [[ -d "$dir/molecule" ]] && items+=("$(basename "$dir")")
  done
fi
declare -A wanted=()  # release -> roles, space-separated, in the order given
total=0
for item in "${items[@]}"; do
  role="${item%%:*}"
  release="$default_release"
  [[ "$item" == *:* ]] && release="${item#*:}"
  if [[ ! " ${releases[*]} " == *" $release "* ]]; then
    echo "molecule-all: '$item': the release is '$release'; known releases: ${releases[*]}" >&2
    exit 2
  fi
  if [[ ! "$role" =~ ^[a-z_]+$ || ! -d "$root/roles/$role/molecule" ]]; then
    echo "molecule-all: '$item': no role '$role' with molecule scenarios under roles/" >&2
    exit 2
  fi
  wanted[$release]+="$role "
  total=$((total + 1))
done

run_role() {  # role:release -> prints "<status> <role>:<release> <seconds>"; never fails itself
  local role="${1%%:*}" release="${1#*:}" start rc image
  image="IMAGE_$release"
  rc=0
  # the role's lock: its scenarios on the other release wait until these end
  exec 8>"$logs/.lock-$role"
  flock 8
  start=$(date +%s)
  (cd "$root/roles/$role" && RACKGATE_MOLECULE_INSTANCE="rg-${role//_/-}" \
     RACKGATE_IMAGE="${!image}" MOLECULE_DISTRO="$release" \
     molecule test --all) >"$logs/$release/$role.log" 2>&1 || rc=$?
  echo "$([[ $rc -eq 0 ]] && echo ok || echo FAILED) $role:$release $(( $(date +%s) - start ))"
}
export -f run_role
logs="$root/.state/molecule"
export root logs

# Longest scenarios first (their times in CI, 2026-12-01), so the pool's tail is short;
# a role not listed here runs after these. common and slurm come first: they run on
# trixie too, queued last, and must have ended on bookworm by then.
ROLE_ORDER="common slurm rdma monitoring kubernetes lustre_client gpu_driver cooling_telemetry nccl"
queue=()
for release in "${releases[@]}"; do
  [[ -n "${wanted[$release]:-}" ]] || continue
  mkdir -p "$logs/$release"
  image="$(RACKGATE_DEBIAN_SUITE="$release" "$root/scripts/build-image.sh")"  # fails: exits
  export "IMAGE_$release=$image"
  echo "molecule: $release ($image): ${wanted[$release]}"
  for role in $ROLE_ORDER; do
    [[ " ${wanted[$release]} " == *" $role "* ]] && queue+=("$role:$release")
  done
  for role in ${wanted[$release]}; do
    [[ " $ROLE_ORDER " == *" $role "* ]] || queue+=("$role:$release")
  done
done

echo "molecule: $total role run(s), $jobs at a time; logs in ${logs#"$root"/}/<release>/"
start=$(date +%s)
results=""
# One line per role as each finishes; kept for the summary below. (Not `tee /dev/stderr`:
# where stderr is a log file, tee would reopen and truncate it.)
while IFS= read -r line; do
  echo "$line"
  results+="$line"$'\n'
done < <(printf '%s\n' "${queue[@]}" | xargs -P "$jobs" -I{} bash -c 'run_role "$@"' _ {})
failed=$(grep -c '^FAILED' <<<"$results" || true)
for run in $(awk '/^FAILED/ {print $2}' <<<"$results"); do
  echo "== $run failed; the last 120 lines of $logs/${run#*:}/${run%%:*}.log:"
  tail -n 120 "$logs/${run#*:}/${run%%:*}.log"
done
echo "molecule: $(( total - failed )) passed, $failed failed in $(( $(date +%s) - start )) s"
(( failed == 0 ))
