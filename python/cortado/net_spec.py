"""Writing nets in Python (pycaffe's net_spec): ``L.Convolution(bottom,
kernel_size=5, num_output=20)`` makes a layer, a NetSpec names the tops,
and to_proto() gives the NetParameter::

    from cortado import layers as L, params as P, NetSpec
    n = NetSpec()
    n.data, n.label = L.Data(batch_size=64, backend=P.Data.LMDB, source='train_lmdb',
                             transform_param=dict(scale=1. / 255), ntop=2)
    n.conv1 = L.Convolution(n.data, kernel_size=5, num_output=20,
                            weight_filler=dict(type='xavier'))
    ...
    print(n.to_proto())

Keyword arguments go to the layer's own parameter message (conv's
convolution_param), unless they end in 'param' or belong to
LayerParameter itself (loss_weight, include, ...).  Lists fill repeated
fields, dicts fill messages; ntop sets how many tops, in_place=True makes
the top the bottom.
"""
from collections import Counter, OrderedDict

from .proto import caffe_pb2

__all__ = ['layers', 'params', 'NetSpec', 'to_proto', 'Top', 'Function', 'assign_proto',
           'param_name_dict']


def param_name_dict():
    """{layer type: the stem of its parameter field}, from LayerParameter's
    fields: e.g. 'Convolution' -> 'convolution', 'InnerProduct' ->
    'inner_product'."""
    layer = caffe_pb2.LayerParameter()
    stems = {}
    for field in layer.DESCRIPTOR.fields:
        if not field.name.endswith('_param') or field.message_type is None:
            continue
        type_name = field.message_type.name
        if type_name.endswith('Parameter'):
            stems[type_name[:-len('Parameter')]] = field.name[:-len('_param')]
    return stems


_param_names = param_name_dict()


def to_proto(*tops):
    """The NetParameter of every layer needed to compute the given tops."""
    layers = OrderedDict()
    autonames = Counter()
    for top in tops:
        top.fn._to_proto(layers, {}, autonames)
    net = caffe_pb2.NetParameter()
    net.layer.extend(layers.values())
    return net


def assign_proto(proto, name, val):
    """Sets field `name` of message proto from a Python value: lists fill
    repeated fields (a single value goes into a repeated field as a list of
    one), dicts fill messages (recursively), anything else is assigned."""
    is_repeated = hasattr(getattr(proto, name), 'extend')
    if is_repeated and not isinstance(val, list):
        val = [val]
    if isinstance(val, list):
        if val and isinstance(val[0], dict):
            for item in val:
                sub = getattr(proto, name).add()
                for k, v in item.items():
                    assign_proto(sub, k, v)
        else:
            getattr(proto, name).extend(val)
    elif isinstance(val, dict):
        for k, v in val.items():
            assign_proto(getattr(proto, name), k, v)
    else:
        setattr(proto, name, val)


class Top:
    """One output blob of a layer (the n-th top of fn)."""

    def __init__(self, fn, n):
        self.fn = fn
        self.n = n

    def to_proto(self):
        """The NetParameter of the layers this top needs."""
        return to_proto(self)

    def _to_proto(self, layers, names, autonames):
        return self.fn._to_proto(layers, names, autonames)


class Function:
    """A layer: its type, its inputs (Tops) and its parameters."""

    def __init__(self, type_name, inputs, params):
        self.type_name = type_name
        for i, inp in enumerate(inputs):
            if not isinstance(inp, Top):
                raise TypeError('%s input %d is not a Top (type is %s)' % (type_name, i, type(inp)))
        self.inputs = inputs
        self.params = dict(params)
        self.ntop = self.params.pop('ntop', 1)
        self.in_place = self.params.pop('in_place', False)
        self.tops = tuple(Top(self, n) for n in range(self.ntop))

    def _get_name(self, names, autonames):
        if self not in names:
            if self.ntop > 0:
                names[self] = self._get_top_name(self.tops[0], names, autonames)
            else:
                autonames[self.type_name] += 1
                names[self] = self.type_name + str(autonames[self.type_name])
        return names[self]

    def _get_top_name(self, top, names, autonames):
        if top not in names:
            autonames[top.fn.type_name] += 1
            names[top] = top.fn.type_name + str(autonames[top.fn.type_name])
        return names[top]

    def _to_proto(self, layers, names, autonames):
        if self in layers:
            return
        bottoms = []
        for inp in self.inputs:
            inp._to_proto(layers, names, autonames)
            bottoms.append(layers[inp.fn].top[inp.n])
        layer = caffe_pb2.LayerParameter()
        layer.type = self.type_name
        layer.bottom.extend(bottoms)
        if self.in_place:
            layer.top.extend(layer.bottom)
        else:
            for top in self.tops:
                layer.top.append(self._get_top_name(top, names, autonames))
        layer.name = self._get_name(names, autonames)
        for k, v in self.params.items():
            if k.endswith('param'):
                assign_proto(layer, k, v)
                continue
            try:
                assign_proto(getattr(layer, _param_names[self.type_name] + '_param'), k, v)
            except (AttributeError, KeyError):
                assign_proto(layer, k, v)
        layers[self] = layer


class NetSpec:
    """Named tops: assign them as attributes (or items); to_proto() gives
    the net that computes all of them, each top named as assigned."""

    def __init__(self):
        super().__setattr__('tops', OrderedDict())

    def __setattr__(self, name, value):
        self.tops[name] = value

    def __getattr__(self, name):
        try:
            return self.tops[name]
        except KeyError:
            raise AttributeError(name) from None

    def __setitem__(self, key, value):
        self.__setattr__(key, value)

    def __getitem__(self, item):
        return self.tops[item]

    def __delitem__(self, name):
        del self.tops[name]

    def keys(self):
        return list(self.tops.keys())

    def vals(self):
        return list(self.tops.values())

    def update(self, name, value):
        self.tops[name].update(value)

    def to_proto(self):
        names = {v: k for k, v in self.tops.items()}
        autonames = Counter()
        layers = OrderedDict()
        for top in self.tops.values():
            top._to_proto(layers, names, autonames)
        net = caffe_pb2.NetParameter()
        net.layer.extend(layers.values())
        return net


class Layers:
    """L.Type(*bottoms, **params): a layer of that type; returns its top
    (a Top), its tops (a tuple, for ntop > 1) or, for ntop=0, the layer."""

    def __getattr__(self, name):
        def layer_fn(*args, **kwargs):
            fn = Function(name, args, kwargs)
            if fn.ntop == 0:
                return fn
            if fn.ntop == 1:
                return fn.tops[0]
            return fn.tops
        return layer_fn


class Parameters:
    """P.Type.CONSTANT: the enum values of a parameter message, e.g.
    P.Pooling.MAX or P.Data.LMDB."""

    def __getattr__(self, name):
        message = getattr(caffe_pb2, name + 'Parameter')

        class Param:
            def __getattr__(self, param_name):
                return getattr(message, param_name)
        return Param()


layers = Layers()
params = Parameters()
