#!/usr/bin/env bash
# Run Molecule scenarios on the lab's node images.
#   scripts/molecule.sh [--os debian|ubuntu] [SCENARIO...]
#       the named scenarios (all when none), one at a time, on KILN_MOLECULE_DISTRO (default
#       trixie); the scenarios with nodes of two releases (enroot, hpcx, nvidia_driver) put
#       the second on KILN_MOLECULE_OLDER (default bookworm). --os ubuntu: Ubuntu 24.04
#       (noble) and 22.04 (jammy); --os debian: Debian 13 and 12. The driver's node of
#       Canonical's packages runs KILN_MOLECULE_UBUNTU (default noble).
#   scripts/molecule.sh --images
#       only the node images --ci needs (`make test` builds them beside the unit tests,
#       so the lab's tests and Molecule's lane start with them made)
#   scripts/molecule.sh --ci
#       what `make molecule` runs: each scenario on the releases of CI_RELEASES below, in
#       the two LANES side by side, then Slurm's alone; with KILN_MOLECULE_LANES=1 (`make
#       test`, beside the lab's tests) in one lane, Slurm's first
# Builds the node images it needs once and creates the shared scenario network, which
# Molecule's schema cannot give a subnet.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$PWD/.venv/bin:$PATH"
network=kiln-molecule
subnet_prefix=10.214.0

# What --ci runs each scenario on: "DISTRO OLDER". The e2e lab runs every role on Debian
# 13 (trixie), so CI gives Ubuntu 24.04 the compute node's roles in Molecule: Slurm's
# scenario (munge, slurm, mpi, pyxis, the health check; config files pushed, which the lab
# does not do), storage's and monitoring's on noble, enroot's (base, nccl_env, enroot)
# with noble beside Debian 12. The driver's scenario stays on Debian 12 and 13 (Debian's
# own driver packages, which no other test installs; its drv-ubuntu node installs
# Canonical's on Ubuntu 24.04), and HPC-X's too (its nccl-tests
# build is made against Debian 13's Open MPI). Ubuntu 22.04 runs by hand (`--os ubuntu`).
# docs/performance.md has the times.
declare -A CI_RELEASES=(
  [nvidia_driver]="trixie bookworm"
  [enroot]="noble bookworm"
  [storage]="noble bookworm"
  [hpcx]="trixie bookworm"
  [monitoring]="noble bookworm"
  [slurm]="noble bookworm"
)

if [ "${1:-}" = "--os" ]; then
  case "${2:-}" in
    debian) export KILN_MOLECULE_DISTRO=trixie KILN_MOLECULE_OLDER=bookworm ;;
    ubuntu) export KILN_MOLECULE_DISTRO=noble KILN_MOLECULE_OLDER=jammy ;;
    *) echo "scripts/molecule.sh: --os takes debian or ubuntu, not '${2:-}'" >&2; exit 2 ;;
  esac
  shift 2
fi
# The driver's scenario also has a node of Ubuntu's own driver packages (drv-ubuntu).
images=("${KILN_MOLECULE_DISTRO:-trixie}" "${KILN_MOLECULE_OLDER:-bookworm}")
if [ "$#" -eq 0 ] || [[ " $* " == *" --ci "* || " $* " == *" --images "* || " $* " == *" nvidia_driver "* ]]; then
  images+=("${KILN_MOLECULE_UBUNTU:-noble}")
fi
if [ "${1:-}" = "--ci" ] || [ "${1:-}" = "--images" ]; then
  # shellcheck disable=SC2206  # each value is two names
  for releases in "${CI_RELEASES[@]}"; do images+=($releases); done
fi
for distro in $(printf '%s\n' "${images[@]}" | sort -u); do
  kiln lab image --distro "$distro" >/dev/null
done
podman network exists "$network" ||
  podman network create --subnet "$subnet_prefix.0/24" --gateway "$subnet_prefix.1" "$network" >/dev/null
# The roles' plugins, as the collection kiln.cluster (molecule/config.yml).
KILN_COLLECTIONS_PATH="$(python -c 'from kiln import paths; print(paths.collections_dir())')"
export KILN_COLLECTIONS_PATH
# Nodes install packages through the host's apt-cacher-ng when it runs.
apt_proxy=()
if (exec 3<>/dev/tcp/127.0.0.1/3142) 2>/dev/null; then
  export KILN_MOLECULE_APT_PROXY="http://$subnet_prefix.1:3142"
  apt_proxy=(-o "Acquire::http::Proxy=http://127.0.0.1:3142")
fi

# Every scenario but enroot's starts from localhost/kiln-molecule:DISTRO, the node image
# with base's packages (roles/base/defaults/main.yml) and python3-apt already in it:
# base's install on every node of every scenario's prepare took about a minute of each.
# enroot's scenario holds base's tests and keeps the raw node image, as the lab does.
# podman's layer cache builds each once per node image.
base_packages="$(python -c 'import yaml
print(" ".join(["python3-apt", *yaml.safe_load(open("roles/base/defaults/main.yml"))["base_packages"]]))')"
context="$(mktemp -d)"
for distro in $(printf '%s\n' "${images[@]}" | sort -u); do
  cat >"$context/Containerfile" <<EOF
