#!/usr/bin/env bash
# Run Molecule scenarios on the lab's node image: `scripts/molecule.sh [SCENARIO...]`
# (all scenarios when none is named). Builds the image once and creates the shared
# scenario network, which Molecule's schema cannot give a subnet.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$PWD/.venv/bin:$PATH"
distro="${KILN_MOLECULE_DISTRO:-trixie}"
network=kiln-molecule
subnet_prefix=10.214.0

kiln lab image --distro "$distro" >/dev/null
podman network exists "$network" ||
  podman network create --subnet "$subnet_prefix.0/24" --gateway "$subnet_prefix.1" "$network" >/dev/null
# Nodes install packages through the host's apt-cacher-ng when it runs.
if (exec 3<>/dev/tcp/127.0.0.1/3142) 2>/dev/null; then
  export KILN_MOLECULE_APT_PROXY="http://$subnet_prefix.1:3142"
fi

scenarios=("$@")
if [ ${#scenarios[@]} -eq 0 ]; then
  for dir in molecule/*/molecule.yml; do scenarios+=("$(basename "$(dirname "$dir")")"); done
fi
# A scenario takes under 10 minutes. One that hangs (seen once in CI: a node's package
# install never returned) is stopped and run once more from scratch, so a stuck
# container costs minutes rather than the whole CI budget; a real failure is not retried.
limit="${KILN_MOLECULE_TIMEOUT:-1200}"
run_scenario() {
  timeout --kill-after=30 "$limit" molecule -c molecule/config.yml test -s "$1"
}
for scenario in "${scenarios[@]}"; do
  echo "== molecule scenario $scenario ($distro)"
  rc=0
  run_scenario "$scenario" || rc=$?
  if [ "$rc" -eq 124 ] || [ "$rc" -eq 137 ]; then
    echo "== molecule scenario $scenario ($distro) took over ${limit}s: destroying and running it again"
    molecule -c molecule/config.yml destroy -s "$scenario" || true
    run_scenario "$scenario"
  elif [ "$rc" -ne 0 ]; then
    exit "$rc"
  fi
done
