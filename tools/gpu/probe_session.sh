#!/usr/bin/env bash
# One call that looks at what never ran on a GPU (lesson 7's engine, the instrumented-first
# preflight, the checkers' diagnoses, a mutation sample), before the final verify.sh.
#   phase A (together): the GPU tests of the new code, lesson 7's masters, the mutants
#   phase B (alone): tools/gpu/tensorcore.sh's tune, bench and Nsight Compute (its timings)
# Everything comes back as $OUT/probe.tgz plus the small files. From the repo root:
#     bash .whl/on-device.sh bash tools/gpu/probe_session.sh
# Knobs: PROBE_TESTS="tests/test_x.py ..." (the GPU tests of phase A), PROBE_MUT_ONLY=3,17,...
# (only these positions of the mutation draw: `--only`), PROBE_TUNE=full|matmul|none (phase B:
# the whole tensorcore.sh, the matmul sweep alone, or nothing), CHK_S, L7_S, MUT_S, TUNE_S.
set -uo pipefail
OUT=${OUT:-.}
mkdir -p $OUT/a $OUT/tc
export PYTHONUNBUFFERED=1 CUDACOURSE_DEVICE=gpu CUDACOURSE_QUIET=1 GIT_DIR=/nonexistent
T0=$(date +%s); st() { echo "+$(( $(date +%s) - T0 ))s $*" | tee -a $OUT/steps.log; }
TESTS=${PROBE_TESTS:-tests/test_check_preflight.py tests/test_instrument.py \
  tests/test_check_compile.py tests/test_check_raised.py tests/test_check_tensorcores.py \
  tests/test_check_attention.py tests/test_check_science.py tests/test_check_variants.py \
  tests/test_check_budget.py tests/test_tensorcore.py tests/test_matmul_mma.py \
  tests/test_attention_mma.py tests/test_cases_tensorcore.py}
st start
( timeout ${CHK_S:-200} python3 -m pytest -q -n 6 -p no:cacheprovider $TESTS \
    > $OUT/a/checks.log 2>&1; echo "rc=$?" >> $OUT/a/checks.log ) &
( VERIFY_STAGES=masters VERIFY_LESSONS=07_ptx_tensor_cores VERIFY_RESERVE=0 VERIFY_COMMIT=probe \
    VERIFY_ALLOW_DIRTY=1 VERIFY_DEADLINE=${L7_S:-200} VERIFY_RECORD=$OUT/a/l7.json OUT=$OUT/a/l7 \
    timeout $(( ${L7_S:-200} + 20 )) bash tools/gpu/verify.sh > $OUT/a/l7.log 2>&1 ) &
ONLY=(); [ -n "${PROBE_MUT_ONLY:-}" ] && ONLY=(--only "$PROBE_MUT_ONLY")
( timeout ${MUT_S:-220} python3 -m cudacourse.check.mutate --sample ${MUT_N:-24} --seed 45 \
    --jobs 6 --timeout 60 "${ONLY[@]}" --out $OUT/a/mut > $OUT/a/mut.log 2>&1
  echo "rc=$?" >> $OUT/a/mut.log ) &
wait; st phase-A
tail -5 $OUT/a/checks.log; tail -3 $OUT/a/mut.log; grep -h '==' $OUT/a/l7.log | tail -5
case ${PROBE_TUNE:-full} in
  full) TESTS_S=1 OUT=$OUT/tc TUNE_S=${TUNE_S:-170} BENCH_S=${BENCH_S:-80} NCU_S=${NCU_S:-50} \
          bash tools/gpu/tensorcore.sh > $OUT/tc/run.log 2>&1
        tail -30 $OUT/tc/tune.log; tail -12 $OUT/tc/bench.log ;;
  matmul) timeout ${TUNE_S:-120} python3 tools/gpu/tune_tensorcore.py $OUT/tc/tune.json matmul \
            $OUT/tc/tc_configs.json > $OUT/tc/tune.log 2>&1; tail -12 $OUT/tc/tune.log ;;
esac
st phase-B
cp $OUT/tc/benchmarks.json $OUT/tc/tune.json $OUT/tc/tc_configs.json $OUT/ 2>/dev/null
cp $OUT/a/mut/mutation-report.json $OUT/mut-gpu.json 2>/dev/null
tar czf $OUT/probe.tgz -C $OUT a tc && rm -rf $OUT/a $OUT/tc
st done
