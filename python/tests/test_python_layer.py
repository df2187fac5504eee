"""Python layers (type: "Python", python_param { module layer param_str
share_in_parallel }) as Caffe runs them: from Python, from the `cortado`
command's embedded interpreter, and under data parallelism (worker
threads, and MPI ranks that each import the module)."""
import os
import shutil
import subprocess
import sys

import numpy as np
import pytest

import pylayers
from conftest import BIN, HERE, write

LAYERS_DIR = os.path.join(HERE, 'layers')

EUCLID = '''name: "euclid"
layer { name: "a" type: "Input" top: "a" input_param { shape { dim: 4 dim: 3 } } }
layer { name: "b" type: "Input" top: "b" input_param { shape { dim: 4 dim: 3 } } }
layer { name: "scaled" type: "Python" bottom: "a" top: "scaled"
  python_param { module: "pylayers" layer: "ScaleLayer" param_str: "3" } }
layer { name: "loss" type: "Python" bottom: "scaled" bottom: "b" top: "loss"
  python_param { module: "pylayers" layer: "EuclideanLossLayer" } loss_weight: 1 }
force_backward: true
'''

REGRESSION = '''name: "regression"
layer { name: "data" type: "Python" top: "x" top: "y"
  python_param { module: "pylayers" layer: "RandomBatchLayer" param_str: "%s" } }
layer { name: "w" type: "Python" bottom: "x" top: "wx"
  python_param { module: "pylayers" layer: "LearnedScaleLayer" %s } }
layer { name: "loss" type: "EuclideanLoss" bottom: "wx" bottom: "y" top: "loss" }
'''


def regression_solver(tmp_path, sizes='8', share=False, max_iter=60, name='reg'):
    share_text = 'share_in_parallel: true' if share else ''
    net = write(tmp_path / (name + '_net.prototxt'), REGRESSION % (sizes, share_text))
    return write(tmp_path / (name + '_solver.prototxt'), '''net: "%s"
base_lr: 0.1
lr_policy: "fixed"
momentum: 0.5
max_iter: %d
display: 0
random_seed: 1
snapshot: 0
snapshot_after_train: true
snapshot_prefix: "%s"
solver_mode: CPU
''' % (net, max_iter, tmp_path / name))


def test_forward_backward_and_attributes(caffe, tmp_path):
    net = caffe.Net(write(tmp_path / 'e.prototxt', EUCLID), caffe.TRAIN)
    rng = np.random.RandomState(0)
    a = rng.randn(4, 3).astype(np.float32)
    b = rng.randn(4, 3).astype(np.float32)
    out = net.forward(a=a, b=b)
    assert np.isclose(out['loss'], np.sum((3 * a - b) ** 2) / 4 / 2, rtol=1e-5)
    diffs = net.backward()
    assert np.allclose(diffs['a'], 3 * (3 * a - b) / 4, atol=1e-6)
    assert np.allclose(diffs['b'], -(3 * a - b) / 4, atol=1e-6)
    layer = net.layer_dict['scaled']
    assert isinstance(layer, pylayers.ScaleLayer) and isinstance(layer, caffe.Layer)
    assert layer.type == 'Python' and layer.param_str == '3' and layer.k == 3.0
    assert layer.phase == caffe.TRAIN and layer.name == 'scaled'
    assert net.layers[2] is layer
    assert caffe.Net(write(tmp_path / 't.prototxt', EUCLID), caffe.TEST).layer_dict['scaled'].phase == caffe.TEST


def test_learnable_blobs_and_training(caffe, tmp_path):
    """A Python layer's add_blob parameter is in net.params and is trained
    by the solver (y = 2.5 x is learned), the Python data layer feeding it."""
    solver = caffe.SGDSolver(regression_solver(tmp_path))
    assert list(solver.net.params) == ['w'] and solver.net.params['w'][0].data[0] == 1.0
    solver.step(60)
    assert abs(solver.net.params['w'][0].data[0] - 2.5) < 1e-3
    assert float(solver.net.blobs['loss'].data) < 1e-5


def test_top_shapes_may_change_between_forwards(caffe, tmp_path):
    """A Python data layer giving batches of 2, then 5: the layers above it
    are reshaped in the same forward, as Caffe reshapes in every forward."""
    net = caffe.Net(write(tmp_path / 'v.prototxt', REGRESSION % ('2,5', '')), caffe.TRAIN)
    sizes = []
    for _ in range(4):
        net.forward()
        sizes.append((net.blobs['x'].data.shape[0], net.blobs['wx'].data.shape[0]))
        assert np.allclose(net.blobs['wx'].data, net.blobs['x'].data)
    assert sizes == [(2, 2), (5, 5), (2, 2), (5, 5)]


