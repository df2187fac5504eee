"""Net, as pycaffe documents it: constructors, blobs and params, layers,
names, forward and backward (with start, end and keyword inputs),
forward_all, forward_backward_all, reshape, copy_from, share_with, save,
set_input_arrays; and the zero-copy views."""
import gc
import sys
from collections import OrderedDict

import numpy as np
import pytest

from conftest import LENET_BODY, drawn_one, write

SMALL = '''name: "small"
layer { name: "data" type: "Input" top: "data" input_param { shape { dim: 2 dim: 3 } } }
layer { name: "label" type: "Input" top: "label" input_param { shape { dim: 2 } } }
layer { name: "ip" type: "InnerProduct" bottom: "data" top: "ip"
  inner_product_param { num_output: 4 weight_filler { type: "gaussian" std: 0.5 }
                        bias_filler { type: "constant" value: 0.25 } } }
layer { name: "relu" type: "ReLU" bottom: "ip" top: "ip" }
layer { name: "ip2" type: "InnerProduct" bottom: "ip" top: "ip2"
  inner_product_param { num_output: 3 weight_filler { type: "gaussian" std: 0.5 } } }
layer { name: "loss" type: "SoftmaxWithLoss" bottom: "ip2" bottom: "label" top: "loss" }
force_backward: true
'''


@pytest.fixture
def small(tmp_path, caffe):
    return write(tmp_path / 'small.prototxt', SMALL)


def reference_small(net, x, label):
    """The small net's loss and input gradient in numpy."""
    w1, b1 = net.params['ip'][0].data, net.params['ip'][1].data
    w2, b2 = net.params['ip2'][0].data, net.params['ip2'][1].data
    h = np.maximum(x @ w1.T + b1, 0)
    z = h @ w2.T + b2
    p = np.exp(z - z.max(1, keepdims=True))
    p /= p.sum(1, keepdims=True)
    n = x.shape[0]
    loss = -np.log(p[np.arange(n), label.astype(int)]).mean()
    dz = p.copy()
    dz[np.arange(n), label.astype(int)] -= 1
    dz /= n
    dh = (dz @ w2) * (h > 0)
    return loss, dh @ w1


# ---------------------------------------------------------------- construction

def test_constructor_forms(caffe, lenet_deploy, lenet_weights):
    a = caffe.Net(lenet_deploy, caffe.TEST, weights=lenet_weights)
    b = caffe.Net(lenet_deploy, lenet_weights, caffe.TEST)  # pycaffe's old form
    c = caffe.Net(lenet_deploy, phase=caffe.TEST, weights=lenet_weights)
    d = caffe.Net(network_file=lenet_deploy, phase=caffe.TEST)
    for net in (a, b, c):
        assert np.array_equal(net.params['conv1'][0].data, a.params['conv1'][0].data)
    assert not np.array_equal(d.params['ip2'][0].data, a.params['ip2'][0].data)  # not loaded
    assert a.phase == caffe.TEST and caffe.TEST == 1 and caffe.TRAIN == 0
    with pytest.raises(TypeError):
        caffe.Net(lenet_deploy)  # the phase is required, as in pycaffe


def test_missing_files_raise(caffe, lenet_deploy, tmp_path):
    with pytest.raises(RuntimeError) as e:
        caffe.Net(str(tmp_path / 'nope.prototxt'), caffe.TEST)
    assert 'nope.prototxt' in str(e.value)
    with pytest.raises(caffe.CortadoError) as e:
        caffe.Net(lenet_deploy, caffe.TEST, weights=str(tmp_path / 'nope.caffemodel'))
    assert 'nope.caffemodel' in str(e.value)
    bad = write(tmp_path / 'bad.prototxt', 'layer { name: "x" type: "NoSuchType" top: "x" }')
    with pytest.raises(caffe.CortadoError) as e:
        caffe.Net(bad, caffe.TRAIN)
    assert 'NoSuchType' in str(e.value)


def test_level_and_stages(caffe, tmp_path):
    text = '''
layer { name: "data" type: "Input" top: "data" input_param { shape { dim: 1 dim: 2 } } }
layer { name: "a" type: "ReLU" bottom: "data" top: "a" include { stage: "deploy" } }
layer { name: "b" type: "ReLU" bottom: "data" top: "b" include { min_level: 2 } }
layer { name: "c" type: "ReLU" bottom: "data" top: "c" include { phase: TRAIN } }
'''
    path = write(tmp_path / 'rules.prototxt', text)
    assert caffe.Net(path, caffe.TEST).layer_dict.keys() == {'data'}
    assert list(caffe.Net(path, caffe.TEST, stages=['deploy'])._layer_names) == ['data', 'a']
    assert list(caffe.Net(path, caffe.TEST, level=2)._layer_names) == ['data', 'b']
    assert list(caffe.Net(path, caffe.TRAIN, level=3, stages=['deploy'])._layer_names) == \
        ['data', 'data_data_0_split', 'a', 'b', 'c']  # Caffe's split layer, named as Caffe names it


