#!/usr/bin/env bash
# `cortado train --pipeline`: what cannot be trained as asked stops before
# training, with a message that says why (every rank the same, or the
# command itself before any rank starts).  The equivalence with one process
# is tests/test_pipeline_mpi.c.
set -euo pipefail
bin=${CORTADO_BIN:?}
dir=${CORTADO_TMP:?}/sh_pipeline_mpi
rm -rf "$dir" && mkdir -p "$dir"
cd "$dir"
command -v mpirun >/dev/null || { echo "mpirun not found: skipped"; exit 77; }
. "$(dirname "$0")/expect_mpi.sh"
small_job_db
small_net "" >net.prototxt
small_net 'layer { name: "bn" type: "BatchNorm" bottom: "h" top: "h" }' >bn.prototxt
# the same net with its stages in the prototxt (pipeline_stage), and with a stage skipped
sed 's/name: "ip2"/name: "ip2" pipeline_stage: 1/' net.prototxt >placed.prototxt
sed 's/name: "ip2"/name: "ip2" pipeline_stage: 2/' net.prototxt >skipped.prototxt
small_solver net.prototxt >solver.prototxt
small_solver bn.prototxt >solver_bn.prototxt
small_solver net.prototxt "iter_size: 2" >solver_iter2.prototxt
small_solver skipped.prototxt >solver_skipped.prototxt
small_solver placed.prototxt >solver_field.prototxt
expect "an unknown layer" 2 solver.prototxt "--pipeline=ip9" \
  "--pipeline: no layer 'ip9' in the train net 'small' (its layers: data, ip1, relu, ip2, loss)"
expect "split points out of order" 3 solver.prototxt "--pipeline=ip2,ip1" \
  "--pipeline: split points must follow the net's order: 'ip1' (layer 1) is not after 'ip2' (layer 3)"
expect "ranks not a multiple of the stages" 3 solver.prototxt "--pipeline=relu" \
  "--pipeline: 1 split point makes 2 stages, but 3 ranks were started (run mpirun -np 2: one rank per stage, or a multiple of 2 for data-parallel replicas of the stages)"
expect "a last stage without layers" 2 solver.prototxt "--pipeline=loss" \
  "--pipeline: stage 1 would have no layers: 'loss' is the net's last layer"
expect "an empty layer name" 2 solver.prototxt "--pipeline=ip1," \
  "--pipeline=ip1,: layer name 2 is empty (give layer names separated by ',')"
# (its weights and statistics against one process: tests/test_pipeline_mpi.c)
expect "BatchNorm with micro-batches" 2 solver_bn.prototxt "--pipeline=relu --microbatches=2" ""
expect "BatchNorm with one micro-batch" 2 solver_bn.prototxt "--pipeline=relu" ""
expect "iter_size against --microbatches" 2 solver_iter2.prototxt "--pipeline=relu --microbatches=3" \
  "--microbatches=3 and the solver's iter_size 2 disagree: under --pipeline the iteration's passes are its micro-batches (give one of them)"
expect "iter_size as the micro-batches" 2 solver_iter2.prototxt "--pipeline=relu" ""
# (GPU stages, and what they refuse: tests/test_gpu_pipeline_mpi.c)
expect "no mpirun" 0 solver.prototxt "--pipeline=relu" \
  "--pipeline needs one process per stage: start them with mpirun -np P (P: the stage count, one more than the layer names), or as P shards (--num_shards=P --shard_id=0..P-1 and a store)"
expect "--microbatches alone" 0 solver.prototxt "--microbatches=2" \
  "--microbatches goes with pipeline stages (--pipeline, or pipeline_stage in the net under mpirun); without them, use the solver's iter_size"
expect "a pipeline_stage that skips a stage" 3 solver_skipped.prototxt "" \
  "layer 'ip2': pipeline_stage 2 after stage 0: stages start at 0 and go up one at a time through the net"
# stages from the prototxt (their weights against --pipeline's: tests/test_pipeline_mpi.c)
expect "stages from pipeline_stage" 2 solver_field.prototxt "--microbatches=2" ""
# D x P: 4 ranks are 2 replicas of the 2 stages (their weights: tests/test_pipeline_mpi.c)
expect "2 replicas of 2 stages" 4 solver.prototxt "--pipeline=relu --microbatches=2" ""
# cortado time --pipeline: every stage's times and memory, from stage 0
rc=0
out=$(timeout 300 mpirun --oversubscribe --bind-to none -x ASAN_OPTIONS -x LSAN_OPTIONS -np 2 \
  "$bin" time --model=net.prototxt --pipeline=relu --microbatches=2 --iterations=2 2>&1) || rc=$?
if [ $rc = 0 ] && grep -q "Pipeline stage 1: forward .* per iteration (bubble .*); 21 parameters" <<<"$out" &&
  grep -q "Average Forward-Backward: " <<<"$out"; then
  echo "ok   cortado time --pipeline reports every stage"
else
  echo "FAIL cortado time --pipeline: status $rc:"; tail -5 <<<"$out"; fail=1
fi
exit $fail
