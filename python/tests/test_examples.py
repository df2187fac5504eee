"""pycaffe scripts in the steps of Caffe's example notebooks (classification,
net surgery, learning LeNet with NetSpec, solver stepping with callbacks),
in tests/scripts/: each differs from a pycaffe script only in its import
line, and runs here as a user runs it."""
import os
import re
import subprocess
import sys

import numpy as np

from conftest import HERE, drawn_one, lenet_train_test, solver_text, write

SCRIPTS = os.path.join(HERE, 'scripts')


def run(script, *args):
    path = os.path.join(SCRIPTS, script)
    with open(path) as f:
        imports = [l for l in f if re.match(r'\s*(import|from)\s+(caffe|cortado)\b', l)]
    assert imports and all('cortado' in l for l in imports)  # `import caffe` -> `import cortado as caffe`
    r = subprocess.run([sys.executable, path] + [str(a) for a in args], capture_output=True, text=True,
                       timeout=600)
    assert r.returncode == 0, r.stdout + r.stderr
    return r.stdout


def value(out, prefix):
    line = [l for l in out.splitlines() if l.startswith(prefix)][0]
    return line[len(prefix):].strip()


def test_classification(caffe, lenet_deploy, lenet_weights, tmp_path):
    image = str(tmp_path / 'one.png')
    caffe.io.save_image(image, drawn_one(1)[0, 0] * 256 / 255.)
    out = run('classification.py', lenet_deploy, lenet_weights, image, tmp_path)
    assert value(out, 'predicted class is:') == '1'
    assert 'conv1\t(50, 20, 24, 24)' in out and 'ip1\t(500, 800) (500,)' in out
    for png in ('conv1_filters.png', 'conv1_output.png'):
        assert caffe.io.load_image(str(tmp_path / png)).shape[0] > 10


def test_net_surgery(caffe, lenet_deploy, lenet_weights, tmp_path):
    out = run('net_surgery.py', lenet_deploy, lenet_weights, tmp_path)
    edge = re.search(r'vertical edge response at the edge (\S+) away (\S+)', out)
    assert float(edge.group(1)) > 4.0 and abs(float(edge.group(2))) < 1e-6
    assert 'ip1 weights are (500, 800) dimensional and biases are (500,) dimensional' in out
    assert 'ip1-conv weights are (500, 50, 4, 4) dimensional' in out
    assert 'score map (10, 3, 3)' in out
    m = re.search(r'classifier on the crop (\d) map there (\d) max difference (\S+)', out)
    assert m.group(1) == '1' and m.group(2) == '1' and float(m.group(3)) < 1e-4
    saved = caffe.Net(str(tmp_path / 'lenet_full_conv.prototxt'), caffe.TEST,
                      weights=str(tmp_path / 'lenet_full_conv.caffemodel'))
    ref = caffe.Net(lenet_deploy, caffe.TEST, weights=lenet_weights)
    assert np.array_equal(saved.params['ip1-conv'][0].data.ravel(), ref.params['ip1'][0].data.ravel())


def test_learning_lenet(caffe, fashion_lmdb, tmp_path):
    out = run('learning_lenet.py', fashion_lmdb['train'], fashion_lmdb['test'], tmp_path)
    assert "('conv1', (64, 20, 24, 24))" in out and "('score', (20, 500))" not in out
    assert float(value(out, 'final test accuracy')) > 0.6  # Fashion-MNIST after 60 steps
    first, last = re.search(r'train loss first (\S+) last (\S+)', out).groups()
    assert float(last) < float(first) / 2
    assert os.path.isfile(str(tmp_path / 'conv1_filters.png'))


def test_solver_callbacks(caffe, fashion_lmdb, tmp_path):
    net = write(tmp_path / 'net.prototxt', lenet_train_test(fashion_lmdb['train'], fashion_lmdb['test']))
    solver = write(tmp_path / 'solver.prototxt',
                   solver_text(net, type='"Nesterov"', snapshot_prefix='"%s"' % (tmp_path / 'cb')))
    out = run('solver_callbacks.py', solver)
    assert 'solver type NesterovSolver iter 0' in out
    assert 'iterations 12 callbacks 12 12' in out
    first, last = re.search(r'loss first (\S+) last (\S+)', out).groups()
    assert float(last) < float(first)
    assert os.path.isfile(str(tmp_path / 'cb_iter_12.solverstate'))
