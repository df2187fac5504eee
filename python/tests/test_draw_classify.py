"""cortado.draw (pydot), Classifier and Detector."""
import shutil

import numpy as np
import pytest
from google.protobuf import text_format

from conftest import drawn_one


def test_draw(caffe, lenet_deploy, tmp_path):
    pydot = pytest.importorskip('pydot')
    from cortado import draw
    from cortado.proto import caffe_pb2
    net = caffe_pb2.NetParameter()
    with open(lenet_deploy) as f:
        text_format.Merge(f.read(), net)
    graph = draw.get_pydot_graph(net, 'LR')
    assert isinstance(graph, pydot.Dot)
    names = {node.get_name().strip('"') for node in graph.get_nodes()}
    assert {'conv1_Convolution', 'conv1_blob', 'prob_Softmax', 'data_blob'} <= names
    assert 'kernel size: 5' in graph.get_node('conv1_Convolution')[0].get_label()
    assert len(graph.get_edges()) >= 16
    assert draw.get_edge_label(net.layer[1]) == '20'
    if shutil.which('dot'):
        out = str(tmp_path / 'lenet.png')
        draw.draw_net_to_file(net, out, 'TB', phase=caffe.TEST)
        with open(out, 'rb') as f:
            assert f.read(8) == b'\x89PNG\r\n\x1a\n'
        assert caffe.io.load_image(out).shape[0] > 100


def test_classifier(caffe, lenet_deploy, lenet_weights):
    clf = caffe.Classifier(lenet_deploy, lenet_weights, image_dims=(28, 28), raw_scale=255 / 256.)
    one = drawn_one(1)[0].transpose(1, 2, 0) * 256 / 255.  # an H x W x 1 image in [0, 1]
    probs = clf.predict([one, one], oversample=False)
    assert probs.shape == (2, 10) and probs[0].argmax() == 1 and probs[0, 1] > 0.9
    big = caffe.io.resize_image(one, (32, 32))
    clf2 = caffe.Classifier(lenet_deploy, lenet_weights, image_dims=(32, 32), raw_scale=255 / 256.)
    probs = clf2.predict([big], oversample=True)  # 10 crops, averaged
    assert probs.shape == (1, 10) and probs[0].argmax() == 1
    assert isinstance(clf, caffe.Net)


def test_detector(caffe, lenet_deploy, lenet_weights, tmp_path):
    det = caffe.Detector(lenet_deploy, lenet_weights, raw_scale=255 / 256.)
    canvas = np.zeros((40, 60, 3), dtype=np.float32)
    canvas[10:30, 42:46] = 1.0  # a one at the right
    path = str(tmp_path / 'scene.png')
    caffe.io.save_image(path, canvas)
    windows = np.array([[6, 30, 34, 58], [6, 0, 34, 28]])
    dets = det.detect_windows([(path, windows)])
    assert len(dets) == 2 and dets[0]['filename'] == path
    assert dets[0]['prediction'].shape == (10,) and dets[0]['prediction'].argmax() == 1
    assert np.array_equal(dets[1]['window'], windows[1])
    det.configure_crop(4)  # context padding
    assert det.crop(canvas[:, :, :1], windows[0]).shape == (28, 28, 1)