FROM localhost/kiln-node:$distro
RUN apt-get ${apt_proxy[*]} update -qq && DEBIAN_FRONTEND=noninteractive apt-get ${apt_proxy[*]} install -y -qq --no-install-recommends $base_packages >/dev/null && apt-get clean
EOF
  podman build -q --network host -t "localhost/kiln-molecule:$distro" "$context" >/dev/null
done
rm -rf "$context"
if [ "${1:-}" = "--images" ]; then
  exit
fi

# A scenario takes under 12 minutes on CI, Slurm's (four nodes, run through twice) about
# 18. One that hangs (seen once in CI: a node's package install never returned) is
# stopped and run once more from scratch, so a stuck container costs minutes rather than
# the whole CI budget; a real failure is not retried.
limit_for() {
  if [ -n "${KILN_MOLECULE_TIMEOUT:-}" ]; then
    echo "$KILN_MOLECULE_TIMEOUT"
  elif [ "$1" = slurm ]; then
    echo 1800
  else
    echo 1200
  fi
}
run_scenario() {
  timeout --kill-after=30 "$(limit_for "$1")" molecule -c molecule/config.yml test -s "$1"
}
scenario() {
  local distro="${KILN_MOLECULE_DISTRO:-trixie}/${KILN_MOLECULE_OLDER:-bookworm}"
  local rc=0 start=$SECONDS
  echo "== molecule scenario $1 ($distro)"
  run_scenario "$1" || rc=$?
  if [ "$rc" -eq 124 ] || [ "$rc" -eq 137 ]; then
    echo "== molecule scenario $1 ($distro) took over $(limit_for "$1")s: destroying and running it again"
    molecule -c molecule/config.yml destroy -s "$1" || true
    rc=0
    run_scenario "$1" || rc=$?
  fi
  # A row in `make test`'s table of times (scripts/timed-stages.sh).
  if [ -n "${KILN_TIMINGS:-}" ]; then
    echo "molecule:$1 $((SECONDS - start))" >>"$KILN_TIMINGS"
  fi
  return "$rc"
}

# What --ci runs in each of its two lanes, side by side, before Slurm's scenario alone.
# The lanes are balanced by the times of CI's last fresh-clone run (docs/performance.md:
# nvidia_driver 10m19s + enroot 7m35s, storage 7m20s + hpcx 6m39s + monitoring 4m14s,
# each beside the other lane); scenarios use addresses of their own on the shared
# network, so any two can run at once (tests/unit/test_molecule_scenarios.py).
LANES=("nvidia_driver enroot" "storage hpcx monitoring")

# Each line of a scenario's output with the time and the scenario's name: CI's log then
# says how long each step took.
label() {
  local line
  while IFS= read -r line; do printf '%(%H:%M:%S)T [%s] %s\n' -1 "$1" "$line"; done
}

# Runs the named scenarios one after another, each on its CI_RELEASES, each line of their
# output labelled; a failed one is added to the file $failures.
lane() {
  local name distro older
  for name in "$@"; do
    read -r distro older <<<"${CI_RELEASES[$name]}"
    KILN_MOLECULE_DISTRO=$distro KILN_MOLECULE_OLDER=$older scenario "$name" 2>&1 |
      label "$name" || echo "$name" >>"$failures"
  done
}

if [ "${1:-}" = "--ci" ]; then
  # Two lanes of scenarios without Slurm side by side: Molecule waits on podman and apt
  # as much as on the two cores. Slurm's (four nodes) runs alone afterwards: side by side
  # it ran past its time limit. It runs once, on what the lab (tests/e2e) does not:
  # Ubuntu 24.04's Slurm 23.11 and pushed config files; the lab runs Debian 13's
  # configless. Every scenario runs; the failed ones are named at the end.
  failures="$(mktemp)"
  every=()
  for dir in molecule/*/molecule.yml; do every+=("$(basename "$(dirname "$dir")")"); done
  laned=" ${LANES[*]} slurm "
  for name in "${every[@]}"; do
    if [[ "$laned" != *" $name "* ]] || [ -z "${CI_RELEASES[$name]:-}" ]; then
      echo "== scenario $name is in no lane of scripts/molecule.sh or has no CI_RELEASES" >&2
      exit 2
    fi
  done
  if [ "${KILN_MOLECULE_LANES:-2}" = 1 ]; then
    # Beside the lab's tests, which wait on Slurm, jobs and timers much of the time: one
    # scenario at a time fills what they leave idle, the longest first.
    KILN_SLURM_CONFIG_MODE=pushed lane slurm
    # shellcheck disable=SC2086  # lanes are lists of names
    lane ${LANES[*]}
  else
    pids=()
    for scenarios in "${LANES[@]}"; do
      # shellcheck disable=SC2086  # a lane is a list of names
      lane $scenarios &
      pids+=($!)
    done
    wait "${pids[@]}"
    KILN_SLURM_CONFIG_MODE=pushed lane slurm
  fi
  if [ -s "$failures" ]; then
    echo "== molecule scenarios failed: $(sort "$failures" | tr '\n' ' ')"
    rm -f "$failures"
    exit 1
  fi
  rm -f "$failures"
  exit
fi

scenarios=("$@")
if [ ${#scenarios[@]} -eq 0 ]; then
  for dir in molecule/*/molecule.yml; do scenarios+=("$(basename "$(dirname "$dir")")"); done
fi
for name in "${scenarios[@]}"; do
  scenario "$name"
done
