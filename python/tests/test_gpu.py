"""The GPU side (ctest python_tests_gpu, label gpu; skipped without a GPU):
.data as pycaffe's synced host array, device arrays through the CUDA Array
Interface and DLPack (read and written with the CUDA runtime through
ctypes, and with PyTorch or CuPy where installed), Python layers, solvers
and callbacks on a GPU, cortado.train on several GPUs (threads and
processes), pycaffe's NCCL, and the command's Python layers on a GPU."""
import ctypes
import ctypes.util
import multiprocessing
import os
import subprocess

import numpy as np
import pytest

import pylayers  # noqa: F401 (the layers' module, imported as the nets do)
from conftest import BIN, drawn_one, write
from test_python_layer import EUCLID, REGRESSION, regression_solver

pytestmark = pytest.mark.gpu


@pytest.fixture
def gpu(caffe):
    if not caffe.has_cuda() or caffe.gpu_count() == 0:
        pytest.skip('no CUDA GPU')
    caffe.set_device(0)
    caffe.set_mode_gpu()
    caffe.set_math('fp32')  # comparisons with the CPU
    yield 0
    caffe.set_mode_cpu()
    caffe.set_math('tf32')


@pytest.fixture
def two_gpus(gpu, caffe):
    if caffe.gpu_count() < 2:
        pytest.skip('needs 2 GPUs')
    return [0, 1]


def cudart():
    for name in ('libcudart.so', 'libcudart.so.13', 'libcudart.so.12', ctypes.util.find_library('cudart')):
        if not name:
            continue
        try:
            lib = ctypes.CDLL(name)
        except OSError:
            continue
        lib.cudaMemcpy.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
        lib.cudaMemcpy.restype = ctypes.c_int
        return lib
    pytest.fail('the CUDA runtime library (libcudart) cannot be loaded')


def device_to_host(ptr, shape):
    out = np.empty(shape, dtype=np.float32)
    assert cudart().cudaMemcpy(out.ctypes.data, ptr, out.nbytes, 2) == 0  # cudaMemcpyDeviceToHost
    return out


def host_to_device(ptr, array):
    array = np.ascontiguousarray(array, dtype=np.float32)
    assert cudart().cudaMemcpy(ptr, array.ctypes.data, array.nbytes, 1) == 0  # cudaMemcpyHostToDevice


def test_gpu_forward_matches_cpu(caffe, gpu, lenet_deploy, lenet_weights):
    net = caffe.Net(lenet_deploy, caffe.TEST, weights=lenet_weights)
    assert net.device == 0 and net.blobs['data'].device == 0
    caffe.set_mode_cpu()
    ref = caffe.Net(lenet_deploy, caffe.TEST, weights=lenet_weights)
    x = drawn_one()
    x[1:] = np.random.RandomState(0).rand(63, 1, 28, 28)
    got = net.forward(data=x)['prob']
    want = ref.forward(data=x)['prob']
    assert got[0].argmax() == 1 and np.allclose(got, want, atol=1e-5)


def test_gpu_data_is_a_synced_host_array(caffe, gpu, lenet_deploy, lenet_weights):
    """As pycaffe's mutable_cpu_data: a write through .data reaches the
    device before the next forward; .data after a forward is fresh, in the
    same host memory as before."""
    net = caffe.Net(lenet_deploy, caffe.TEST, weights=lenet_weights)
    net.blobs['data'].data[...] = drawn_one()
    prob = net.blobs['prob'].data
    net.forward()
    again = net.blobs['prob'].data
    assert again.__array_interface__['data'][0] == prob.__array_interface__['data'][0]
    assert again[0].argmax() == 1
    net.params['ip2'][0].data[...] = 0
    b = net.params['ip2'][1].data
    b[...] = 0
    b[7] = 10
    out = net.forward()['prob']
    assert (out.argmax(axis=1) == 7).all()


