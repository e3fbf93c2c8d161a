#!/usr/bin/env bash
# STAND-IN, NOT NVIDIA'S: builds a small tarball with HPC-X's top-level layout (the facts
# in docs/mpi.md, which tests/unit/test_standins.py checks it against: hpcx-init.sh,
# modulefiles/hpcx, ompi/, ucx/, ucc/, hcoll/, sharp/, nccl_rdma_sharp_plugin/,
# clusterkit/, sources/, utils/), pkg-config files carrying NVIDIA's build prefix and
# utils/hpcx_rebuild.sh, for the hpcx scenario, which cannot reach NVIDIA's servers.
# None of its programs is HPC-X: each says it is a stand-in.
#   build-standin-hpcx.sh OUTDIR VERSION FLAVOUR...   (FLAVOUR: gcc-inbox-ubuntu24.04-cuda12-x86_64)
set -euo pipefail
out="$1" version="$2"
shift 2
mkdir -p "$out/v$version"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

for flavour in "$@"; do
  name="hpcx-v$version-$flavour"
  top="$work/$name"
  mkdir -p "$top"/{modulefiles,utils,sources} "$top"/{ompi,ucx,hcoll,sharp}/{bin,lib/pkgconfig}
  mkdir -p "$top"/{ucc,nccl_rdma_sharp_plugin,clusterkit}/lib
  label="Kiln's stand-in for NVIDIA HPC-X $version ($flavour): the layout, not the software."
  for part in ucc nccl_rdma_sharp_plugin clusterkit; do echo "$label" >"$top/$part/lib/STAND-IN"; done

  for part in ompi ucx hcoll sharp; do
    cat >"$top/$part/lib/pkgconfig/$part.pc" <<PC
prefix=/build-result/$name/$part
exec_prefix=\${prefix}
libdir=\${exec_prefix}/lib
includedir=\${prefix}/include

Name: $part
Description: stand-in for HPC-X's $part
Version: $version
Libs: -L\${libdir} -l$part
Cflags: -I\${includedir}
PC
    printf '#!/bin/sh\necho "%s: Kiln stand-in for HPC-X %s"\n' "$part" "$version" >"$top/$part/bin/${part}_info"
    chmod 755 "$top/$part/bin/${part}_info"
  done

  # Like HPC-X's, the module file finds its directory from where it is loaded from.
  cat >"$top/modulefiles/hpcx-ompi" <<'TCL'
#%Module1.0
## Kiln stand-in for HPC-X's module file
module-whatis "Kiln stand-in for NVIDIA HPC-X"
set hpcx_dir [file dirname [file dirname $ModulesCurrentModulefile]]
setenv HPCX_DIR $hpcx_dir
setenv HPCX_MPI_DIR $hpcx_dir/ompi
setenv HPCX_UCX_DIR $hpcx_dir/ucx
setenv HPCX_HCOLL_DIR $hpcx_dir/hcoll
setenv HPCX_SHARP_DIR $hpcx_dir/sharp
setenv OPAL_PREFIX $hpcx_dir/ompi
prepend-path PATH $hpcx_dir/ompi/bin:$hpcx_dir/ucx/bin:$hpcx_dir/hcoll/bin:$hpcx_dir/sharp/bin
prepend-path PKG_CONFIG_PATH $hpcx_dir/ompi/lib/pkgconfig:$hpcx_dir/ucx/lib/pkgconfig
TCL
  ln -s hpcx-ompi "$top/modulefiles/hpcx"
  cat >"$top/hpcx-init-ompi.sh" <<'SH'
# Kiln stand-in for HPC-X's hpcx-init.sh
hpcx_load() {
  export HPCX_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
  export PATH="$HPCX_DIR/ompi/bin:$PATH"
}
SH
  ln -s hpcx-init-ompi.sh "$top/hpcx-init.sh"

  # hpcx_rebuild.sh builds Open MPI from sources/ against the PMIx given; the stand-in
  # checks that PMIx is there, records its arguments, and installs an ompi_info.
  cat >"$top/utils/hpcx_rebuild.sh" <<'SH'
#!/bin/bash
set -euo pipefail
hpcx_dir="$(cd "$(dirname "$0")/.." && pwd)"
config=""
while [ $# -gt 0 ]; do
  case "$1" in
    --ompi-extra-config) config="$2"; shift 2 ;;
    *) shift ;;
  esac
done
pmix=""
for word in $config; do
  case "$word" in --with-pmix=*) pmix="${word#--with-pmix=}" ;; esac
done
if [ -z "$pmix" ] || [ ! -f "$pmix/include/pmix.h" ]; then
  echo "configure: error: PMIx not found at '${pmix}'" >&2
  exit 1
fi
mkdir -p "$hpcx_dir/hpcx-rebuild/bin"
printf '%s\n' "$config" >"$hpcx_dir/hpcx-rebuild/ompi-extra-config"
printf '#!/bin/sh\necho "Open MPI (Kiln stand-in, rebuilt): PMIx %s"\n' "$pmix" >"$hpcx_dir/hpcx-rebuild/bin/ompi_info"
chmod 755 "$hpcx_dir/hpcx-rebuild/bin/ompi_info"
cat >"$hpcx_dir/modulefiles/hpcx-rebuild" <<'TCL'
#%Module1.0
## Kiln stand-in for the module file hpcx_rebuild.sh writes
set hpcx_dir [file dirname [file dirname $ModulesCurrentModulefile]]
setenv HPCX_DIR $hpcx_dir
setenv HPCX_MPI_DIR $hpcx_dir/hpcx-rebuild
setenv OPAL_PREFIX $hpcx_dir/hpcx-rebuild
prepend-path PATH $hpcx_dir/hpcx-rebuild/bin
TCL
SH
  chmod 755 "$top/utils/hpcx_rebuild.sh"
  echo "$label" >"$top/sources/STAND-IN"

  tar -C "$work" --sort=name --owner=0 --group=0 --numeric-owner --mtime=@0 \
    -cjf "$out/v$version/$name.tbz" "$name"
done
