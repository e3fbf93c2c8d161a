#!/bin/sh
# STAND-INS, NOT NVIDIA'S PACKAGES: packages built with equivs under the names and
# versions NVIDIA's CUDA repository uses, in a flat repository signed as NVIDIA's is
# (Origin NVIDIA, Label "NVIDIA CUDA"), so the nvidia_driver role's apt logic (origin
# preferences, the version pin, holds, the fabric manager's and IMEX's exact version) meets
# real apt. They are empty but for units, IMEX's config and small scripts in place of
# nvidia-smi, nvidia-imex and nvidia-imex-ctl.
# The fabric manager is offered one patch behind the newest driver, as happens upstream.
# The driver's package names are those of NVIDIA's tree for the release the script runs on
# (/etc/os-release): debian12/debian13 or ubuntu2204/ubuntu2404.
#   build-standin-repo.sh DIR   writes DIR/{*.deb,Packages,Release,InRelease,standin.pub}
set -eu
repo="$1"
work="$(mktemp -d)"
export GNUPGHOME="$work/gnupg"
mkdir -p "$repo" "$GNUPGHOME"
chmod 700 "$GNUPGHOME"
cd "$work"

cat > nvidia-persistenced.service <<'UNIT'
[Unit]
Description=Stand-in for NVIDIA Persistence Daemon (Kiln's Molecule test)
[Service]
Type=forking
ExecStart=/usr/bin/nvidia-persistenced --user nvidia-persistenced
[Install]
WantedBy=multi-user.target
UNIT
cat > nvidia-fabricmanager.service <<'UNIT'
[Unit]
Description=Stand-in for NVIDIA fabric manager (Kiln's Molecule test)
[Service]
Type=forking
ExecStart=/usr/bin/nv-fabricmanager -c /usr/share/nvidia/nvswitch/fabricmanager.cfg
[Install]
WantedBy=multi-user.target
UNIT
# nvidia-smi answers the one query the role's IMEX step asks: the GPUs' NVLink domain, as
# each of the four GPUs of a GB200 compute tray in the default NVLink partition reports it
# (tests/fixtures/gpu/imex/README.md names the sources: the fields, 32766). Anything else
# fails: no GPU is here.
cat > nvidia-smi <<'SCRIPT'
#!/bin/sh
# Stand-in for NVIDIA's nvidia-smi (Kiln's Molecule test).
if [ "$*" = "--query-gpu=fabric.clusterUuid,fabric.cliqueId --format=csv,noheader" ]; then
  for gpu in 0 1 2 3; do echo "8c1f2a4e-5b3d-4e6f-9a7b-0c1d2e3f4a5b, 32766"; done
  exit 0
fi
echo "stand-in nvidia-smi: no GPU here; only the fabric.clusterUuid,fabric.cliqueId query" >&2
exit 1
SCRIPT
# IMEX, nvidia-imex from branch 580 on. What the package holds, as Canonical's packaging of
# NVIDIA's IMEX tarball installs it (github.com/canonical/apt-packaging-imex:
# debian/templates/nvidia-imex-BRANCH.install.in, debian/conffiles): the programs in
# /usr/bin, the unit in /lib/systemd/system, /etc/nvidia-imex/config.cfg (its one
# conffile), no nodes_config.cfg. The service is nvidia-imex, nvidia-imex-ctl comes with it
# (NVIDIA's IMEX guide, "Getting Started with IMEX"). Its Depends in NVIDIA's repository
# are not known here: none.
# The unit: IMEX daemonizes by default (DAEMONIZE=1, NVIDIA's IMEX guide, "IMEX Service
# Config Options"), so forking; the ExecStart line as AWS ParallelCluster's cookbook tests
# it (aws/aws-parallelcluster-cookbook, nvidia-imex kitchen controls).
cat > nvidia-imex.service <<'UNIT'
[Unit]
Description=Stand-in for NVIDIA IMEX service (Kiln's Molecule test)
[Service]
Type=forking
ExecStart=/usr/bin/nvidia-imex -c /etc/nvidia-imex/config.cfg
[Install]
WantedBy=multi-user.target
UNIT
# Keys and defaults from NVIDIA's IMEX guide, "IMEX Service Config Options".
cat > config.cfg <<'CFG'
# Stand-in for NVIDIA's IMEX config.cfg (Kiln's Molecule test): documented defaults.
DAEMONIZE=1
SERVER_PORT=50000
IMEX_NODE_CONFIG_FILE=/etc/nvidia-imex/nodes_config.cfg
CFG
cat > nvidia-imex <<'SCRIPT'
#!/bin/sh
# Stand-in for NVIDIA's nvidia-imex (Kiln's Molecule test): daemonizes, does nothing.
sleep infinity </dev/null >/dev/null 2>&1 &
SCRIPT
# -N as NVIDIA's IMEX guide, "IMEX Service Command Service", lays it out
# (tests/fixtures/gpu/imex/README.md): every node of nodes_config.cfg READY and connected.
cat > nvidia-imex-ctl <<'SCRIPT'
#!/bin/sh
# Stand-in for NVIDIA's nvidia-imex-ctl (Kiln's Molecule test): -N only.
[ "$*" = -N ] || { echo "stand-in nvidia-imex-ctl: only -N" >&2; exit 2; }
version="$(dpkg-query -W -f '${Version}' nvidia-imex | cut -d- -f1)"
nodes="$(grep -v '^[[:space:]]*$' /etc/nvidia-imex/nodes_config.cfg)"
echo "Connectivity Table Legend:"
echo "C - Connected - Ready for operation"
echo
date +'%m/%d/%Y %H:%M:%S.000'
echo "Nodes:"
i=0
for ip in $nodes; do
  printf 'Node #%-3s - %-15s - %-20s - Version: %s\n' "$i" "$ip" READY "$version"
  i=$((i + 1))
done
echo
printf ' Nodes From\\To '
n=0; while [ "$n" -lt "$i" ]; do printf ' %-3s' "$n"; n=$((n + 1)); done; echo
r=0
while [ "$r" -lt "$i" ]; do
  printf '       %-8s ' "$r"
  n=0; while [ "$n" -lt "$i" ]; do printf ' C  '; n=$((n + 1)); done; echo
  r=$((r + 1))
done
echo
echo "Domain State: UP"
SCRIPT
chmod 755 nvidia-smi nvidia-imex nvidia-imex-ctl
cat > persistenced.postinst <<'SCRIPT'
#!/bin/sh
getent passwd nvidia-persistenced >/dev/null ||
  useradd --system --no-create-home --shell /usr/sbin/nologin nvidia-persistenced
SCRIPT

# package version [extra control lines]
standin() {
  {
    echo "Section: misc"
    echo "Priority: optional"
    echo "Standards-Version: 4.6.2"
    echo "Package: $1"
    echo "Version: $2"
    echo "Maintainer: Kiln tests <kiln@example.invalid>"
    echo "Description: stand-in for NVIDIA's $1 (Kiln's Molecule test)"
    [ -z "${3:-}" ] || printf '%s\n' "$3"
  } > "$1.ctl"
  equivs-build "$1.ctl" >/dev/null
}

# NVIDIA's ubuntu trees: the headless metapackages, their dependencies at the same
# version, nvidia-smi in nvidia-utils and persistenced in nvidia-compute-utils.
ubuntu_driver() {
  local b=580 v="$1-0ubuntu1"
  for package in "libnvidia-compute-$b" "nvidia-dkms-$b" "nvidia-dkms-$b-open"; do
    standin "$package" "$v"
  done
  standin "nvidia-utils-$b" "$v" \
    "$(printf '%s\n' 'Files: nvidia-smi /usr/bin/' "Depends: libnvidia-compute-$b (= $v)")"
  standin "nvidia-compute-utils-$b" "$v" "$(printf '%s\n' \
    'Files: nvidia-persistenced.service /lib/systemd/system/' 'Postinst: persistenced.postinst')"
  for kind in "" -open; do
    standin "nvidia-headless-$b$kind" "$v" "Depends: nvidia-dkms-$b$kind (= $v), \
nvidia-compute-utils-$b (= $v), libnvidia-compute-$b (= $v)"
  done
}
. /etc/os-release
for version in 580.95.05 580.105.08; do
  v="$version-1"
  if [ "$ID" = ubuntu ]; then
    ubuntu_driver "$version"
  else
    for package in nvidia-kernel-open-dkms nvidia-kernel-dkms libcuda1 libnvidia-ml1; do
      standin "$package" "$v"
    done
    standin nvidia-smi "$v" 'Files: nvidia-smi /usr/bin/'
    standin nvidia-driver-cuda "$v" \
      "Depends: nvidia-smi (= $v), libcuda1 (= $v), libnvidia-ml1 (= $v)"
    standin nvidia-persistenced "$v" \
      "$(printf 'Files: nvidia-persistenced.service /lib/systemd/system/\nPostinst: persistenced.postinst')"
  fi
  standin nvidia-imex "$v" "$(printf '%s\n' 'Files: nvidia-imex /usr/bin/' \
    ' nvidia-imex-ctl /usr/bin/' ' nvidia-imex.service /lib/systemd/system/' \
    ' config.cfg /etc/nvidia-imex/')"
done
for version in 580.95.05 580.105.07; do
  standin nvidia-fabricmanager-580 "$version-1" \
    'Files: nvidia-fabricmanager.service /lib/systemd/system/'
  standin libnvidia-nscq-580 "$version-1"
done
mv ./*.deb "$repo/"

gpg --batch --quiet --passphrase '' --quick-gen-key "Kiln stand-in CUDA repository" rsa3072 sign never
cd "$repo"
apt-ftparchive packages . > Packages
# Written aside first: apt-ftparchive would list a Release it is writing.
apt-ftparchive -o APT::FTPArchive::Release::Origin=NVIDIA \
  -o "APT::FTPArchive::Release::Label=NVIDIA CUDA" release . > "$work/Release"
mv "$work/Release" Release
gpg --batch --yes --clearsign -o InRelease Release
gpg --batch --armor --export > standin.pub
rm -rf "$work"