def test_gpu_cuda_array_interface(caffe, gpu, lenet_deploy, lenet_weights):
    net = caffe.Net(lenet_deploy, caffe.TEST, weights=lenet_weights)
    blob = net.params['conv1'][0]
    host = blob.data.copy()
    dev = blob.device_data
    cai = dev.__cuda_array_interface__
    assert cai['shape'] == (20, 1, 5, 5) and cai['typestr'] == '<f4' and cai['version'] == 3
    ptr, readonly = cai['data']
    assert not readonly and ptr == dev.ptr and ptr != blob.data.__array_interface__['data'][0]
    assert dev.__dlpack_device__() == (2, 0)
    assert np.array_equal(device_to_host(ptr, host.shape), host)
    blob.device_data  # the device is now the newest: a write there is seen by .data
    host_to_device(ptr, np.full(host.shape, 0.5, np.float32))
    assert (blob.data == 0.5).all()
    # and the net computes with it
    net.blobs['data'].data[...] = 1.0
    net.forward(end='conv1')
    assert np.allclose(net.blobs['conv1'].data[0, 0], 12.5 + net.params['conv1'][1].data[0], atol=1e-4)


class DLDevice(ctypes.Structure):
    _fields_ = [('device_type', ctypes.c_int32), ('device_id', ctypes.c_int32)]


class DLDataType(ctypes.Structure):
    _fields_ = [('code', ctypes.c_uint8), ('bits', ctypes.c_uint8), ('lanes', ctypes.c_uint16)]


class DLTensor(ctypes.Structure):
    _fields_ = [('data', ctypes.c_void_p), ('device', DLDevice), ('ndim', ctypes.c_int32),
                ('dtype', DLDataType), ('shape', ctypes.POINTER(ctypes.c_int64)),
                ('strides', ctypes.POINTER(ctypes.c_int64)), ('byte_offset', ctypes.c_uint64)]


def test_gpu_dlpack_capsule(caffe, gpu, lenet_deploy, lenet_weights):
    net = caffe.Net(lenet_deploy, caffe.TEST, weights=lenet_weights)
    dev = net.blobs['conv1'].device_data
    capsule = dev.__dlpack__()
    get = ctypes.pythonapi.PyCapsule_GetPointer
    get.restype = ctypes.c_void_p
    get.argtypes = [ctypes.py_object, ctypes.c_char_p]
    tensor = DLTensor.from_address(get(capsule, b'dltensor'))
    assert tensor.data == dev.ptr and (tensor.device.device_type, tensor.device.device_id) == (2, 0)
    assert tensor.ndim == 4 and [tensor.shape[i] for i in range(4)] == [64, 20, 24, 24]
    assert (tensor.dtype.code, tensor.dtype.bits, tensor.dtype.lanes) == (2, 32, 1)
    valid = ctypes.pythonapi.PyCapsule_IsValid
    valid.restype = ctypes.c_int
    valid.argtypes = [ctypes.py_object, ctypes.c_char_p]
    assert valid(dev.__dlpack__(max_version=(1, 0)), b'dltensor_versioned') == 1


def test_gpu_torch_and_cupy_without_copies(caffe, gpu, lenet_deploy, lenet_weights):
    net = caffe.Net(lenet_deploy, caffe.TEST, weights=lenet_weights)
    dev = net.params['ip1'][0].device_data
    tried = 0
    try:
        import torch
    except ImportError:
        torch = None
    if torch is not None and torch.cuda.is_available():
        tried += 1
        t = torch.from_dlpack(dev)
        assert t.is_cuda and t.data_ptr() == dev.ptr and tuple(t.shape) == (500, 800)
        t2 = torch.as_tensor(net.params['ip1'][0].device_data, device='cuda')
        assert t2.data_ptr() == dev.ptr
        t.mul_(0)
        assert not net.params['ip1'][0].data.any()
    try:
        import cupy
    except ImportError:
        cupy = None
    if cupy is not None:
        tried += 1
        c = cupy.asarray(net.params['ip1'][1].device_data)
        assert c.data.ptr == net.params['ip1'][1].device_data.ptr
    if not tried:
        pytest.skip('neither PyTorch nor CuPy with CUDA is installed')


def test_gpu_python_layer(caffe, gpu, tmp_path):
    net = caffe.Net(write(tmp_path / 'e.prototxt', EUCLID), caffe.TRAIN)
    rng = np.random.RandomState(0)
    a = rng.randn(4, 3).astype(np.float32)
    b = rng.randn(4, 3).astype(np.float32)
    out = net.forward(a=a, b=b)
    assert np.isclose(out['loss'], np.sum((3 * a - b) ** 2) / 8, rtol=1e-5)
    diffs = net.backward()
    assert np.allclose(diffs['a'], 3 * (3 * a - b) / 4, atol=1e-5)
    solver = caffe.SGDSolver(regression_solver(tmp_path))
    solver.step(60)
    assert abs(solver.net.params['w'][0].data[0] - 2.5) < 1e-3