# ---------------------------------------------------------------- looking

def test_blobs_params_layers(caffe, lenet_deploy, lenet_weights):
    net = caffe.Net(lenet_deploy, caffe.TEST, weights=lenet_weights)
    assert isinstance(net.blobs, OrderedDict)
    assert list(net.blobs) == ['data', 'conv1', 'pool1', 'conv2', 'pool2', 'ip1', 'ip2', 'prob']
    assert isinstance(net.params, OrderedDict)
    assert list(net.params) == ['conv1', 'conv2', 'ip1', 'ip2']
    assert [p.data.shape for p in net.params['conv1']] == [(20, 1, 5, 5), (20,)]
    assert len(net.params['ip1']) == 2 and net.params['ip1'][-1].data.shape == (500,)
    assert list(net._layer_names) == ['data', 'conv1', 'pool1', 'conv2', 'pool2', 'ip1', 'relu1', 'ip2', 'prob']
    assert [layer.type for layer in net.layers] == ['Input', 'Convolution', 'Pooling', 'Convolution',
                                                      'Pooling', 'InnerProduct', 'ReLU', 'InnerProduct',
                                                      'Softmax']
    assert list(net.layer_dict) == list(net._layer_names)
    assert net.layer_dict['conv1'].type == 'Convolution'
    assert len(net.layer_dict['conv1'].blobs) == 2 and len(net.layer_dict['pool1'].blobs) == 0
    assert net.inputs == ['data'] and net.outputs == ['prob']
    assert net.top_names['relu1'] == ['ip1'] and net.bottom_names['ip2'] == ['ip1']
    assert net.bottom_names['data'] == [] and net.top_names['conv1'] == ['conv1']
    blob = net.blobs['conv1']
    assert blob.shape == (64, 20, 24, 24) and blob.count == 64 * 20 * 24 * 24
    assert (blob.num, blob.channels, blob.height, blob.width) == (64, 20, 24, 24)
    assert net.blobs['ip1'].height == 1 and net.blobs['ip1'].width == 1
    assert net.blob_loss_weights['prob'] == 0


def test_loss_weights(caffe, small):
    net = caffe.Net(small, caffe.TRAIN)
    assert net.blob_loss_weights['loss'] == 1.0 and net.blob_loss_weights['ip2'] == 0.0
    assert net.inputs == ['data', 'label'] and net.outputs == ['loss']


# ---------------------------------------------------------------- zero copy

def test_zero_copy_param_write_is_seen_by_forward(caffe, lenet_deploy, lenet_weights):
    """A write through net.params[...][0].data changes the next forward, and
    the array is the net's memory itself (no copy in between)."""
    net = caffe.Net(lenet_deploy, caffe.TEST, weights=lenet_weights)
    w = net.params['ip2'][0].data
    b = net.params['ip2'][1].data
    # the same memory on every access, and what DLPack exports for the blob
    assert w.__array_interface__['data'][0] == net.params['ip2'][0].data.__array_interface__['data'][0]
    assert w.__array_interface__['data'][0] == net.params['ip2'][0].device_data.ptr
    assert not w.flags['OWNDATA'] and w.flags['WRITEABLE'] and w.flags['C_CONTIGUOUS']
    net.blobs['data'].data[...] = drawn_one()
    assert net.forward()['prob'][0].argmax() == 1
    w[...] = 0
    b[...] = 0
    b[7] = 10.0  # every input now scores class 7
    out = net.forward()['prob']
    assert (out.argmax(axis=1) == 7).all()
    assert out[0, 7] > 0.99
    # a write to the blob's memory from another view is seen here too
    net.params['ip2'][1].data[7] = 0
    assert b[7] == 0


def test_view_keeps_net_alive(caffe, lenet_deploy, lenet_weights):
    net = caffe.Net(lenet_deploy, caffe.TEST, weights=lenet_weights)
    w = net.params['conv1'][0].data
    expect = w.copy()
    blob = net.blobs['prob']
    del net
    gc.collect()
    assert np.array_equal(w, expect)  # still the (live) net's memory
    assert blob.data.shape == (64, 10)
    ref = sys.getrefcount(w)
    assert ref >= 2


def test_input_write_is_seen(caffe, lenet_deploy, lenet_weights):
    net = caffe.Net(lenet_deploy, caffe.TEST, weights=lenet_weights)
    data = net.blobs['data'].data
    data[...] = drawn_one()
    first = net.forward()['prob'][0].copy()
    data[0] = 0
    data[0, 0, 13:15, 4:24] = 1  # a horizontal bar
    assert not np.allclose(net.forward()['prob'][0], first)


# ---------------------------------------------------------------- forward and backward

