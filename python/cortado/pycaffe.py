"""pycaffe's Python half: the friendly members of Net and the solver classes.

As in pycaffe, the methods are set on the compiled Net type itself, so the
nets a Solver hands out (solver.net, solver.test_nets) have them too.
"""
from collections import OrderedDict
from itertools import zip_longest

import numpy as np

from . import _cortado
from ._cortado import Net, Solver

__all__ = ['Net', 'Solver', 'SGDSolver', 'NesterovSolver', 'AdaGradSolver', 'RMSPropSolver',
           'AdaDeltaSolver', 'AdamSolver', 'get_solver', 'Timer', 'NCCL']


def _cached(net, attr, make):
    value = net.__dict__.get(attr)
    if value is None:
        value = make()
        net.__dict__[attr] = value
    return value


# ---------------------------------------------------------------- Net: lookups

@property
def _net_blobs(self):
    """The blobs by name, bottom to top (an OrderedDict)."""
    return _cached(self, '_blobs_dict', lambda: OrderedDict(zip(self._blob_names, self._blobs)))


@property
def _net_blob_loss_weights(self):
    """Each blob's loss weight by name (an OrderedDict)."""
    return _cached(self, '_blob_loss_weights_dict',
                   lambda: OrderedDict(zip(self._blob_names, self._blob_loss_weights)))


@property
def _net_layer_dict(self):
    """The layers by name, bottom to top (an OrderedDict)."""
    return _cached(self, '_layer_dict', lambda: OrderedDict(zip(self._layer_names, self.layers)))


@property
def _net_params(self):
    """The learnable blobs of each layer that has some, by layer name: each a
    BlobVec of the layer's blobs (weights, bias, ...)."""
    def make():
        return OrderedDict((name, layer.blobs) for name, layer in zip(self._layer_names, self.layers)
                           if len(layer.blobs) > 0)
    return _cached(self, '_params_dict', make)


@property
def _net_inputs(self):
    """The names of the input blobs."""
    return _cached(self, '_input_list', lambda: [self._blob_names[i] for i in self._inputs])


@property
def _net_outputs(self):
    """The names of the output blobs."""
    return _cached(self, '_output_list', lambda: [self._blob_names[i] for i in self._outputs])


def _names_by_layer(ids_of, attr):
    @property
    def names(self):
        def make():
            blob_names = self._blob_names
            return OrderedDict((self._layer_names[i], [blob_names[j] for j in ids_of(self, i)])
                               for i in range(len(self._layer_names)))
        return _cached(self, attr, make)
    return names


# ---------------------------------------------------------------- Net: passes

def _layer_index(net, name, what):
    try:
        return list(net._layer_names).index(name)
    except ValueError:
        raise ValueError('{}: no layer named {!r} in net {!r}'.format(what, name, net.name)) from None


def _net_forward(self, blobs=None, start=None, end=None, **kwargs):
    """Runs the net forward and returns {blob name: ndarray} of the outputs.

    blobs: names of other blobs to return too.
    start, end: names of the first and last layer to run (end inclusive);
        with end, the outputs are that layer's tops.
    kwargs: input blob name -> array, copied into the input blobs first
        (all of the net's inputs, each with the blob's batch size).
    The arrays returned are the blobs' own memory (no copy): the next
    forward overwrites them.
    """
    extra = list(blobs) if blobs else []
    start_ind = 0 if start is None else _layer_index(self, start, 'forward(start=...)')
    if end is None:
        end_ind = len(self._layer_names) - 1
        outputs = set(self.outputs + extra)
    else:
        end_ind = _layer_index(self, end, 'forward(end=...)')
        outputs = set(self.top_names[end] + extra)
    if kwargs:
        if set(kwargs) != set(self.inputs):
            raise Exception('Input blob arguments do not match net inputs.')
        for name, value in kwargs.items():
            blob = self.blobs[name]
            if value.shape[0] != blob.shape[0]:
                raise Exception('Input is not batch sized')
            blob.data[...] = value
    self._forward(start_ind, end_ind)
    blobs_by_name = self.blobs
    return {name: blobs_by_name[name].data for name in outputs}