def test_exceptions_propagate(caffe, tmp_path):
    text = '''layer { name: "a" type: "Input" top: "a" input_param { shape { dim: 2 dim: 2 } } }
layer { name: "bad" type: "Python" bottom: "a" top: "out"
  python_param { module: "pylayers" layer: "FailingLayer" param_str: "xyz" } }
force_backward: true
'''
    net = caffe.Net(write(tmp_path / 'f.prototxt', text), caffe.TRAIN)
    with pytest.raises(ValueError, match='forward failed on purpose: xyz') as e:
        net.forward()
    notes = getattr(e.value, '__notes__', [])
    assert any("layer 'bad' (Python)" in n for n in notes)
    with pytest.raises(ArithmeticError, match='backward failed on purpose'):
        net.backward()
    missing = '''layer { name: "a" type: "Input" top: "a" input_param { shape { dim: 1 } } }
layer { name: "m" type: "Python" bottom: "a" top: "b" python_param { module: "no_such_module_xyz" layer: "X" } }'''
    with pytest.raises(ModuleNotFoundError):
        caffe.Net(write(tmp_path / 'm.prototxt', missing), caffe.TRAIN)
    wrong = missing.replace('no_such_module_xyz', 'pylayers').replace('"X"', '"NotALayer"')
    with pytest.raises(TypeError, match='must derive from caffe.Layer'):
        caffe.Net(write(tmp_path / 'w.prototxt', wrong), caffe.TRAIN)


def test_add_blob_only_in_setup(caffe, tmp_path):
    net = caffe.Net(write(tmp_path / 'r.prototxt', REGRESSION % ('4', '')), caffe.TRAIN)
    with pytest.raises(caffe.CortadoError, match='in setup only'):
        net.layer_dict['w'].blobs.add_blob(3)


def _env():
    env = dict(os.environ)
    env['PYTHONPATH'] = os.pathsep.join([LAYERS_DIR, env.get('PYTHONPATH', '')])
    return env


def test_cortado_command_runs_python_layers(caffe, tmp_path):
    """`cortado train` embeds an interpreter for the Python layers."""
    solver = regression_solver(tmp_path, name='cli')
    r = subprocess.run([BIN, 'train', '--solver=' + solver, '--log_level=1'], env=_env(),
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    net = caffe.Net(write(tmp_path / 'check.prototxt', REGRESSION % ('8', '')), caffe.TEST,
                    weights=str(tmp_path / 'cli_iter_60.caffemodel'))
    assert abs(net.params['w'][0].data[0] - 2.5) < 1e-3
    # a module that is not there: the command's error names it
    bad = write(tmp_path / 'bad_net.prototxt', (REGRESSION % ('8', '')).replace('"pylayers"', '"nowhere_xyz"', 1))
    bad_solver = write(tmp_path / 'bad_solver.prototxt', open(solver).read().replace(
        str(tmp_path / 'cli_net.prototxt'), bad))
    r = subprocess.run([BIN, 'train', '--solver=' + bad_solver, '--log_level=1'], env=_env(),
                       capture_output=True, text=True)
    assert r.returncode == 1 and 'nowhere_xyz' in r.stderr


def test_data_parallel_threads(caffe, tmp_path):
    """Two CPU worker threads, each with its own Python layer objects (the
    GIL taken in turn), train as one: the result is the single worker's
    up to the averaged data."""
    before = pylayers.created_count('w')
    caffe.train(regression_solver(tmp_path, name='dp'), cpu_workers=2)
    assert pylayers.created_count('w') - before == 2
    net = caffe.Net(write(tmp_path / 'dpcheck.prototxt', REGRESSION % ('8', '')), caffe.TEST,
                    weights=str(tmp_path / 'dp_iter_60.caffemodel'))
    assert abs(net.params['w'][0].data[0] - 2.5) < 1e-3


def test_data_parallel_threads_share_in_parallel(caffe, tmp_path):
    before = pylayers.created_count('w')
    caffe.train(regression_solver(tmp_path, share=True, name='share', max_iter=4), cpu_workers=2)
    assert pylayers.created_count('w') - before == 1  # one object, set up once


@pytest.mark.skipif(not shutil.which('mpirun'), reason='no mpirun')
def test_mpi_ranks_import_the_module(caffe, tmp_path):
    """`mpirun -np 2 python script.py`: each rank imports the layer's module
    and trains its shard; gradients through MPI."""
    if not caffe.has_mpi():
        pytest.skip('this build has no MPI')
    solver = regression_solver(tmp_path, name='mpi')
    # each rank reports in a file (output printed after MPI_Finalize may not
    # reach mpirun)
    script = write(tmp_path / 'mpi_train.py', '''import os, sys
import cortado as caffe
import pylayers
caffe.init_log(2)
caffe.train(sys.argv[1])
rank = os.environ.get('OMPI_COMM_WORLD_RANK')
with open(os.path.join(sys.argv[2], 'rank' + rank), 'w') as f:
    f.write('rank %s made %d pid %d' % (rank, pylayers.created_count('w'), os.getpid()))
''')
    env = _env()
    env.update(OMPI_ALLOW_RUN_AS_ROOT='1', OMPI_ALLOW_RUN_AS_ROOT_CONFIRM='1',
               OMPI_MCA_rmaps_base_oversubscribe='1')
    r = subprocess.run(['mpirun', '-np', '2', sys.executable, script, solver, str(tmp_path)], env=env,
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    lines = sorted(open(str(tmp_path / ('rank%d' % k))).read() for k in (0, 1))
    assert [line.split()[:4] for line in lines] == [['rank', '0', 'made', '1'], ['rank', '1', 'made', '1']]
    assert lines[0].split()[-1] != lines[1].split()[-1]  # two processes
    net = caffe.Net(write(tmp_path / 'mpicheck.prototxt', REGRESSION % ('8', '')), caffe.TEST,
                    weights=str(tmp_path / 'mpi_iter_60.caffemodel'))
    assert abs(net.params['w'][0].data[0] - 2.5) < 1e-3
