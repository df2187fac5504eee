"""cortado.train: the engine of `cortado train` from Python, with callbacks,
on CPU worker threads and on shards meeting through a file store; Ctrl-C
(SIGINT) stops training and raises KeyboardInterrupt.  (MPI ranks:
test_python_layer.py; GPUs: test_gpu.py.)"""
import os
import signal
import subprocess
import sys
import time

import numpy as np
import pytest

from conftest import write


def load(caffe, tmp_path, caffemodel):
    net_file = os.path.join(str(tmp_path), 'lenet_train_test.prototxt')
    return caffe.Net(net_file, caffe.TEST, weights=caffemodel)


def test_train_one_worker_matches_solver(caffe, lenet_solver, tmp_path):
    path = lenet_solver('one.prototxt', max_iter=8, display=4)
    displays = []
    workers = []
    caffe.train(path, on_display=displays.append, on_worker=lambda s: workers.append((s.rank, s.world)))
    assert workers == [(0, 1)]
    assert [d['iter'] for d in displays] == [0, 4, 8]  # Caffe displays at iteration 0 too
    assert all(np.isfinite(d['loss']) for d in displays)
    assert displays[1]['inputs_per_iter'] == 64 and displays[1]['lr'] > 0
    trained = load(caffe, tmp_path, str(tmp_path / 'lenet_iter_8.caffemodel'))
    solver = caffe.get_solver(path)
    solver.step(8)
    for name in trained.params:
        assert np.array_equal(trained.params[name][0].data, solver.net.params[name][0].data)


def test_two_cpu_workers_with_callbacks(caffe, lenet_solver, tmp_path):
    """Two worker threads with batch 32 each train as one worker with batch
    64 (the two shards are the 64 records of each step), callbacks on both."""
    net_file = os.path.join(str(tmp_path), 'lenet_train_test.prototxt')
    half = write(tmp_path / 'half.prototxt', open(net_file).read().replace('batch_size: 64', 'batch_size: 32', 1))
    dp = write(tmp_path / 'dp_solver.prototxt', open(lenet_solver('dp.prototxt', max_iter=6)).read()
               .replace(net_file, half).replace(str(tmp_path / 'lenet'), str(tmp_path / 'dp')))
    calls = {0: [], 1: []}
    seen = []

    def on_worker(solver):
        seen.append((solver.rank, solver.world, solver.type, list(solver.net.params)[0]))
        rank = solver.rank
        solver.add_callback(lambda: calls[rank].append('start'),
                            lambda: calls[rank].append(float(np.abs(solver.net.params['ip2'][0].diff).sum())))
    caffe.train(dp, cpu_workers=2, on_worker=on_worker)
    assert sorted(seen) == [(0, 2, 'SGD', 'conv1'), (1, 2, 'SGD', 'conv1')]
    for rank in (0, 1):
        assert calls[rank][0::2] == ['start'] * 6 and all(g > 0 for g in calls[rank][1::2])
    # the gradients seen are the averaged ones: the same on both workers
    assert np.allclose(calls[0][1::2], calls[1][1::2], rtol=1e-6)
    single = caffe.get_solver(lenet_solver('single.prototxt', max_iter=6))
    single.step(6)
    dp_net = load(caffe, tmp_path, str(tmp_path / 'dp_iter_6.caffemodel'))
    for name in single.net.params:
        assert np.allclose(dp_net.params[name][0].data, single.net.params[name][0].data, rtol=1e-3, atol=1e-5)