def test_forward_kwargs_start_end_blobs(caffe, lenet_deploy, lenet_weights):
    net = caffe.Net(lenet_deploy, caffe.TEST, weights=lenet_weights)
    x = drawn_one()
    out = net.forward(data=x)
    assert list(out) == ['prob'] and out['prob'][0].argmax() == 1
    assert np.array_equal(net.blobs['data'].data, x)
    out = net.forward(blobs=['conv1', 'ip1'], data=x)
    assert set(out) == {'prob', 'conv1', 'ip1'}
    # end: the named layer's tops; the layers above do not run
    net.blobs['prob'].data[...] = -1
    out = net.forward(end='ip2')
    assert set(out) == {'ip2'}
    assert (net.blobs['prob'].data == -1).all()
    ip2 = out['ip2'].copy()
    # start: from a layer on, with the blobs below as they are
    out = net.forward(start='prob')
    e = np.exp(ip2 - ip2.max(1, keepdims=True))
    assert np.allclose(out['prob'], e / e.sum(1, keepdims=True), atol=1e-6)
    with pytest.raises(Exception, match='Input blob arguments do not match net inputs'):
        net.forward(conv1=x)
    with pytest.raises(Exception, match='Input is not batch sized'):
        net.forward(data=x[:3])
    with pytest.raises(ValueError):
        net.forward(end='no_such_layer')


def test_forward_backward_against_numpy(caffe, small):
    caffe.set_random_seed(3)
    net = caffe.Net(small, caffe.TRAIN)
    x = np.array([[0.5, -1.0, 2.0], [1.5, 0.25, -0.75]], dtype=np.float32)
    label = np.array([2, 0], dtype=np.float32)
    out = net.forward(data=x, label=label)
    want_loss, want_dx = reference_small(net, x, label)
    assert np.isclose(out['loss'], want_loss, rtol=1e-5)
    diffs = net.backward()
    assert set(diffs) == {'data', 'label'}
    assert np.allclose(diffs['data'], want_dx, atol=1e-6)
    # end: the named layer's bottoms
    net.forward(data=x, label=label)
    diffs = net.backward(end='ip2', diffs=['ip2'])
    assert set(diffs) == {'ip', 'ip2'}


def test_backward_kwargs_and_param_diffs_accumulate(caffe, tmp_path):
    text = '''
layer { name: "data" type: "Input" top: "data" input_param { shape { dim: 2 dim: 3 } } }
layer { name: "ip" type: "InnerProduct" bottom: "data" top: "ip"
  inner_product_param { num_output: 2 weight_filler { type: "gaussian" std: 1 } } }
force_backward: true
'''
    net = caffe.Net(write(tmp_path / 'ip.prototxt', text), caffe.TRAIN)
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    net.forward(data=x)
    top = np.array([[1, 0], [0, 2]], dtype=np.float32)
    diffs = net.backward(ip=top)
    w = net.params['ip'][0].data
    assert np.allclose(diffs['data'], top @ w)
    assert np.allclose(net.params['ip'][0].diff, top.T @ x)
    net.backward(ip=top)  # parameter gradients add up, as in Caffe
    assert np.allclose(net.params['ip'][0].diff, 2 * top.T @ x)
    net.clear_param_diffs()
    assert not net.params['ip'][0].diff.any()
    with pytest.raises(Exception, match='Top diff arguments do not match net outputs'):
        net.backward(data=top)


def test_forward_all_and_forward_backward_all(caffe, lenet_deploy, lenet_weights, small):
    net = caffe.Net(lenet_deploy, caffe.TEST, weights=lenet_weights)
    x = np.concatenate([drawn_one()] * 2 + [drawn_one()[:10]])  # 138: two batches and a padded third
    out = net.forward_all(data=x, blobs=['ip2'])
    assert out['prob'].shape == (138, 10) and out['ip2'].shape == (138, 10)
    assert out['prob'][0].argmax() == 1 and out['prob'][64].argmax() == 1 and out['prob'][128].argmax() == 1
    caffe.set_random_seed(5)
    snet = caffe.Net(small, caffe.TRAIN)
    xs = np.random.RandomState(0).randn(5, 3).astype(np.float32)
    labels = np.array([0, 1, 2, 1, 0], dtype=np.float32)
    outs, diffs = snet.forward_backward_all(data=xs, label=labels)
    assert outs['loss'].shape == (3,) and diffs['data'].shape == (5, 3)
    for i in range(2):
        _, want = reference_small(snet, xs[2 * i:2 * i + 2], labels[2 * i:2 * i + 2])
        assert np.allclose(diffs['data'][2 * i:2 * i + 2], want, atol=1e-6)


