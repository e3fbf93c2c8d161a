#!/usr/bin/env bash
# Install what Kiln's lab and tests need on a Debian/Ubuntu host, and configure podman
# the way this kind of host needs it (`kiln lab doctor` checks the same things).
# Idempotent; run as root (or it re-runs itself with sudo). Packages named as arguments
# are installed too (`make prereqs` adds chromium, in which the unit tests open the HTML
# reports; `make e2e` takes the screenshot of Prometheus's page with it too).
set -euo pipefail
if [ "$(id -u)" -ne 0 ]; then exec sudo -E "$0" "$@"; fi

packages=(podman runc debootstrap apt-cacher-ng openssh-client make python3-venv tar apt-utils gnupg "$@")
missing=()
for p in "${packages[@]}"; do dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p"); done
if [ ${#missing[@]} -gt 0 ]; then
  echo "setup-host: installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

# promtool, Prometheus's checker of rules and metrics files, and the prometheus binary,
# which a monitoring test runs for a few seconds (it scrapes a recorded dcgm-exporter
# output through Kiln's scrape job): Debian 13 packages promtool alone; Debian 12 only
# inside `prometheus`, whose service this host does not need, so the binaries are taken
# out of that package.
if ! command -v promtool >/dev/null && apt-cache show promtool >/dev/null 2>&1; then
  echo "setup-host: installing promtool"
  apt-get install -y -qq --no-install-recommends promtool >/dev/null
fi
if ! command -v promtool >/dev/null || ! command -v prometheus >/dev/null; then
  unpacked="$(mktemp -d)"
  (cd "$unpacked" && apt-get download -qq -o APT::Sandbox::User=root prometheus)
  dpkg-deb -x "$unpacked"/prometheus_*.deb "$unpacked/root"
  for tool in promtool prometheus; do
    if ! command -v "$tool" >/dev/null && [ -x "$unpacked/root/usr/bin/$tool" ]; then
      echo "setup-host: installing $tool"
      install -m 0755 "$unpacked/root/usr/bin/$tool" "/usr/local/bin/$tool"
    fi
  done
  rm -rf "$unpacked"
fi

# runc, not crun: crun refuses hybrid v1/v2 cgroups. Container ulimits must stay
# under the host's hard limits or runc fails with "setrlimit RLIMIT_NOFILE".
conf=/etc/containers/containers.conf
mkdir -p /etc/containers
if ! grep -q '^runtime = "runc"' "$conf" 2>/dev/null || ! grep -q 'nofile=' "$conf" 2>/dev/null; then
  echo "setup-host: writing $conf"
  cat > "$conf" <<'CONF'
# Written by Kiln's scripts/setup-host.sh
[containers]
default_ulimits = ["nofile=1024:1024", "nproc=4096:4096"]

[engine]
runtime = "runc"
CONF
fi

# apt-cacher-ng: every lab node and Molecule instance installs the same packages;
# the cache makes the second and later installs local. Its default Debian backend
# (ftp.debian.org) is not always reachable; deb.debian.org is.
backends=/etc/apt-cacher-ng/backends_debian
if ! grep -qx 'http://deb.debian.org/debian/' "$backends" 2>/dev/null; then
  echo 'http://deb.debian.org/debian/' > "$backends"
  restart_cache=1
fi
if ! (exec 3<>/dev/tcp/127.0.0.1/3142) 2>/dev/null || [ -n "${restart_cache:-}" ]; then
  if command -v systemctl >/dev/null && [ -d /run/systemd/system ]; then
    systemctl restart apt-cacher-ng
  else
    # Started from here, the daemon inherits this shell's open files: a lock its caller
    # holds (`flock LOCK make lab`) would stay held for as long as the daemon runs.
    (
      for fd in /proc/self/fd/*; do
        fd=${fd##*/}
        if [ "$fd" -gt 2 ]; then eval "exec $fd>&-"; fi
      done 2>/dev/null
      service apt-cacher-ng restart >/dev/null
    )
  fi
fi
echo "setup-host: ready"