def test_shards_through_a_file_store(caffe, lenet_solver, tmp_path):
    """Two processes, each one shard, meet through a folder and average
    their gradients through Gloo: both end with the same weights."""
    if not caffe.has_gloo():
        pytest.skip('this build has no Gloo')
    path = lenet_solver('shards.prototxt', max_iter=4)
    store = tmp_path / 'store'
    store.mkdir()
    script = write(tmp_path / 'shard.py', '''import sys
import cortado as caffe
caffe.init_log(2)
shard = int(sys.argv[2])
caffe.train(sys.argv[1], num_shards=2, shard_id=shard, run_id='py-shards', file_store_path=sys.argv[3],
            gloo_host='127.0.0.1', rendezvous_timeout=60, comm_timeout=60)
print('shard', shard, 'done')
''')
    procs = [subprocess.Popen([sys.executable, script, path, str(k), str(store)], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True) for k in (0, 1)]
    outs = [p.communicate(timeout=240) for p in procs]
    for p, (out, err) in zip(procs, outs):
        assert p.returncode == 0, err
    assert 'shard 0 done' in outs[0][0] and 'shard 1 done' in outs[1][0]
    assert os.path.isfile(str(tmp_path / 'lenet_iter_4.caffemodel'))  # shard 0 writes the snapshot


def test_ctrl_c_stops_training(caffe, lenet_solver, tmp_path):
    """SIGINT during solver.step and cortado.train: the run stops at the next
    iteration and KeyboardInterrupt reaches the script."""
    path = lenet_solver('long.prototxt', max_iter=1000000)
    script = write(tmp_path / 'long.py', '''import sys
import cortado as caffe
caffe.init_log(2)
solver = caffe.SGDSolver(sys.argv[1])
solver.add_callback(lambda: print('iter', solver.iter, flush=True) if solver.iter == 2 else None, None)
try:
    solver.step(1000000)
except KeyboardInterrupt:
    print('interrupted at', solver.iter, flush=True)
try:
    caffe.train(sys.argv[1], on_worker=lambda s: print('training', flush=True))
except KeyboardInterrupt:
    print('train interrupted', flush=True)
''')
    p = subprocess.Popen([sys.executable, script, path], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    lines = []
    for want in ('iter 2', 'training'):
        while True:
            line = p.stdout.readline()
            assert line, 'the script ended early: ' + p.stderr.read()
            lines.append(line.strip())
            if line.strip() == want:
                break
        time.sleep(0.3)
        p.send_signal(signal.SIGINT)
    out, err = p.communicate(timeout=120)
    lines += out.split('\n')
    assert p.returncode == 0, err
    stopped = [l for l in lines if l.startswith('interrupted at')]
    assert stopped and 2 <= int(stopped[0].split()[-1]) < 1000000
    assert 'train interrupted' in lines


def test_ctrl_c_during_forward_raises_keyboard_interrupt(caffe, lenet_deploy, lenet_weights, tmp_path):
    """SIGINT while net.forward() computes (oneDNN's GEMMs on this thread and
    OpenMP's): Python's own handler runs on Cortado's relay thread, the
    forward finishes and KeyboardInterrupt follows; the heap stays intact
    (before the relay, a handler frame written below the GEMM kernels' rsp
    corrupted it)."""
    script = write(tmp_path / 'fwd.py', '''import sys
import numpy as np
import cortado as caffe
caffe.init_log(2)
net = caffe.Net(sys.argv[1], caffe.TEST, weights=sys.argv[2])
net.blobs['data'].reshape(64, 1, 28, 28)
net.reshape()
net.blobs['data'].data[...] = np.random.RandomState(1).rand(64, 1, 28, 28)
first = net.forward()['prob'].copy()
print('ready', flush=True)
interrupted = 0
for i in range(100000):
    try:
        out = net.forward()['prob']
        assert np.array_equal(out, first)
    except KeyboardInterrupt:
        interrupted += 1
        if interrupted == 5:
            break
print('interrupted', interrupted, flush=True)
''')
    p = subprocess.Popen([sys.executable, script, lenet_deploy, lenet_weights], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True)
    assert p.stdout.readline().strip() == 'ready', p.stderr.read()
    for _ in range(5):
        time.sleep(0.2)
        p.send_signal(signal.SIGINT)
    out, err = p.communicate(timeout=120)
    assert p.returncode == 0, err
    assert 'interrupted 5' in out
