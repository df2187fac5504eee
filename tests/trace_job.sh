# Sourced by sh_trace.sh and sh_trace_mpi.sh: into the current folder, a
# small LMDB (db) and a solver (solver.prototxt) over a net with a
# convolution, pooling, an inner product and a loss, read by Data layers
# (data threads), tested every 4 iterations and snapshotted every 6, for 8
# iterations on the CPU.
write_trace_job() {
  "$bin" make_synthetic_db db --num=64 --shape=1,8,8 --labels=4 --log_level=1
  cat >net.prototxt <<'NET'
name: "traced"
layer { name: "data" type: "Data" top: "x" top: "label" include { phase: TRAIN }
  data_param { source: "db" batch_size: 8 backend: LMDB } }
layer { name: "data" type: "Data" top: "x" top: "label" include { phase: TEST }
  data_param { source: "db" batch_size: 8 backend: LMDB } }
layer { name: "conv1" type: "Convolution" bottom: "x" top: "c1"
  convolution_param { num_output: 4 kernel_size: 3 weight_filler { type: "xavier" } } }
layer { name: "relu1" type: "ReLU" bottom: "c1" top: "c1" }
layer { name: "pool1" type: "Pooling" bottom: "c1" top: "p1"
  pooling_param { pool: MAX kernel_size: 2 stride: 2 } }
layer { name: "ip" type: "InnerProduct" bottom: "p1" top: "p"
  inner_product_param { num_output: 4 weight_filler { type: "xavier" } } }
layer { name: "loss" type: "SoftmaxWithLoss" bottom: "p" bottom: "label" top: "loss" }
layer { name: "accuracy" type: "Accuracy" bottom: "p" bottom: "label" top: "accuracy"
  include { phase: TEST } }
NET
  printf 'net: "net.prototxt"\ntest_iter: 2\ntest_interval: 4\nbase_lr: 0.01\nlr_policy: "fixed"\nmax_iter: 8\ndisplay: 2\nsnapshot: 6\nsnapshot_prefix: "snap"\nsolver_mode: CPU\n' >solver.prototxt
}
