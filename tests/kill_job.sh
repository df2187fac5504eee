# Sourced by the kill tests (sh_mpi_dp_kill.sh, sh_gloo_kill.sh): writes into
# folder $1 a small CPU net of dummy data (net.prototxt) and a solver that
# trains it practically forever (solver.prototxt), for a job to be killed.
write_kill_job() {
  local dir=$1
  cat >"$dir/net.prototxt" <<'NET'
name: "killme"
layer { name: "data" type: "DummyData" top: "x" top: "label"
  dummy_data_param { shape { dim: 32 dim: 64 } shape { dim: 32 }
    data_filler { type: "gaussian" std: 1 } data_filler { type: "constant" value: 1 } } }
layer { name: "ip1" type: "InnerProduct" bottom: "x" top: "h"
  inner_product_param { num_output: 256 weight_filler { type: "gaussian" std: 0.05 } } }
layer { name: "relu" type: "ReLU" bottom: "h" top: "h" }
layer { name: "ip2" type: "InnerProduct" bottom: "h" top: "y"
  inner_product_param { num_output: 4 weight_filler { type: "gaussian" std: 0.05 } } }
layer { name: "loss" type: "SoftmaxWithLoss" bottom: "y" bottom: "label" top: "loss" }
NET
  cat >"$dir/solver.prototxt" <<SOLVER
net: "$dir/net.prototxt"
base_lr: 0.01 lr_policy: "fixed" momentum: 0.9
max_iter: 100000000 display: 200 random_seed: 3
snapshot: 0 snapshot_after_train: false solver_mode: CPU
SOLVER
}
