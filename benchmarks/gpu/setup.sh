# Sourced by check.sh and paper_runs.sh on the device machine: the repository root as the working directory,
# $OUT, $PYTHON, log(), and gpdsl installed (from the package index, or from the wheels prepare.sh put in
# .gpu/wheels on a machine without network); sets GPU=yes when JAX sees one. The log goes to $OUT/$LOG_NAME.
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
ROOT=$PWD
OUT=${OUT:-$ROOT/benchmarks/gpu/out}
mkdir -p "$OUT"
PYTHON=${PYTHON:-python3}
export PYTHONUNBUFFERED=1 XLA_PYTHON_CLIENT_PREALLOCATE=false
export GPDSL_DATA_MIRROR=${GPDSL_DATA_MIRROR:-$ROOT/.gpu/data}
log() { echo "[check $(date +%H:%M:%S)] $*" | tee -a "$OUT/${LOG_NAME:-check.log}" >&2; }

# The package directories setuptools maps (pyproject's package-dir) as links, for runs from the source tree.
[ -e gpdsl/grammar ] || ln -s ../grammar gpdsl/grammar
[ -e gpdsl/stan_templates ] || ln -s ../stan_templates gpdsl/stan_templates

log "install"
if "$PYTHON" -c "import lark, arviz, h5netcdf" 2>/dev/null; then
  log "gpdsl's dependencies are there already"
elif [ -d .gpu/wheels ]; then
  timeout "${INSTALL_S:-90}" "$PYTHON" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
    --target /tmp/gpdsl-site .gpu/wheels/*.whl 2>&1 | tail -3 | tee -a "$OUT/${LOG_NAME:-check.log}"
  export PYTHONPATH=/tmp/gpdsl-site
else
  timeout "${INSTALL_S:-90}" "$PYTHON" -m pip install -q -e ".[cuda,test]" 2>&1 | tail -3 | tee -a "$OUT/${LOG_NAME:-check.log}"
fi
export PYTHONPATH=$ROOT${PYTHONPATH:+:$PYTHONPATH}
{ "$PYTHON" -c "import gpdsl, jax, jaxlib, numpy; print('jax', jax.__version__, 'jaxlib', jaxlib.__version__, 'numpy',
numpy.__version__); print('devices', jax.devices(), jax.devices('cpu')[-1])"; nvidia-smi -L 2>/dev/null; nproc; } 2>&1 \
  | tee "$OUT/env.txt"
GPU=$("$PYTHON" -c "import gpdsl.numerics.devices as d; print('yes' if d.gpu_devices() else 'no')" 2>/dev/null)
log "JAX sees a GPU: ${GPU:-no}"

