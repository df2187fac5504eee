"""cortado.net_spec (NetSpec, layers as L, params as P, to_proto) and
cortado.coord_map, as pycaffe's: the NetParameters they write, and nets
built from them."""
import numpy as np
import pytest
from google.protobuf import text_format

from conftest import write


def test_netspec_writes_layers(caffe):
    from cortado import NetSpec, layers as L, params as P, to_proto
    n = NetSpec()
    n.data, n.label = L.Data(batch_size=32, backend=P.Data.LMDB, source='x_lmdb',
                             transform_param=dict(scale=1. / 255), ntop=2)
    n.conv = L.Convolution(n.data, kernel_size=5, num_output=8, weight_filler=dict(type='xavier'),
                           param=[dict(lr_mult=1), dict(lr_mult=2)])
    n.pool = L.Pooling(n.conv, kernel_size=2, stride=2, pool=P.Pooling.MAX)
    n.relu = L.ReLU(n.pool, in_place=True)
    n.ip = L.InnerProduct(n.relu, num_output=10)
    n.loss = L.SoftmaxWithLoss(n.ip, n.label, loss_weight=0.5)
    n.acc = L.Accuracy(n.ip, n.label, include=dict(phase=caffe.TEST))
    proto = n.to_proto()
    names = [l.name for l in proto.layer]
    assert names == ['data', 'conv', 'pool', 'relu', 'ip', 'loss', 'acc']
    data, conv, pool, relu, ip, loss, acc = proto.layer
    assert list(data.top) == ['data', 'label'] and data.data_param.batch_size == 32
    assert data.data_param.backend == P.Data.LMDB and data.transform_param.scale == pytest.approx(1 / 255.)
    assert conv.convolution_param.kernel_size == [5] and conv.convolution_param.weight_filler.type == 'xavier'
    assert [p.lr_mult for p in conv.param] == [1, 2]
    assert pool.pooling_param.pool == P.Pooling.MAX
    assert list(relu.bottom) == ['pool'] and list(relu.top) == ['pool']  # in place
    assert list(loss.bottom) == ['ip', 'label'] and loss.loss_weight == [0.5]
    assert acc.include[0].phase == caffe.TEST
    # a top alone: its layers, automatic names
    top = L.ReLU(L.Input(shape=dict(dim=[1, 2])))
    auto = to_proto(top)
    assert [l.name for l in auto.layer] == ['Input1', 'ReLU1']
    assert 'input_param' in text_format.MessageToString(auto)
    assert n['conv'] is n.conv and 'conv' in n.keys()


def test_netspec_net_runs(caffe, tmp_path):
    from cortado import NetSpec, layers as L
    n = NetSpec()
    n.data = L.Input(shape=dict(dim=[2, 3]))
    n.ip = L.InnerProduct(n.data, num_output=4, weight_filler=dict(type='constant', value=0.5),
                          bias_filler=dict(type='constant', value=1))
    path = write(tmp_path / 'spec.prototxt', str(n.to_proto()))
    net = caffe.Net(path, caffe.TEST)
    out = net.forward(data=np.ones((2, 3), np.float32))['ip']
    assert np.allclose(out, 2.5)


def test_coord_map_crop(caffe, tmp_path):
    """crop(data, up) makes the Crop that aligns the input with a conv +
    deconv path's output: axis 2, offset (kernel - 1) / 2 = 2."""
    from cortado import NetSpec, layers as L
    from cortado.coord_map import coord_map_from_to, crop
    n = NetSpec()
    n.data = L.Input(shape=dict(dim=[1, 1, 12, 12]))
    n.conv = L.Convolution(n.data, num_output=1, kernel_size=5, weight_filler=dict(type='gaussian', std=1))
    n.up = L.Deconvolution(n.conv, convolution_param=dict(num_output=1, kernel_size=1,
                                                          weight_filler=dict(type='constant', value=1)))
    ax, a, b = coord_map_from_to(n.data, n.up)
    assert ax == 1 and (a == 1).all() and (b == -2).all()
    n.crop = crop(n.data, n.up)
    layer = n.to_proto().layer[-1]
    assert layer.type == 'Crop' and layer.crop_param.axis == 2 and list(layer.crop_param.offset) == [2]
    net = caffe.Net(write(tmp_path / 'fcn.prototxt', str(n.to_proto())), caffe.TEST)
    x = np.random.RandomState(1).rand(1, 1, 12, 12).astype(np.float32)
    out = net.forward(data=x)
    assert np.array_equal(out['crop'], x[:, :, 2:10, 2:10])
    with pytest.raises(RuntimeError, match='Could not compute map'):
        coord_map_from_to(n.data, L.InnerProduct(n.data, num_output=2))


def test_coord_map_compose_inverse(caffe):
    from cortado import coord_map as cm
    from cortado import layers as L
    assert cm.compose((None, 1, 0), (2, 0.5, 1)) == (2, 0.5, 1)
    assert cm.compose((2, 2, 1), (2, 0.5, 3)) == (2, 1.0, 7)
    assert cm.inverse((2, 2.0, 1.0)) == (2, 0.5, -0.5)
    with pytest.raises(cm.AxisMismatchException):
        cm.compose((1, 1, 0), (2, 1, 0))
    pool = L.Pooling(L.Input(shape=dict(dim=[1, 1, 8, 8])), kernel_size=2, stride=2)
    ax, a, b = cm.coord_map(pool.fn)
    assert ax == 1 and a == [0.5] and b == [-0.25]
