"""Training with the engine of ``cortado train``: one worker, several GPUs
(worker threads or processes), several CPU worker threads, the ranks of an
MPI job, or shards on several machines meeting through a file store or
Redis.  pycaffe had only one process per GPU wired by hand (NCCL); here it
is one call, with the same gradient averaging, snapshots and logs as the
command, Python layers included.
"""
import multiprocessing
import time

from . import _cortado

__all__ = ['train']


def _resolve_gpus(gpus):
    if gpus is None:
        return None
    if isinstance(gpus, str):
        if gpus == 'all':
            return list(range(_cortado.gpu_count()))
        return [int(g) for g in gpus.split(',') if g.strip()]
    if isinstance(gpus, int):
        return [gpus]
    return [int(g) for g in gpus]


def _on_worker_hook(on_worker, callbacks):
    if not callbacks:
        return on_worker

    def hook(solver):
        for pair in callbacks:
            solver.add_callback(*pair)
        if on_worker is not None:
            on_worker(solver)
    return hook


def train(solver, *, gpus=None, workers='threads', cpu_workers=None, mpi=None, weights=None,
          snapshot=None, level=0, stages=None, global_batch=False, bucket_mb=25.0,
          comm_timeout=None, math='tf32', callbacks=None, on_worker=None, on_display=None,
          num_shards=1, shard_id=0, run_id=None, file_store_path=None, redis_host=None,
          redis_port=6379, redis_password=None, rendezvous_timeout=300.0, gloo_iface=None,
          gloo_host=None, stop_grace=20.0):
    """Trains the solver prototxt `solver` to its max_iter, as
    ``cortado train --solver=...`` does with the matching flags, and returns
    when training ends.

    Workers (the data is sharded among them, gradients averaged every
    iteration, rank 0 logs and writes snapshots):
      gpus=[0, 1] or 'all'   one worker per GPU, threads of this process
                             (workers='threads') or one process each
                             (workers='processes'); gpus=[0]: one GPU
      cpu_workers=N          N CPU worker threads of this process
      mpi=True               this process is one rank of `mpirun -np N
                             python script.py` (the default when mpirun
                             started it); with gpus, each node's GPUs
      num_shards, shard_id, run_id, file_store_path or redis_host
                             one shard of a run on several machines (its
                             GPUs, or one CPU worker through Gloo)
    With none of these, one worker: on the GPU of set_device after
    set_mode_gpu(), else on the CPU.

    weights: .caffemodel files to start from (','-separated); snapshot: a
    .solverstate to resume from.  level, stages, global_batch, bucket_mb,
    comm_timeout, math ('tf32' or 'fp32') as the command's flags.

    callbacks: [(on_start, on_gradients), ...] added to every worker's
    solver (pycaffe's add_callback: each called without arguments, on the
    worker's thread).  on_worker(solver): called on each worker once its
    solver is built, before training (solver.rank, solver.world,
    solver.net; add callbacks there).  on_display(info): called on rank 0
    at each display with a dict (iter, loss, lr, inputs_per_iter,
    test_scores).  With worker processes these must be picklable
    (module-level functions).

    Raises CortadoError naming the worker that failed, or the exception a
    Python layer or callback raised; KeyboardInterrupt after Ctrl-C has
    stopped every worker.
    """
    gpu_list = _resolve_gpus(gpus)
    if mpi is None:
        mpi = _cortado.mpi_launched() and num_shards == 1 and file_store_path is None and redis_host is None
    if gpu_list is None and not cpu_workers and _cortado.mode() >= 0:
        # pycaffe's mode decides: set_mode_gpu() trains on the GPU of
        # set_device (under MPI: each node's GPUs, one per local rank)
        gpu_list = list(range(_cortado.gpu_count())) if mpi else [_cortado.mode()]
    if math not in ('tf32', 'fp32'):
        raise ValueError("math: give 'tf32' or 'fp32'")
    if workers not in ('threads', 'processes'):
        raise ValueError("workers: give 'threads' or 'processes'")
    kw = dict(gpus=gpu_list, cpu_workers=int(cpu_workers or 0), mpi=bool(mpi), weights=weights,
              snapshot=snapshot, level=int(level), stages=list(stages) if stages else None,
              global_batch=bool(global_batch), bucket_mb=float(bucket_mb),
              comm_timeout=float(comm_timeout or 0.0), strict_fp32=math == 'fp32',
              num_shards=int(num_shards), shard_id=int(shard_id), run_id=run_id,
              file_store_path=file_store_path, redis_host=redis_host, redis_port=int(redis_port),
              redis_password=redis_password, rendezvous_timeout=float(rendezvous_timeout),
              gloo_iface=gloo_iface, gloo_host=gloo_host, on_display=on_display)
    many_gpus = gpu_list is not None and len(gpu_list) > 1
    if workers == 'processes' and many_gpus and not mpi and num_shards == 1 and not file_store_path \
            and not redis_host:
        return _train_processes(solver, kw, callbacks, on_worker, stop_grace)
    kw['on_worker'] = _on_worker_hook(on_worker, callbacks)
    _cortado._train(solver, **kw)


# ---------------------------------------------------------------- worker processes

def _process_main(rank, solver, kw, callbacks, on_worker, uid):
    kw = dict(kw)
    kw['on_worker'] = _on_worker_hook(on_worker, callbacks)
    kw['process_rank'] = rank
    kw['nccl_id'] = uid
    if rank != 0:
        kw['on_display'] = None
    _cortado._train(solver, **kw)


def _train_processes(solver, kw, callbacks, on_worker, stop_grace):
    """One process per GPU (Python's spawn: each imports the layers' and
    callbacks' modules itself), joined by NCCL.  When one fails the others
    are stopped (SIGTERM, then SIGKILL after stop_grace seconds)."""
    uid = _cortado._new_nccl_uid()
    ctx = multiprocessing.get_context('spawn')
    procs = [ctx.Process(target=_process_main, args=(rank, solver, kw, callbacks, on_worker, uid),
                         name='cortado-worker-{}'.format(rank)) for rank in range(len(kw['gpus']))]
    for p in procs:
        p.start()
    failed = None
    try:
        while True:
            alive = [p for p in procs if p.exitcode is None]
            bad = [p for p in procs if p.exitcode not in (None, 0)]
            if bad and failed is None:
                failed = bad[0]
                break
            if not alive:
                break
            time.sleep(0.05)
    except KeyboardInterrupt:
        failed = 'interrupted'
    if failed is not None:
        for p in procs:
            if p.exitcode is None:
                p.terminate()
        deadline = time.monotonic() + stop_grace
        for p in procs:
            p.join(max(0.0, deadline - time.monotonic()))
            if p.exitcode is None:
                p.kill()
                p.join()
    for p in procs:
        p.join()
    if failed == 'interrupted':
        raise KeyboardInterrupt
    if failed is not None:
        rank = procs.index(failed)
        raise _cortado.CortadoError('worker {} (GPU {}) exited with status {}; the other workers were '
                                    'stopped'.format(rank, kw['gpus'][rank], failed.exitcode))
