"""What Cortado's "Python" layer type calls (python/src/layer.c).

A layer ``type: "Python"`` with ``python_param { module: "m" layer: "C"
param_str: "..." share_in_parallel: ... }`` is an object of class m.C,
made as Caffe makes it: ``C(layer_param)`` with the layer's
LayerParameter, then ``param_str`` and ``phase`` set, then
``setup(bottom, top)``.  Under data parallelism with worker threads each
worker's net gets its own object, unless share_in_parallel: then the
workers share one, set up by the first and only reshaped by the others.
Worker processes (and MPI ranks) import the module each.
"""
import importlib
import threading

from ._cortado import Layer

_lock = threading.Lock()
_shared = {}  # key -> [object, users]


def create(param_bytes, phase, rank, world, name):
    from .proto import caffe_pb2
    param = caffe_pb2.LayerParameter.FromString(param_bytes)
    pp = param.python_param
    if not pp.module or not pp.layer:
        raise ValueError("layer '{}': python_param needs module and layer".format(name))
    key = None
    if pp.share_in_parallel and world > 1:
        key = (pp.module, pp.layer, pp.param_str, name, phase)
        with _lock:
            entry = _shared.get(key)
            if entry is not None:
                entry[1] += 1
                return entry[0]
    module = importlib.import_module(pp.module)
    cls = getattr(module, pp.layer)
    obj = cls(param)
    if not isinstance(obj, Layer):
        raise TypeError('{}.{} must derive from caffe.Layer (cortado.Layer)'.format(pp.module, pp.layer))
    obj.param_str = pp.param_str
    obj.phase = phase
    obj._cortado_shared_key = key
    if key is not None:
        with _lock:
            entry = _shared.setdefault(key, [obj, 0])
            entry[1] += 1
            obj = entry[0]
    return obj


def setup(obj, bottom, top):
    shared = obj.__dict__.get('_cortado_shared_key') is not None
    if shared and obj.__dict__.get('_cortado_set_up'):
        # each worker's net keeps its own copy of the learnable blobs (the
        # first worker's values, which rank 0 broadcasts anyway)
        for value in obj._cortado_blob_values:
            obj.blobs.add_blob(*value.shape)
            obj.blobs[len(obj.blobs) - 1].data[...] = value
        obj.reshape(bottom, top)
        return
    obj.setup(bottom, top)
    obj._cortado_set_up = True
    if shared:
        obj._cortado_blob_values = [b.data.copy() for b in obj.blobs]


def release(obj):
    key = obj.__dict__.get('_cortado_shared_key')
    if key is None:
        return
    with _lock:
        entry = _shared.get(key)
        if entry is not None and entry[0] is obj:
            entry[1] -= 1
            if entry[1] <= 0:
                del _shared[key]