def _net_backward(self, diffs=None, start=None, end=None, **kwargs):
    """Runs the net backward and returns {blob name: ndarray} of the input
    blobs' diffs.

    diffs: names of other blobs whose diffs to return too.
    start, end: names of the layer to start at (default the last) and the
        last one to run (inclusive); with end, that layer's bottoms' diffs
        are returned.
    kwargs: output blob name -> array of top diffs (all of the net's
        outputs); without them the loss layers' diffs drive backward.
    """
    extra = list(diffs) if diffs else []
    start_ind = len(self._layer_names) - 1 if start is None else _layer_index(self, start, 'backward(start=...)')
    if end is None:
        end_ind = 0
        outputs = set(self.inputs + extra)
    else:
        end_ind = _layer_index(self, end, 'backward(end=...)')
        outputs = set(self.bottom_names[end] + extra)
    if kwargs:
        if set(kwargs) != set(self.outputs):
            raise Exception('Top diff arguments do not match net outputs.')
        for name, value in kwargs.items():
            blob = self.blobs[name]
            if value.shape[0] != blob.shape[0]:
                raise Exception('Diff is not batch sized')
            blob.diff[...] = value
    self._backward(start_ind, end_ind)
    blobs_by_name = self.blobs
    return {name: blobs_by_name[name].diff for name in outputs}


def _net_batch(self, arrays):
    """Cuts {name: array} into the net's batches ({name: batch}), the last
    one padded with zeros.  Nothing for no arrays (forward_backward_all
    without output diffs: the loss drives backward)."""
    if not arrays:
        return
    count = len(next(iter(arrays.values())))
    batch = next(iter(self.blobs.values())).shape[0]
    full, rest = divmod(count, batch)
    for b in range(full):
        yield {name: value[b * batch:(b + 1) * batch] for name, value in arrays.items()}
    if rest:
        padded = {}
        for name, value in arrays.items():
            pad = np.zeros((batch - rest,) + value.shape[1:], dtype=value.dtype)
            padded[name] = np.concatenate([value[-rest:], pad])
        yield padded


def _collect(results, values):
    for name, value in values.items():
        if value.ndim == 0:  # a scalar (a loss): one value per batch
            results[name].append(value.copy())
        else:
            results[name].extend(value.copy())


def _trim(results, count):
    """Arrays as numpy arrays, per-sample ones without the last batch's
    padding (per-batch ones, such as losses, as they are)."""
    for name in results:
        results[name] = np.asarray(results[name])
    lengths = [len(v) for v in results.values() if v.ndim > 0]
    padded = max(lengths) if lengths else 0
    if padded > count:
        for name, value in results.items():
            if value.ndim > 0 and len(value) == padded:
                results[name] = value[:count]
    return results


def _net_forward_all(self, blobs=None, **kwargs):
    """forward() over any number of inputs, a batch at a time: returns
    {blob name: array of all the results} (the padding of the last batch
    removed; a scalar output such as a loss gives one value per batch)."""
    results = {name: [] for name in set(self.outputs + (list(blobs) if blobs else []))}
    for batch in self._batch(kwargs):
        _collect(results, self.forward(blobs=blobs, **batch))
    return _trim(results, len(next(iter(kwargs.values()))))


def _net_forward_backward_all(self, blobs=None, diffs=None, **kwargs):
    """forward() and backward() over any number of inputs (kwargs: input
    arrays and output diffs by name), a batch at a time: returns ({blob
    name: values}, {blob name: diffs}); without output diffs the loss
    drives backward."""
    outs = {name: [] for name in set(self.outputs + (list(blobs) if blobs else []))}
    grads = {name: [] for name in set(self.inputs + (list(diffs) if diffs else []))}
    forward_batches = self._batch({k: kwargs[k] for k in self.inputs if k in kwargs})
    backward_batches = self._batch({k: kwargs[k] for k in self.outputs if k in kwargs})
    for fb, bb in zip_longest(forward_batches, backward_batches, fillvalue={}):
        _collect(outs, self.forward(blobs=blobs, **fb))
        _collect(grads, self.backward(diffs=diffs, **bb))
    count = len(next(iter(kwargs.values())))
    return _trim(outs, count), _trim(grads, count)


def _net_set_input_arrays(self, data, labels):
    """Gives the net's first layer, a MemoryData layer, its arrays: data
    (N, C, H, W) float32 and labels (N) or (N, 1, 1, 1), N a multiple of
    the batch size.  The net uses them in place (keep them unchanged)."""
    if labels.ndim == 1:
        labels = np.ascontiguousarray(labels[:, np.newaxis, np.newaxis, np.newaxis])
    return self._set_input_arrays(data, labels)


Net.blobs = _net_blobs
Net.blob_loss_weights = _net_blob_loss_weights
Net.layer_dict = _net_layer_dict
Net.params = _net_params
Net.inputs = _net_inputs
Net.outputs = _net_outputs
Net.top_names = _names_by_layer(Net._top_ids, '_top_names')
Net.bottom_names = _names_by_layer(Net._bottom_ids, '_bottom_names')
Net.forward = _net_forward
Net.backward = _net_backward
Net.forward_all = _net_forward_all
Net.forward_backward_all = _net_forward_backward_all
Net.set_input_arrays = _net_set_input_arrays
Net._batch = _net_batch


