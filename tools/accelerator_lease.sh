#!/usr/bin/env bash
# Both accelerator cases of tools/benchmark.py on a lent GPU machine (JAX and PyTorch, no
# TensorFlow, no network), one part per call so that each stays under a 10-minute command:
#
#   tools/accelerator_lease.sh throughput OUT_DIR   # --cases=accelerator, then the quality
#                                                   # case's data (.device/aq_data)
#   tools/accelerator_lease.sh quality OUT_DIR      # --cases=accelerator_quality on that data
#                                                   # (made afresh if the machine is new)
#
# Brought along in ignored folders of the checkout (docs/benchmarks.md, "On a rented GPU or
# TPU"): .whl/ (Keras, namex and optree built for the machine's Python) and .device/vocab.txt
# (the 30,522-word uncased WordPiece vocabulary, for the quality part). QUICK=1 runs the
# --quick versions (on any machine, CPU JAX included: how the script is tried before a lease);
# BUDGET=<seconds> sets each quality trainer's budget (default: the case's).
set -uo pipefail
cd "$(dirname "$0")/.."
part=${1:?usage: tools/accelerator_lease.sh throughput|quality OUT_DIR}
out=${2:?usage: tools/accelerator_lease.sh throughput|quality OUT_DIR}
mkdir -p "$out"
if compgen -G ".whl/*.whl" > /dev/null; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
    --target /tmp/site .whl/*.whl || exit 1
  export PYTHONPATH=/tmp/site${PYTHONPATH:+:$PYTHONPATH}
fi
export PYTHONUNBUFFERED=1
quick=()
if [ "${QUICK:-0}" = 1 ]; then quick=(--quick); fi
data=.device/aq_data
vocab=()
if [ -f .device/vocab.txt ]; then vocab=(--vocab_file=.device/vocab.txt); fi
case "$part" in
  throughput)
    cases=accelerator extra=() ;;
  quality)
    cases=accelerator_quality
    extra=("${vocab[@]}" --accelerator_quality_data=$data)
    if [ -n "${BUDGET:-}" ]; then extra+=(--accelerator_quality_budget="$BUDGET"); fi ;;
  *)
    echo "tools/accelerator_lease.sh: unknown part '$part' (expected throughput or quality)" >&2
    exit 2 ;;
esac
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader 2>/dev/null \
  | tee "$out/$part-gpu.txt"
python3 tools/benchmark.py "${quick[@]}" --cases="$cases" "${extra[@]}" \
  --output="$out/$part.json" 2>&1 | tee "$out/$part.log"
status=$?
if [ "$part" = throughput ] && [ -f .device/vocab.txt ]; then
  # The quality case's corpus, made while the machine is held anyway (a minute or two).
  python3 -c "import sys; sys.path.insert(0, 'tools'); import bench_accelerator_quality as q
print(q.write_data('$data', '.device/vocab.txt', quick=${QUICK:-0} == 1))" \
    2>&1 | tail -3 | tee "$out/data.log"
fi
exit $status
