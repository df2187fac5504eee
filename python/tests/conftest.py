"""Shared fixtures of the Python package's tests (run by ctest: python_tests).

Environment (set by ctest, with defaults for a run by hand from the
repository root after `make build`):
  PYTHONPATH         build/python (the package assembled in the build tree)
  CORTADO_FIXTURES   ../shared/fixtures/caffe (BVLC's LeNet files)
  CORTADO_BIN        build/cortado
  CORTADO_TMP        scratch folder
  FASHION_MNIST_DIR  Debian's dataset-fashion-mnist (/usr/share/datasets/fashion-mnist)
"""
import gzip
import os
import struct
import subprocess
import sys

import numpy as np
import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
FIXTURES = os.environ.get('CORTADO_FIXTURES', os.path.join(ROOT, '..', 'shared', 'fixtures', 'caffe'))
BIN = os.environ.get('CORTADO_BIN', os.path.join(ROOT, 'build', 'cortado'))
FASHION = os.environ.get('FASHION_MNIST_DIR', '/usr/share/datasets/fashion-mnist')

sys.path.insert(0, os.path.join(HERE, 'layers'))  # the Python layers' modules, as PYTHONPATH in Caffe


def pytest_configure(config):
    config.addinivalue_line('markers', 'gpu: needs a CUDA GPU (ctest -L gpu runs them: python_tests_gpu)')


@pytest.fixture(scope='session')
def caffe():
    """The package, imported as the pycaffe scripts import it."""
    import cortado
    cortado.init_log(2)  # errors only: the tests read results, not logs
    return cortado


@pytest.fixture(autouse=True)
def _cpu_mode(caffe):
    caffe.set_mode_cpu()
    yield


@pytest.fixture(scope='session')
def fixtures():
    if not os.path.isdir(FIXTURES):
        pytest.fail('the Caffe fixtures are not at {} (set CORTADO_FIXTURES)'.format(FIXTURES))
    return FIXTURES


@pytest.fixture(scope='session')
def lenet_deploy(fixtures):
    return os.path.join(fixtures, 'lenet.prototxt')


@pytest.fixture(scope='session')
def lenet_weights(fixtures):
    return os.path.join(fixtures, 'lenet_iter_10000.caffemodel')


def write(path, text):
    with open(path, 'w') as f:
        f.write(text)
    return str(path)


def drawn_one(batch=64):
    """A batch of MNIST-style inputs whose first image is a vertical stroke
    (a one), scaled as Caffe's MNIST example scales (x / 256)."""
    x = np.zeros((batch, 1, 28, 28), dtype=np.float32)
    x[0, 0, 4:24, 12:16] = 255 / 256.0
    return x


def _read_idx(path, count):
    with gzip.open(path, 'rb') as f:
        magic = struct.unpack('>I', f.read(4))[0]
        ndim = magic & 0xFF
        dims = struct.unpack('>' + 'I' * ndim, f.read(4 * ndim))
        n = min(count, dims[0])
        item = int(np.prod(dims[1:])) if ndim > 1 else 1
        data = np.frombuffer(f.read(n * item), dtype=np.uint8)
    return data.reshape((n,) + tuple(dims[1:]))


def _write_idx(path, array):
    header = struct.pack('>I', 0x0800 | array.ndim) + struct.pack('>' + 'I' * array.ndim, *array.shape)
    with open(path, 'wb') as f:
        f.write(header + array.astype(np.uint8).tobytes())


def fashion_arrays(split, count):
    """The first `count` images (N x 28 x 28 uint8) and labels of a
    Fashion-MNIST split ('train' or 't10k')."""
    if not os.path.isfile(os.path.join(FASHION, 'train-images-idx3-ubyte.gz')):
        pytest.fail('Fashion-MNIST is not at {} (scripts/install-deps.sh installs '
                    'dataset-fashion-mnist)'.format(FASHION))
    images = _read_idx(os.path.join(FASHION, split + '-images-idx3-ubyte.gz'), count)
    labels = _read_idx(os.path.join(FASHION, split + '-labels-idx1-ubyte.gz'), count)
    return images, labels


