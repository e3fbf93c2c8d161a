#!/bin/sh
# STAND-INS, NOT NVIDIA'S PACKAGES: empty packages built with equivs under the names and
# versions NVIDIA's CUDA repository uses, in a flat repository signed as NVIDIA's is
# (Origin NVIDIA, Label "NVIDIA CUDA"), so the nvidia_driver role's apt logic (origin
# preferences, the version pin, holds, the fabric manager's exact version) meets real apt.
# The fabric manager is offered one patch behind the newest driver, as happens upstream.
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
    echo "Description: stand-in for NVIDIA's $1 (Kiln's Molecule test; empty)"
    [ -z "${3:-}" ] || printf '%s\n' "$3"
  } > "$1.ctl"
  equivs-build "$1.ctl" >/dev/null
}

for version in 580.95.05 580.105.08; do
  v="$version-1"
  for package in nvidia-kernel-open-dkms nvidia-kernel-dkms nvidia-smi libcuda1 libnvidia-ml1; do
    standin "$package" "$v"
  done
  standin nvidia-driver-cuda "$v" \
    "Depends: nvidia-smi (= $v), libcuda1 (= $v), libnvidia-ml1 (= $v)"
  standin nvidia-persistenced "$v" \
    "$(printf 'Files: nvidia-persistenced.service /lib/systemd/system/\nPostinst: persistenced.postinst')"
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