def test_gpu_solver_and_callbacks(caffe, gpu, lenet_solver):
    path = lenet_solver('g.prototxt', max_iter=10, momentum=0, weight_decay=0)
    solver = caffe.SGDSolver(path)
    caffe.set_mode_cpu()
    cpu = caffe.SGDSolver(path)
    solver.step(5)
    cpu.step(5)
    for name in cpu.net.params:
        assert np.allclose(solver.net.params[name][0].data, cpu.net.params[name][0].data, atol=1e-4)
    before = {k: v[0].data.copy() for k, v in solver.net.params.items()}

    def on_gradients():
        for blobs in solver.net.params.values():
            for blob in blobs:
                assert np.isfinite(blob.diff).all()
                blob.diff[...] = 0
    solver.add_callback(None, on_gradients)
    solver.step(3)
    for name, value in before.items():
        assert np.array_equal(solver.net.params[name][0].data, value)


def test_gpu_train_two_gpu_threads(caffe, two_gpus, lenet_solver, tmp_path):
    calls = []
    caffe.train(lenet_solver('t.prototxt', max_iter=6), gpus=two_gpus,
                callbacks=[(lambda: calls.append('start'), lambda: calls.append('grad'))])
    assert calls.count('start') == 12 and calls.count('grad') == 12
    assert os.path.isfile(str(tmp_path / 'lenet_iter_6.caffemodel'))


def test_gpu_train_two_gpu_processes(caffe, two_gpus, lenet_solver, tmp_path):
    marker = str(tmp_path / 'worker_marker')
    caffe.train(lenet_solver('p.prototxt', max_iter=6), gpus=two_gpus, workers='processes',
                on_worker=_ProcessMarker(marker))
    assert os.path.isfile(str(tmp_path / 'lenet_iter_6.caffemodel'))
    assert sorted(open(marker + '.0').read().split() + open(marker + '.1').read().split()) == ['0', '1', '2', '2']


class _ProcessMarker:
    """Writes 'rank world' to path.RANK in each worker process."""

    def __init__(self, path):
        self.path = path

    def __call__(self, solver):
        with open('%s.%d' % (self.path, solver.rank), 'w') as f:
            f.write('%d %d' % (solver.rank, solver.world))


def _nccl_worker(rank, gpus, solver_path, uid, out):
    """pycaffe's train.py worker, as its users write it."""
    import cortado as caffe
    caffe.init_log(2)
    caffe.set_device(gpus[rank])
    caffe.set_mode_gpu()
    caffe.set_solver_count(len(gpus))
    caffe.set_solver_rank(rank)
    caffe.set_multiprocess(True)
    solver = caffe.SGDSolver(solver_path)
    nccl = caffe.NCCL(solver, uid)
    nccl.bcast()
    solver.add_callback(nccl)
    solver.step(5)
    np.save('%s.%d.npy' % (out, rank), solver.net.params['ip2'][0].data)


def test_gpu_pycaffe_nccl(caffe, two_gpus, lenet_solver, tmp_path):
    uid = caffe.NCCL.new_uid()
    path = lenet_solver('n.prototxt', max_iter=5)
    out = str(tmp_path / 'ip2')
    ctx = multiprocessing.get_context('spawn')
    procs = [ctx.Process(target=_nccl_worker, args=(r, two_gpus, path, uid, out)) for r in range(2)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(300)
        assert p.exitcode == 0
    assert np.array_equal(np.load(out + '.0.npy'), np.load(out + '.1.npy'))


def test_gpu_cortado_command_python_layers(caffe, gpu, tmp_path):
    solver = regression_solver(tmp_path, name='gcli')
    env = dict(os.environ)
    env['PYTHONPATH'] = os.pathsep.join([os.path.join(os.path.dirname(__file__), 'layers'),
                                         env.get('PYTHONPATH', '')])
    r = subprocess.run([BIN, 'train', '--solver=' + solver, '--gpu=0', '--math=fp32', '--log_level=1'],
                       env=env, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    caffe.set_mode_cpu()
    net = caffe.Net(write(tmp_path / 'c.prototxt', REGRESSION % ('8', '')), caffe.TEST,
                    weights=str(tmp_path / 'gcli_iter_60.caffemodel'))
    assert abs(net.params['w'][0].data[0] - 2.5) < 1e-3
