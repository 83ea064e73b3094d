#!/usr/bin/env bash
# Run `molecule test --all` for every role that has scenarios, JOBS at a time (default 3),
# each in its own containers (RACKGATE_MOLECULE_INSTANCE=rg-<role>; multi-container
# scenarios name their own), with its log in .state/molecule/<role>.log. Prints one line per
# role with its time; a failed role's log tail follows it. Exit status 1 if any role failed.
#
# Usage: scripts/molecule-all.sh [ROLE ...]     (default: every role with a molecule/ folder)
# Environment: JOBS (parallel roles), RACKGATE_IMAGE (default: scripts/build-image.sh's),
#   RACKGATE_DEBIAN_MIRROR, RACKGATE_DEBIAN_SECURITY_MIRROR (default: this machine's own, from
#   scripts/debian-mirror.sh, as the Makefile sets them); scenarios read them in molecule.yml.
# Most of a scenario's time is spent waiting on podman and apt, so a few at once finish
# sooner than one after the other, even on two cores.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
jobs="${JOBS:-3}"
logs="$root/.state/molecule"
mkdir -p "$logs"
# Set but empty RACKGATE_DEBIAN_SECURITY_MIRROR means "no security mirror": kept as it is.
export RACKGATE_DEBIAN_MIRROR="${RACKGATE_DEBIAN_MIRROR:-$("$root/scripts/debian-mirror.sh")}"
if [[ -z "${RACKGATE_DEBIAN_SECURITY_MIRROR+set}" ]]; then
  RACKGATE_DEBIAN_SECURITY_MIRROR="$("$root/scripts/debian-mirror.sh" --security)"
fi
export RACKGATE_DEBIAN_SECURITY_MIRROR
export RACKGATE_IMAGE="${RACKGATE_IMAGE:-$("$root/scripts/build-image.sh")}"

roles=("$@")
if ((${#roles[@]} == 0)); then
  for dir in "$root"/roles/*/; do
    [[ -d "$dir/molecule" ]] && roles+=("$(basename "$dir")")
  done
fi

run_role() {  # role -> prints "<status> <role> <seconds>"; never fails itself
  local role="$1" start rc
  start=$(date +%s)
  rc=0
  (cd "$root/roles/$role" && RACKGATE_MOLECULE_INSTANCE="rg-${role//_/-}" \
     molecule test --all) >"$logs/$role.log" 2>&1 || rc=$?
  echo "$([[ $rc -eq 0 ]] && echo ok || echo FAILED) $role $(( $(date +%s) - start ))"
}
export -f run_role
export root logs

echo "molecule: ${#roles[@]} role(s), $jobs at a time; logs in ${logs#"$root"/}/"
start=$(date +%s)
# One line per role as each finishes; kept for the summary below. (Not `tee /dev/stderr`:
# where stderr is a log file, tee would reopen and truncate it.)
results=""
while IFS= read -r line; do
  echo "$line"
  results+="$line"$'\n'
done < <(printf '%s\n' "${roles[@]}" | xargs -P "$jobs" -I{} bash -c 'run_role "$@"' _ {})
failed=$(grep -c '^FAILED' <<<"$results" || true)
for role in $(awk '/^FAILED/ {print $2}' <<<"$results"); do
  echo "== $role failed; the last 120 lines of $logs/$role.log:"
  tail -n 120 "$logs/$role.log"
done
echo "molecule: $(( ${#roles[@]} - failed )) passed, $failed failed in $(( $(date +%s) - start )) s"
(( failed == 0 ))
