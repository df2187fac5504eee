"""Coordinate maps between the tops of a net written with net_spec, and the
Crop layer that aligns one top with another (pycaffe's coord_map, used by
fully convolutional nets to crop upsampled scores back onto the input).

A map is (axis, scale, shift): output coordinate = input coordinate *
scale + shift along the spatial axes from `axis` on; (None, 1, 0) is the
identity of layers that leave coordinates alone.
"""
import numpy as np

from .net_spec import layers as L

__all__ = ['PASS_THROUGH_LAYERS', 'conv_params', 'crop_params', 'coord_map', 'compose', 'inverse',
           'coord_map_from_to', 'crop', 'UndefinedMapException', 'AxisMismatchException']

PASS_THROUGH_LAYERS = ['AbsVal', 'BatchNorm', 'Bias', 'BNLL', 'Dropout', 'Eltwise', 'ELU', 'Log', 'LRN',
                       'Exp', 'MVN', 'Power', 'ReLU', 'PReLU', 'Scale', 'Sigmoid', 'Split', 'TanH',
                       'Threshold']


class UndefinedMapException(Exception):
    """The layer has no coordinate map (it mixes positions, as
    InnerProduct)."""


class AxisMismatchException(Exception):
    """Two maps act on different axes."""


def conv_params(fn):
    """(axis, stride, effective kernel size, pad) of a Convolution,
    Deconvolution, Im2col or Pooling layer (the legacy _h/_w fields are
    not supported)."""
    params = fn.params.get('convolution_param', fn.params)
    legacy = {'pad_h', 'pad_w', 'kernel_h', 'kernel_w', 'stride_h', 'stride_w'}
    if legacy & set(fn.params):
        raise ValueError('cropping does not support legacy _h/_w params')
    axis = params.get('axis', 1)
    kernel = np.array(params['kernel_size'], ndmin=1)
    dilation = np.array(params.get('dilation', 1), ndmin=1)
    return (axis, np.array(params.get('stride', 1), ndmin=1), (kernel - 1) * dilation + 1,
            np.array(params.get('pad', 0), ndmin=1))


def crop_params(fn):
    """(axis, offset) of a Crop layer (axis 2 by default: N, C kept)."""
    params = fn.params.get('crop_param', fn.params)
    return params.get('axis', 2), np.array(params.get('offset', 0), ndmin=1)


def coord_map(fn):
    """The map from a layer's bottom to its top."""
    if fn.type_name in ('Convolution', 'Pooling', 'Im2col'):
        axis, stride, kernel, pad = conv_params(fn)
        return axis, 1 / stride, (pad - (kernel - 1) / 2) / stride
    if fn.type_name == 'Deconvolution':
        axis, stride, kernel, pad = conv_params(fn)
        return axis, stride, (kernel - 1) / 2 - pad
    if fn.type_name in PASS_THROUGH_LAYERS:
        return None, 1, 0
    if fn.type_name == 'Crop':
        axis, offset = crop_params(fn)
        return axis - 1, 1, -offset
    raise UndefinedMapException(fn.type_name)


def compose(base_map, next_map):
    """base_map followed by next_map: scales multiply, next's shift is
    scaled by base's scale."""
    ax1, a1, b1 = base_map
    ax2, a2, b2 = next_map
    if ax1 is None:
        ax = ax2
    elif ax2 is None or ax1 == ax2:
        ax = ax1
    else:
        raise AxisMismatchException((ax1, ax2))
    return ax, a1 * a2, a1 * b2 + b1


def inverse(coord_map):
    """The map back (de-scaled, un-shifted)."""
    ax, a, b = coord_map
    return ax, 1 / a, -b / a


def _mappable_bottoms(top):
    # a Crop maps its first bottom only (the second gives the size)
    bottoms = top.fn.inputs
    return bottoms[:1] if top.fn.type_name == 'Crop' else bottoms


def coord_map_from_to(top_from, top_to):
    """The map from top_from's coordinates to top_to's, through the nearest
    common ancestor of both.  RuntimeError when they are not connected by
    layers with maps."""
    from_maps = {top_from: (None, 1, 0)}
    frontier = {top_from}
    while frontier:
        top = frontier.pop()
        try:
            for bottom in _mappable_bottoms(top):
                from_maps[bottom] = compose(from_maps[top], coord_map(top.fn))
                frontier.add(bottom)
        except UndefinedMapException:
            pass
    to_maps = {top_to: (None, 1, 0)}
    frontier = {top_to}
    while frontier:
        top = frontier.pop()
        if top in from_maps:
            return compose(to_maps[top], inverse(from_maps[top]))
        try:
            for bottom in _mappable_bottoms(top):
                to_maps[bottom] = compose(to_maps[top], coord_map(top.fn))
                frontier.add(bottom)
        except UndefinedMapException:
            continue
    raise RuntimeError('Could not compute map between tops; are they connected by spatial layers?')


def crop(top_from, top_to):
    """A Crop layer that crops top_from to top_to's coordinates (same scale,
    a whole, non-negative offset)."""
    ax, a, b = coord_map_from_to(top_from, top_to)
    if not (np.asarray(a) == 1).all():
        raise AssertionError('scale mismatch on crop (a = {})'.format(a))
    if not (np.asarray(b) <= 0).all():
        raise AssertionError('cannot crop negative offset (b = {})'.format(b))
    if not (np.round(b) == b).all():
        raise AssertionError('cannot crop noninteger offset (b = {})'.format(b))
    return L.Crop(top_from, top_to,
                  crop_param=dict(axis=ax + 1, offset=[int(v) for v in -np.round(b).astype(int)]))
