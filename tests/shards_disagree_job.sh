# Sourced by sh_shards_disagree_gloo.sh and sh_mpi_disagree.sh: into the
# current folder, two nets that differ in one layer (a.prototxt, b.prototxt)
# and solvers over them that differ or not:
#   solver_a.prototxt   net a, base_lr 0.01
#   solver_b.prototxt   net b, base_lr 0.01 (the other net)
#   solver_c.prototxt   net a, base_lr 0.02 (the other solver)
#   solver_d.prototxt   net a2, a copy of net a whose data source path differs
#                       (each machine may keep its own copy of the data)
write_disagree_job() {
  "$bin" make_synthetic_db db1 --num=16 --shape=1,4,4 --labels=3 --log_level=1
  cp -r db1 db2
  net() { # $1 = ip's num_output, $2 = data source
    cat <<NET
name: "d"
layer { name: "data" type: "Data" top: "x" top: "label"
  data_param { source: "$2" batch_size: 4 backend: LMDB } }
layer { name: "ip" type: "InnerProduct" bottom: "x" top: "p"
  inner_product_param { num_output: $1 weight_filler { type: "gaussian" std: 0.1 } } }
layer { name: "loss" type: "SoftmaxWithLoss" bottom: "p" bottom: "label" top: "loss" }
NET
  }
  net 3 db1 >a.prototxt
  net 5 db1 >b.prototxt
  net 3 db2 >a2.prototxt
  solver() { printf 'net: "%s"\nbase_lr: %s\nlr_policy: "fixed"\nmax_iter: 4\ndisplay: 2\nsolver_mode: CPU\nsnapshot_after_train: false\n' "$1" "$2"; }
  solver a.prototxt 0.01 >solver_a.prototxt
  solver b.prototxt 0.01 >solver_b.prototxt
  solver a.prototxt 0.02 >solver_c.prototxt
  solver a2.prototxt 0.01 >solver_d.prototxt
}
