"""Python layers of the tests, written as pycaffe users write them
(``import caffe`` becomes ``import cortado as caffe``)."""
import os
import threading

import numpy as np

import cortado as caffe

CREATED = []          # (class name, layer name, phase) of every object made
_lock = threading.Lock()


class EuclideanLossLayer(caffe.Layer):
    """Caffe's examples/pycaffe/layers/pyloss.py, in its own words: half the
    mean squared distance of two bottoms."""

    def setup(self, bottom, top):
        if len(bottom) != 2:
            raise Exception('Need two inputs to compute distance.')

    def reshape(self, bottom, top):
        if bottom[0].count != bottom[1].count:
            raise Exception('Inputs must have the same dimension.')
        self.diff = np.zeros_like(bottom[0].data, dtype=np.float32)
        top[0].reshape(1)

    def forward(self, bottom, top):
        self.diff[...] = bottom[0].data - bottom[1].data
        top[0].data[...] = np.sum(self.diff ** 2) / bottom[0].num / 2.

    def backward(self, top, propagate_down, bottom):
        for i in range(2):
            if not propagate_down[i]:
                continue
            sign = 1 if i == 0 else -1
            bottom[i].diff[...] = sign * self.diff / bottom[i].num


class ScaleLayer(caffe.Layer):
    """top = bottom * float(param_str); records its phase."""

    def setup(self, bottom, top):
        self.k = float(self.param_str)
        with _lock:
            CREATED.append((type(self).__name__, self.name, self.phase))

    def reshape(self, bottom, top):
        top[0].reshape(*bottom[0].data.shape)

    def forward(self, bottom, top):
        top[0].data[...] = bottom[0].data * self.k

    def backward(self, top, propagate_down, bottom):
        if propagate_down[0]:
            bottom[0].diff[...] = top[0].diff * self.k


class LearnedScaleLayer(caffe.Layer):
    """top = w * bottom with w a learnable blob (1 value, starting at 1)."""

    def setup(self, bottom, top):
        self.blobs.add_blob(1)
        self.blobs[0].data[...] = 1.0
        with _lock:
            CREATED.append((type(self).__name__, self.name, self.phase))

    def reshape(self, bottom, top):
        top[0].reshape(*bottom[0].data.shape)

    def forward(self, bottom, top):
        top[0].data[...] = bottom[0].data * self.blobs[0].data[0]

    def backward(self, top, propagate_down, bottom):
        self.blobs[0].diff[0] += np.sum(top[0].diff * bottom[0].data)
        if propagate_down[0]:
            bottom[0].diff[...] = top[0].diff * self.blobs[0].data[0]


class RandomBatchLayer(caffe.Layer):
    """A data layer: batches of param_str-given sizes in turn ("2,5"),
    x of 3 features and y = 2.5 * x, seeded by the layer's name."""

    def setup(self, bottom, top):
        self.sizes = [int(s) for s in self.param_str.split(',')]
        self.calls = 0
        self.rng = np.random.RandomState(len(self.name))

    def reshape(self, bottom, top):
        n = self.sizes[self.calls % len(self.sizes)]
        top[0].reshape(n, 3)
        top[1].reshape(n, 3)

    def forward(self, bottom, top):
        x = self.rng.randn(*top[0].data.shape).astype(np.float32)
        top[0].data[...] = x
        top[1].data[...] = 2.5 * x
        self.calls += 1

    def backward(self, top, propagate_down, bottom):
        pass


class FailingLayer(caffe.Layer):
    def setup(self, bottom, top):
        pass

    def reshape(self, bottom, top):
        top[0].reshape(*bottom[0].data.shape)

    def forward(self, bottom, top):
        raise ValueError('forward failed on purpose: ' + self.param_str)

    def backward(self, top, propagate_down, bottom):
        raise ArithmeticError('backward failed on purpose')


class NotALayer:
    def __init__(self, param):
        pass


def created_count(name):
    with _lock:
        return sum(1 for c in CREATED if c[1] == name)


def pid():
    return os.getpid()