@pytest.fixture(scope='session')
def fashion_lmdb(tmp_path_factory):
    """Small Fashion-MNIST LMDBs (1024 train, 256 test images), made as a
    user makes them: idx files, then `cortado convert_mnist_data`."""
    root = tmp_path_factory.mktemp('fashion')
    out = {}
    for split, name, count in (('train', 'train', 1024), ('t10k', 'test', 256)):
        images, labels = fashion_arrays(split, count)
        _write_idx(str(root / (name + '-images')), images)
        _write_idx(str(root / (name + '-labels')), labels)
        db = str(root / (name + '_lmdb'))
        subprocess.run([BIN, 'convert_mnist_data', str(root / (name + '-images')),
                        str(root / (name + '-labels')), db, '--backend=lmdb', '--log_level=2'],
                       check=True)
        out[name] = db
    return out


LENET_BODY = '''
layer { name: "conv1" type: "Convolution" bottom: "data" top: "conv1"
  param { lr_mult: 1 } param { lr_mult: 2 }
  convolution_param { num_output: 20 kernel_size: 5 stride: 1
    weight_filler { type: "xavier" } bias_filler { type: "constant" } } }
layer { name: "pool1" type: "Pooling" bottom: "conv1" top: "pool1"
  pooling_param { pool: MAX kernel_size: 2 stride: 2 } }
layer { name: "conv2" type: "Convolution" bottom: "pool1" top: "conv2"
  param { lr_mult: 1 } param { lr_mult: 2 }
  convolution_param { num_output: 50 kernel_size: 5 stride: 1
    weight_filler { type: "xavier" } bias_filler { type: "constant" } } }
layer { name: "pool2" type: "Pooling" bottom: "conv2" top: "pool2"
  pooling_param { pool: MAX kernel_size: 2 stride: 2 } }
layer { name: "ip1" type: "InnerProduct" bottom: "pool2" top: "ip1"
  param { lr_mult: 1 } param { lr_mult: 2 }
  inner_product_param { num_output: 500
    weight_filler { type: "xavier" } bias_filler { type: "constant" } } }
layer { name: "relu1" type: "ReLU" bottom: "ip1" top: "ip1" }
layer { name: "ip2" type: "InnerProduct" bottom: "ip1" top: "ip2"
  param { lr_mult: 1 } param { lr_mult: 2 }
  inner_product_param { num_output: 10
    weight_filler { type: "xavier" } bias_filler { type: "constant" } } }
'''


def lenet_train_test(train_db, test_db, batch=64, test_batch=64):
    """BVLC's LeNet train/test net over the given LMDBs."""
    return '''name: "LeNet"
layer { name: "mnist" type: "Data" top: "data" top: "label" include { phase: TRAIN }
  transform_param { scale: 0.00390625 }
  data_param { source: "%s" batch_size: %d backend: LMDB } }
layer { name: "mnist" type: "Data" top: "data" top: "label" include { phase: TEST }
  transform_param { scale: 0.00390625 }
  data_param { source: "%s" batch_size: %d backend: LMDB } }
%s
layer { name: "accuracy" type: "Accuracy" bottom: "ip2" bottom: "label" top: "accuracy"
  include { phase: TEST } }
layer { name: "loss" type: "SoftmaxWithLoss" bottom: "ip2" bottom: "label" top: "loss" }
''' % (train_db, batch, test_db, test_batch, LENET_BODY)


def solver_text(net, **fields):
    """A solver prototxt for net with Caffe's LeNet settings, overridden by fields."""
    values = dict(base_lr=0.01, momentum=0.9, weight_decay=0.0005, lr_policy='"inv"', gamma=0.0001,
                  power=0.75, display=0, max_iter=20, test_iter=2, test_interval=1000, random_seed=7,
                  snapshot=0, solver_mode='CPU')
    values.update(fields)
    lines = ['net: "%s"' % net]
    for k, v in values.items():
        if v is None:
            continue
        lines.append('%s: %s' % (k, v))
    return '\n'.join(lines) + '\n'


@pytest.fixture
def lenet_solver(tmp_path, fashion_lmdb):
    """A LeNet solver prototxt (SGD, seed 7, 20 iterations) on the small
    Fashion-MNIST LMDBs; returns a function making one with other fields."""
    net = write(tmp_path / 'lenet_train_test.prototxt',
                lenet_train_test(fashion_lmdb['train'], fashion_lmdb['test']))

    def make(name='solver.prototxt', **fields):
        fields.setdefault('snapshot_prefix', '"%s"' % (tmp_path / 'lenet'))
        return write(tmp_path / name, solver_text(net, **fields))
    return make
