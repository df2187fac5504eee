"""Training from Python with solver callbacks, as pycaffe's train.py and
the solver notebooks do: a Timer around forward/backward, on_start and
on_gradients hooks (here clipping the gradient's norm by hand), and the
loss followed by stepping one iteration at a time.  Usage:
    python solver_callbacks.py SOLVER
Only the import differs from a pycaffe script."""
import sys

import numpy as np

import cortado as caffe

caffe.set_mode_cpu()
solver = caffe.get_solver(sys.argv[1])
print('solver type', type(solver).__name__, 'iter', solver.iter)

timer = caffe.Timer()
times = []
norms = []


def on_start():
    timer.start()


def on_gradients():
    timer.stop()
    times.append(timer.ms)
    grads = [p.diff for blobs in solver.net.params.values() for p in blobs]
    norm = np.sqrt(sum(float((g ** 2).sum()) for g in grads))
    norms.append(norm)
    if norm > 1.0:  # clip to norm 1, in place: the update sees it
        for g in grads:
            g *= 1.0 / norm


solver.add_callback(on_start, on_gradients)
losses = []
for it in range(12):
    solver.step(1)
    losses.append(float(solver.net.blobs['loss'].data))
print('iterations', solver.iter, 'callbacks', len(times), len(norms))
print('mean forward-backward ms', float(np.mean(times)))
print('loss first', losses[0], 'last', losses[-1])
solver.snapshot()
print('snapshot at', solver.iter)
