# Sourced by the parameter-server tests with GPU workers (sh_gpu_ps_mpi.sh,
# sh_gpu_ps_gloo.sh), after expect_mpi.sh, in the test's folder:
#   gpu_ps_job           the db, net.prototxt and a GPU solver.prototxt of 40
#                        iterations (momentum, weight decay, snapshot at the
#                        end), and plain.log: that job alone on GPU 0
#   gpu_ps_folder DIR    DIR with the job's files (the db linked)
#   same_losses LOG WHAT fails unless LOG prints plain.log's 40 losses
#                        within 1e-4 (the update ran on a server's CPU)
#   resumes DIR          the servers' snapshot in DIR resumes on GPU 0
gpu_ps_job() {
  small_job_db
  small_net "" >net.prototxt
  small_solver net.prototxt 'momentum: 0.9
weight_decay: 0.0005
random_seed: 7
snapshot_prefix: "snap"' | sed 's/max_iter: 2/max_iter: 40/; s/snapshot_after_train: false/snapshot_after_train: true/; s/solver_mode: CPU/solver_mode: GPU/' \
    >solver.prototxt
  "$bin" train --solver=solver.prototxt --gpu=0 >plain.log 2>&1 || { echo "FAIL plain: $(tail -3 plain.log)"; exit 1; }
}

gpu_ps_folder() {
  mkdir -p "$1" && cp net.prototxt solver.prototxt "$1/" && ln -sfn ../db "$1/db"
}

# "iteration loss" per display line (Caffe's: Iteration N (rate), loss = X)
losses() { grep -oE "Iteration [0-9]+ \(.*\), loss = [-0-9.e+]+" "$1" | awk '{print $2, $NF}'; }

same_losses() {
  local log=$1 what=$2
  paste <(losses plain.log) <(losses "$log") | awk '
    { n++; if ($1 != $3) { print "iteration " $1 " against " $3; bad = 1; exit }
      d = $2 - $4; if (d < 0) d = -d; m = $2 < 0 ? -$2 : $2
      if (d > 1e-4 * (m > 1e-3 ? m : 1e-3)) { print "iteration " $1 ": loss " $4 " through the servers, " $2 " alone"; bad = 1 } }
    END { if (n < 40) { print "only " n " losses to compare"; bad = 1 } exit bad }' ||
    { echo "FAIL: $what does not print one GPU's losses"; exit 1; }
  echo "ok   $what: one GPU's losses, 40 iterations"
}

resumes() {
  [ -s "$1/snap_iter_40.caffemodel" ] || { echo "FAIL: no snapshot from the servers"; ls "$1"; exit 1; }
  sed 's/max_iter: 40/max_iter: 44/' solver.prototxt >resume.prototxt
  "$bin" train --solver=resume.prototxt --gpu=0 --snapshot="$1/snap_iter_40.solverstate" >resume.log 2>&1 ||
    { echo "FAIL resume: $(tail -3 resume.log)"; exit 1; }
  echo "ok   the servers' snapshot resumes on one GPU"
}
