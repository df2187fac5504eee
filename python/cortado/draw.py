"""Drawing a net's graph with Graphviz through pydot (pycaffe's draw): layers
as boxes, blobs as octagons, edges from bottoms to tops.  Needs pydot
(``pip install pydot``) and, to render images, Graphviz's ``dot``.

The net is a NetParameter (cortado.proto.caffe_pb2), e.g. read with
google.protobuf.text_format from a prototxt.
"""
try:
    import pydot
except ImportError:  # the module still imports; its functions say what is missing
    pydot = None

__all__ = ['get_pydot_graph', 'draw_net', 'draw_net_to_file', 'get_layer_label', 'get_edge_label',
           'choose_color_by_layertype', 'LAYER_STYLE_DEFAULT', 'NEURON_LAYER_STYLE', 'BLOB_STYLE']

LAYER_STYLE_DEFAULT = {'shape': 'record', 'fillcolor': '#6495ED', 'style': 'filled'}
NEURON_LAYER_STYLE = {'shape': 'record', 'fillcolor': '#90EE90', 'style': 'filled'}
BLOB_STYLE = {'shape': 'octagon', 'fillcolor': '#E0E0E0', 'style': 'filled'}


def _need_pydot():
    if pydot is None:
        raise ImportError('cortado.draw needs pydot: pip install pydot (and Graphviz for images)')


def get_edge_label(layer):
    """The label of the edges out of a layer: its batch size for data
    layers, its output count for convolutions and inner products."""
    if layer.type == 'Data':
        return 'Batch ' + str(layer.data_param.batch_size)
    if layer.type in ('Convolution', 'Deconvolution'):
        return str(layer.convolution_param.num_output)
    if layer.type == 'InnerProduct':
        return str(layer.inner_product_param.num_output)
    return '""'


def get_layer_lr_mult(layer):
    """The learning-rate multipliers of a layer's blobs, for display."""
    if layer.type not in ('Convolution', 'Deconvolution', 'InnerProduct', 'BatchNorm', 'Scale', 'Bias',
                          'PReLU', 'Embed'):
        return None
    weight_mult = bias_mult = 1
    if len(layer.param) > 0:
        weight_mult = layer.param[0].lr_mult
    if len(layer.param) > 1:
        bias_mult = layer.param[1].lr_mult
    return weight_mult, bias_mult


def get_layer_label(layer, rankdir, display_lrm=False):
    """A record label: name, type, and the kernel, stride and pad of
    convolutions and poolings (and the lr multipliers with display_lrm)."""
    separator = ' ' if rankdir in ('TB', 'BT') else '\\n'
    label = '"{}{}({})'.format(layer.name, separator, layer.type)
    if layer.type in ('Convolution', 'Deconvolution', 'Pooling'):
        p = layer.pooling_param if layer.type == 'Pooling' else layer.convolution_param

        def first(values, default):
            if isinstance(values, int):
                return values
            return values[0] if len(values) else default
        kernel = first(p.kernel_size, 1)
        stride = first(p.stride, 1)
        pad = first(p.pad, 0)
        label += '{}kernel size: {}{}stride: {}{}pad: {}'.format(separator, kernel, separator, stride,
                                                                separator, pad)
    if display_lrm:
        mults = get_layer_lr_mult(layer)
        if mults is not None:
            label += '{}lr mult: {}, {}'.format(separator, mults[0], mults[1])
    return label + '"'


def choose_color_by_layertype(layertype):
    """Colours by kind of layer: convolutions, poolings, inner products."""
    if layertype in ('Convolution', 'Deconvolution'):
        return '#FF5050'
    if layertype == 'Pooling':
        return '#FF9900'
    if layertype == 'InnerProduct':
        return '#CC33FF'
    return '#6495ED'


def _included(layer, phase):
    if phase is None:
        return True
    rules = [r.phase for r in layer.include if r.HasField('phase')]
    if rules and phase not in rules:
        return False
    return not any(r.HasField('phase') and r.phase == phase for r in layer.exclude)


def get_pydot_graph(caffe_net, rankdir, label_edges=True, phase=None, display_lrm=False):
    """A pydot.Dot of the net (its layers of the given phase when phase is
    TRAIN or TEST, else all)."""
    _need_pydot()
    graph = pydot.Dot(caffe_net.name if caffe_net.name else 'Net', graph_type='digraph', rankdir=rankdir)
    nodes = {}
    edges = []
    for layer in caffe_net.layer:
        if not _included(layer, phase):
            continue
        node_name = '{}_{}'.format(layer.name, layer.type)
        style = NEURON_LAYER_STYLE if len(layer.bottom) == 1 and len(layer.top) == 1 and \
            layer.bottom[0] == layer.top[0] else dict(LAYER_STYLE_DEFAULT)
        if style is not NEURON_LAYER_STYLE:
            style['fillcolor'] = choose_color_by_layertype(layer.type)
        nodes[node_name] = pydot.Node(node_name, label=get_layer_label(layer, rankdir, display_lrm), **style)
        for bottom in layer.bottom:
            blob = bottom + '_blob'
            nodes.setdefault(blob, pydot.Node(blob, label=bottom, **BLOB_STYLE))
            edges.append((blob, node_name, None))
        for top in layer.top:
            blob = top + '_blob'
            nodes.setdefault(blob, pydot.Node(blob, label=top, **BLOB_STYLE))
            edges.append((node_name, blob, get_edge_label(layer) if label_edges else None))
    for node in nodes.values():
        graph.add_node(node)
    for src, dst, label in edges:
        if label is None:
            graph.add_edge(pydot.Edge(src, dst))
        else:
            graph.add_edge(pydot.Edge(src, dst, label=label))
    return graph


def draw_net(caffe_net, rankdir, ext='png', phase=None, display_lrm=False):
    """The graph rendered by Graphviz in format ext ('png', 'svg', 'dot', ...), as bytes."""
    return get_pydot_graph(caffe_net, rankdir, phase=phase, display_lrm=display_lrm).create(format=ext)


def draw_net_to_file(caffe_net, filename, rankdir='LR', phase=None, display_lrm=False):
    """Writes the rendered graph to filename, its format from the extension."""
    ext = filename[filename.rfind('.') + 1:]
    with open(filename, 'wb') as f:
        f.write(draw_net(caffe_net, rankdir, ext, phase, display_lrm))

