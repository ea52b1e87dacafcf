#!/usr/bin/env bash
# Coverage-guided fuzzing of msv0 with atheris (tests/fuzz/README.md).
#
#   scripts/fuzz.sh [SECONDS_PER_TARGET] [TARGET...]     (default: 60 s each, targets model convert)
#
# Runs in the active Python environment, which needs msv0 with its test extras and atheris
# (`pip install atheris`; PyPI has it for x86_64 Linux). The seed corpora are the models the
# test suite builds, saved on the first run under $MSV0_FUZZ_DIR (default build/fuzz). A
# target's fuzzer is restarted after each finding until its time is up, so one run collects
# every finding it meets; findings land in $MSV0_FUZZ_DIR/findings and the script exits 1 if
# there is any. Limits per input: 10 s, 4 GiB of RSS.
set -euo pipefail

cd "$(dirname "$0")/.."
SECONDS_PER_TARGET="${1:-60}"
shift || true
TARGETS=("$@")
[ ${#TARGETS[@]} -gt 0 ] || TARGETS=(model convert)
DIR="$(realpath -m "${MSV0_FUZZ_DIR:-build/fuzz}")"
mkdir -p "$DIR/findings"

if [ ! -d "$DIR/seeds/ms" ]; then
  echo "fuzz: saving the test suite's models as seeds in $DIR/seeds"
  # The kernel, model and converter tests: every op's models. (The ONNX node conformance cases
  # draw random data unseeded and would make every corpus different.)
  MSV0_SEED_DIR="$DIR/seeds" python -m pytest -q -m "not slow" -p no:cacheprovider -x \
    tests/ops tests/test_models_e2e.py tests/convert/test_onnx_convert.py tests/convert/test_e2e_models.py \
    >"$DIR/seeds.log" 2>&1 || { tail -30 "$DIR/seeds.log" >&2; echo "fuzz: collecting seeds failed" >&2; exit 1; }
fi

before=$(find "$DIR/findings" -type f | wc -l)
for target in "${TARGETS[@]}"; do
  case "$target" in
    model) seeds="$DIR/seeds/ms" ;;
    convert) seeds="$DIR/seeds/onnx" ;;
    *) echo "fuzz: unknown target '$target' (model, convert)" >&2; exit 2 ;;
  esac
  mkdir -p "$DIR/corpus_$target"
  end=$(($(date +%s) + SECONDS_PER_TARGET))
  runs=0
  while [ "$(date +%s)" -lt "$end" ]; do
    left=$((end - $(date +%s)))
    log="$DIR/$target-$runs.log"
    python "tests/fuzz/fuzz_$target.py" -timeout=10 -rss_limit_mb=4096 -max_len=1048576 \
      -max_total_time="$left" -print_final_stats=1 -artifact_prefix="$DIR/findings/$target-" \
      "$DIR/corpus_$target" "$seeds" >"$log" 2>&1 || true
    grep -h "stat::number_of_executed_units" "$log" | sed "s/^/fuzz $target: /" || true
    grep -h -A2 "Uncaught Python exception\|ERROR: libFuzzer" "$log" | head -3 | sed "s/^/fuzz $target: /" || true
    runs=$((runs + 1))
  done
done
after=$(find "$DIR/findings" -type f | wc -l)
if [ "$after" -gt "$before" ]; then
  echo "fuzz: $((after - before)) new finding(s) in $DIR/findings"
  exit 1
fi
echo "fuzz: no findings"
