"""The module's functions as pycaffe has them: layer_type_list, the mode and
device, random seeds, Timer, logging, has_nccl, the solver rank and count,
and the version."""
import os
import subprocess
import sys
import time

import numpy as np
import pytest

from conftest import write

NET = '''layer { name: "data" type: "Input" top: "data" input_param { shape { dim: 2 dim: 8 } } }
layer { name: "ip" type: "InnerProduct" bottom: "data" top: "ip"
  inner_product_param { num_output: 16 weight_filler { type: "gaussian" std: 1 } } }
layer { name: "drop" type: "Dropout" bottom: "ip" top: "ip" dropout_param { dropout_ratio: 0.5 } }
'''


def test_import_and_layer_type_list(caffe):
    """The issue's first check, in a fresh interpreter as a user runs it."""
    r = subprocess.run([sys.executable, '-c', 'import cortado as caffe; print(caffe.layer_type_list())'],
                       capture_output=True, text=True, check=True)
    types = eval(r.stdout)  # the printed Python list
    for t in ('Convolution', 'InnerProduct', 'Data', 'SoftmaxWithLoss', 'LSTM', 'Python'):
        assert t in types
    assert types == caffe.layer_type_list()
    assert caffe.__version__ == '0.1.0' and caffe.API_VERSION == 1


def test_mode_and_device(caffe, tmp_path):
    caffe.set_mode_cpu()
    assert caffe.mode() == -1
    caffe.set_device(0)
    net = caffe.Net(write(tmp_path / 'n.prototxt', NET), caffe.TEST)
    assert net.device == -1 and net.blobs['ip'].device == -1
    if caffe.gpu_count() == 0:
        with pytest.raises(caffe.CortadoError):
            caffe.set_mode_gpu()
        assert caffe.mode() == -1
    with pytest.raises(ValueError):
        caffe.set_device(-2)


def test_random_seed_repeats_fillers_and_dropout(caffe, tmp_path):
    path = write(tmp_path / 'n.prototxt', NET)
    x = np.ones((2, 8), dtype=np.float32)

    def run():
        net = caffe.Net(path, caffe.TRAIN)
        return net.params['ip'][0].data.copy(), net.forward(data=x)['ip'].copy()
    caffe.set_random_seed(1701)
    w1, y1 = run()
    w2, y2 = run()  # the next net of the same seed sequence differs
    caffe.set_random_seed(1701)
    w3, y3 = run()
    assert np.array_equal(w1, w3) and np.array_equal(y1, y3)
    assert not np.array_equal(w1, w2)
    assert (y1 == 0).any() and (y1 != 0).any()  # dropout at work in TRAIN


def test_timer(caffe):
    t = caffe.Timer()
    t.start()
    time.sleep(0.05)
    running = t.ms
    t.stop()
    assert 40 <= running and 40 <= t.ms < 5000 and t.ms >= running
    stopped = t.ms
    time.sleep(0.02)
    assert t.ms == stopped


def test_log_and_init_log(caffe):
    script = 'import cortado as caffe; caffe.init_log(0); caffe.log("hello from python")'
    r = subprocess.run([sys.executable, '-c', script], capture_output=True, text=True, check=True)
    assert 'hello from python' in r.stderr and r.stderr.startswith('I')
    script = 'import cortado as caffe; caffe.init_log(1); caffe.log("hidden")'
    r = subprocess.run([sys.executable, '-c', script], capture_output=True, text=True, check=True)
    assert 'hidden' not in r.stderr


def test_capabilities_and_solver_rank(caffe):
    assert caffe.has_nccl() == caffe.has_cuda()
    assert isinstance(caffe.has_mpi(), bool) and isinstance(caffe.has_gloo(), bool)
    assert caffe.solver_count() == 1 and caffe.solver_rank() == 0
    caffe.set_solver_count(2)
    caffe.set_solver_rank(1)
    caffe.set_multiprocess(True)
    try:
        assert caffe.solver_count() == 2 and caffe.solver_rank() == 1 and caffe.multiprocess()
    finally:
        caffe.set_solver_count(1)
        caffe.set_solver_rank(0)
        caffe.set_multiprocess(False)
    assert hasattr(caffe, 'NCCL') and hasattr(caffe.NCCL, 'new_uid')
    if not caffe.has_nccl():
        with pytest.raises(caffe.CortadoError, match='NCCL'):
            caffe.NCCL.new_uid()


def test_proto_module(caffe):
    from google.protobuf import text_format
    from cortado.proto import caffe_pb2
    net = caffe_pb2.NetParameter()
    text_format.Merge('name: "x" layer { name: "c" type: "Convolution" '
                      'convolution_param { num_output: 3 kernel_size: 5 } }', net)
    assert net.layer[0].convolution_param.kernel_size == [5]
    assert caffe_pb2.TRAIN == caffe.TRAIN and caffe_pb2.TEST == caffe.TEST
    assert caffe_pb2.PoolingParameter.MAX == 0 and caffe_pb2.DataParameter.LMDB == 1
    again = caffe_pb2.NetParameter.FromString(net.SerializeToString())
    assert again == net and 'kernel_size: 5' in text_format.MessageToString(again)
    assert os.path.basename(caffe_pb2.__file__) == 'caffe_pb2.py'