# ---------------------------------------------------------------- solvers

def _solver_share_weights(self, net):
    """Makes net use this solver's train net weights (pycaffe's share_weights)."""
    net.share_with(self.net)


@property
def _solver_param(self):
    """The solver's SolverParameter as its file gives it (a caffe_pb2
    message; None for a data-parallel worker's solver)."""
    def make():
        filename = self.__dict__.get('_filename')
        if filename is None:
            return None
        from google.protobuf import text_format
        from .proto import caffe_pb2
        param = caffe_pb2.SolverParameter()
        with open(filename) as f:
            text_format.Merge(f.read(), param)
        return param
    return _cached(self, '_param', make)


Solver.share_weights = _solver_share_weights
Solver.param = _solver_param

_add_callback = Solver.add_callback


def _solver_add_callback(self, on_start, on_gradients=None):
    """add_callback(on_start, on_gradients): functions called (without
    arguments) at the start of every iteration and once its gradients are
    ready, before the update.  add_callback(nccl) with a NCCL object is
    accepted as pycaffe's is (the gradients are averaged already)."""
    if isinstance(on_start, NCCL):
        return None
    return _add_callback(self, on_start, on_gradients)


Solver.add_callback = _solver_add_callback


def _solver_add_nccl(self, nccl):
    """pycaffe's add_nccl: nothing more to do (NCCL joined the solver)."""
    if not isinstance(nccl, NCCL):
        raise TypeError('add_nccl takes a cortado.NCCL')


Solver.add_nccl = _solver_add_nccl


class SGDSolver(Solver):
    """Stochastic gradient descent with momentum (Caffe's SGDSolver)."""
    _solver_type = 'SGD'


class NesterovSolver(Solver):
    """Nesterov's accelerated gradient (Caffe's NesterovSolver)."""
    _solver_type = 'Nesterov'


class AdaGradSolver(Solver):
    """AdaGrad (Caffe's AdaGradSolver)."""
    _solver_type = 'AdaGrad'


class RMSPropSolver(Solver):
    """RMSProp (Caffe's RMSPropSolver)."""
    _solver_type = 'RMSProp'


class AdaDeltaSolver(Solver):
    """AdaDelta (Caffe's AdaDeltaSolver)."""
    _solver_type = 'AdaDelta'


class AdamSolver(Solver):
    """Adam (Caffe's AdamSolver)."""
    _solver_type = 'Adam'


_SOLVER_CLASSES = {cls._solver_type: cls for cls in
                   (SGDSolver, NesterovSolver, AdaGradSolver, RMSPropSolver, AdaDeltaSolver, AdamSolver)}


def get_solver(filename):
    """The solver a prototxt describes, of the class its `type` names."""
    solver = Solver(filename)
    solver.__class__ = _SOLVER_CLASSES.get(solver.type, Solver)
    return solver


# ---------------------------------------------------------------- Timer, NCCL

class Timer:
    """pycaffe's Timer: start(), stop(), and ms, the milliseconds between
    them (or until now while running)."""

    def __init__(self):
        self._start = None
        self._elapsed = 0.0
        self._running = False

    def start(self):
        self._start = _cortado._seconds()
        self._running = True

    def stop(self):
        if self._running:
            self._elapsed = _cortado._seconds() - self._start
            self._running = False

    @property
    def ms(self):
        if self._running:
            return (_cortado._seconds() - self._start) * 1000.0
        return self._elapsed * 1000.0

    @property
    def seconds(self):
        return self.ms / 1000.0


class NCCL:
    """pycaffe's NCCL(solver, uid): joins the solver, made after
    set_device, set_solver_count(n) and set_solver_rank(r), to the n
    workers (processes or threads, one GPU each) sharing uid, so that its
    gradients are averaged over them in every step.  Its parameters are
    broadcast from worker 0 at once (bcast() is kept for pycaffe's
    scripts).  See cortado.train for the same without the boilerplate."""

    def __init__(self, solver, uid):
        solver._join_nccl(bytes(uid), _cortado.solver_rank(), _cortado.solver_count())
        self.solver = solver

    @staticmethod
    def new_uid():
        """A fresh id (bytes) to hand to every worker."""
        return _cortado._new_nccl_uid()

    def bcast(self):
        """The parameters were broadcast when the solver joined."""