def test_reshape_blob_then_forward(caffe, lenet_deploy, lenet_weights):
    """As Caffe's classification example: reshape the input blob, forward."""
    net = caffe.Net(lenet_deploy, caffe.TEST, weights=lenet_weights)
    net.blobs['data'].reshape(3, 1, 28, 28)
    net.blobs['data'].data[...] = drawn_one(3)
    out = net.forward()
    assert out['prob'].shape == (3, 10) and out['prob'][0].argmax() == 1
    assert net.blobs['conv1'].data.shape == (3, 20, 24, 24)
    net.blobs['data'].reshape(*(5, 1, 28, 28))
    net.reshape()  # explicit too
    assert net.blobs['ip2'].data.shape == (5, 10)
    with pytest.raises(caffe.CortadoError):
        net.params['conv1'][0].reshape(40, 1, 5, 5)  # a parameter cannot grow


# ---------------------------------------------------------------- weights

def test_copy_from_save_share_with(caffe, lenet_deploy, lenet_weights, tmp_path):
    a = caffe.Net(lenet_deploy, caffe.TEST)
    a.copy_from(lenet_weights)
    ref = caffe.Net(lenet_deploy, caffe.TEST, weights=lenet_weights)
    for name in ref.params:
        for i in range(2):
            assert np.array_equal(a.params[name][i].data, ref.params[name][i].data)
    a.params['conv1'][0].data[...] *= 2
    out = str(tmp_path / 'saved.caffemodel')
    a.save(out)
    b = caffe.Net(lenet_deploy, caffe.TEST, weights=out)
    assert np.array_equal(b.params['conv1'][0].data, ref.params['conv1'][0].data * 2)
    # share_with: one memory
    c = caffe.Net(lenet_deploy, caffe.TEST)
    c.share_with(ref)
    assert np.array_equal(c.params['ip1'][0].data, ref.params['ip1'][0].data)
    ref.params['ip1'][1].data[0] = 42
    assert c.params['ip1'][1].data[0] == 42
    del ref
    gc.collect()
    assert c.params['ip1'][1].data[0] == 42  # c keeps the other net alive


def test_set_input_arrays(caffe, tmp_path, lenet_weights):
    text = '''name: "LeNet"
layer { name: "data" type: "MemoryData" top: "data" top: "label"
  memory_data_param { batch_size: 4 channels: 1 height: 28 width: 28 } }
''' + LENET_BODY + 'layer { name: "prob" type: "Softmax" bottom: "ip2" top: "prob" }\n'
    net = caffe.Net(write(tmp_path / 'mem.prototxt', text), caffe.TEST, weights=lenet_weights)
    data = np.zeros((8, 1, 28, 28), dtype=np.float32)
    data[5] = drawn_one(1)[0]
    labels = np.arange(8, dtype=np.float32)
    net.set_input_arrays(data, labels)
    net.forward()
    assert np.array_equal(net.blobs['label'].data, [0, 1, 2, 3])
    net.forward()
    assert np.array_equal(net.blobs['label'].data, [4, 5, 6, 7])
    assert net.blobs['prob'].data[1].argmax() == 1
    with pytest.raises(RuntimeError, match='multiple of batch size'):
        net.set_input_arrays(data[:6], labels[:6])
    with pytest.raises(RuntimeError, match='must be float32'):
        net.set_input_arrays(data.astype(np.float64), labels)
    with pytest.raises(RuntimeError, match='same first dimension'):
        net.set_input_arrays(data, labels[:4])
    with pytest.raises(RuntimeError, match='wrong number of channels'):
        net.set_input_arrays(np.zeros((8, 3, 28, 28), np.float32), labels)


def test_set_input_arrays_needs_memory_data(caffe, lenet_deploy):
    net = caffe.Net(lenet_deploy, caffe.TEST)
    with pytest.raises(RuntimeError, match='MemoryData'):
        net.set_input_arrays(np.zeros((64, 1, 28, 28), np.float32), np.zeros(64, np.float32))


def test_device_data_dlpack_on_cpu(caffe, lenet_deploy, lenet_weights):
    """DLPack on the CPU: numpy.from_dlpack sees the blob's own memory."""
    net = caffe.Net(lenet_deploy, caffe.TEST, weights=lenet_weights)
    dev = net.params['conv1'][0].device_data
    assert dev.__dlpack_device__() == (1, 0) and dev.shape == (20, 1, 5, 5)
    arr = np.from_dlpack(dev)
    assert arr.shape == (20, 1, 5, 5)
    assert arr.__array_interface__['data'][0] == net.params['conv1'][0].data.__array_interface__['data'][0]
    arr[0, 0, 0, 0] = 123.0
    assert net.params['conv1'][0].data[0, 0, 0, 0] == 123.0
    with pytest.raises(AttributeError):
        dev.__cuda_array_interface__  # host memory is not CUDA memory
    del net, dev
    gc.collect()
    assert arr[0, 0, 0, 0] == 123.0  # the capsule keeps the net alive
