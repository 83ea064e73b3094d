#!/usr/bin/env bash
# Make sure a molecule scenario's own podman network exists with its fixed subnet, for the
# scenarios whose containers have fixed addresses (slurm cluster, monitoring,
# cooling_telemetry). Their molecule.yml runs it as the scenario's dependency step, before
# create; the containers join it through extra_opts, so the driver neither creates nor
# removes it: it stays, labelled io.rackgate.molecule=1, for the next run.
#
# Why not podman's default network: its host-local IPAM hands out the address after the
# last one reserved, fixed ones included, so a container of another scenario started
# while one scenario's fixed addresses were being reserved took one of them (CI,
# 2026-12-02: rg-slurm-c2's 10.88.240.12). And why not the driver's `network` with a
# subnet: its create playbook reads a platform's `subnet`, but its schema refuses the key.
#
# Usage: scripts/molecule-network.sh NAME SUBNET     e.g. rg-molecule-slurm 10.89.241.0/24
# An existing network of that name with another subnet is an error, never changed.
# Environment: CONTAINERS_CONF.
set -euo pipefail
say() { echo "molecule-network: $*" >&2; }
if (($# != 2)); then
  say "usage: $0 NAME SUBNET"
  exit 2
fi
name="$1" subnet="$2"
if [[ ! "$name" =~ ^rg-molecule-[a-z][a-z-]{0,30}$ ]]; then
  say "'$name' is not a scenario network name (rg-molecule-<letters and dashes>)"
  exit 2
fi
if [[ ! "$subnet" =~ ^10\.89\.(24[1-9])\.0/24$ ]]; then
  say "$name: '$subnet' is not one of the scenarios' subnets (10.89.241.0/24 to 10.89.249.0/24)"
  exit 2
fi

subnet_of() { podman network inspect --format '{{range .Subnets}}{{.Subnet}} {{end}}' "$1"; }
check() {  # the existing network must have exactly this subnet
  local have
  have="$(subnet_of "$name")"
  have="${have% }"
  if [[ "$have" != "$subnet" ]]; then
    say "podman network $name has subnet(s) '$have', not $subnet; remove it (podman network rm $name) and run again"
    exit 1
  fi
  say "$name ($subnet) is there"
}
if podman network exists "$name"; then
  check
  exit 0
fi
if ! out="$(podman network create --label io.rackgate.molecule=1 --subnet "$subnet" "$name" 2>&1)"; then
  # another run of this scenario may have created it in between
  podman network exists "$name" || { say "podman network create $name --subnet $subnet failed: $out"; exit 1; }
  check
  exit 0
fi
say "created $name ($subnet)"
