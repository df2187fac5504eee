#!/usr/bin/env python3
"""Public model-zoo nets, laid out the way their authors' Caffe files lay them out, for benchmarks.

  python3 bench/zoo_nets.py OUT_DIR [--batch 64]

Writes OUT_DIR/{resnet101,resnet152,squeezenet_v1.1,mobilenet_v1,vgg16}.prototxt.  The layers, their
names, parameters and in-place tops follow the published deploy files:

- ResNet-101 and ResNet-152 (the original MSRA release): bias-free convolutions, every BatchNorm with
  `use_global_stats: true` (frozen statistics, as these nets are fine-tuned), a Scale with a bias after
  it, all three in place on the convolution's top; the stride of a stage's first block on its 1x1
  branch2a convolution; bottlenecks of 3, 4 (101) or 8 (152), 23 or 36, and 3 blocks.
- SqueezeNet v1.1: fire modules (squeeze 1x1, expand 1x1 and 3x3 joined by Concat), conv10 as the
  classifier, global average pooling.
- MobileNet v1 (the widely used Caffe port): depthwise convolutions as `group` = channels with
  `engine: CAFFE`, BatchNorm to a new top in training mode (statistics updated, lr_mult 0), Scale and
  ReLU in place, the classifier a 1x1 convolution.
- VGG-16: 13 3x3 convolutions with ReLU in place, five max pools, fc6/fc7 with Dropout, fc8.

A deploy file has no data or loss: here a Data layer (read only under --dummy_data, its source does
not exist) gives `data` and `label`, and SoftmaxWithLoss replaces the deploy file's Softmax, so that
the nets train ("given a loss").  Nothing else is changed.
"""
import argparse
import os


class Net:
    def __init__(self, name, batch):
        self.out = [f'name: "{name}"\n']
        self.layer('data', 'Data', [], ['data', 'label'],
                   'include { phase: TRAIN }\n'
                   'transform_param { crop_size: 224 mean_value: 104 mean_value: 117 mean_value: 123 }\n'
                   f'data_param {{ source: "unused-under-dummy-data" backend: LMDB batch_size: {batch} }}')

    def layer(self, name, kind, bottoms, tops, body=''):
        s = ['layer {', f'  name: "{name}"', f'  type: "{kind}"']
        s += [f'  bottom: "{b}"' for b in bottoms] + [f'  top: "{t}"' for t in tops]
        s += ['  ' + line for line in body.splitlines() if line]
        self.out.append('\n'.join(s) + '\n}\n')

    def conv(self, name, bottom, top, n, k, stride=1, pad=0, bias=True, group=1, extra='', param=''):
        p = f'num_output: {n} kernel_size: {k} stride: {stride} pad: {pad}'
        if not bias: p += ' bias_term: false'
        if group > 1: p += f' group: {group}'
        self.layer(name, 'Convolution', [bottom], [top], param + f'convolution_param {{ {p}{extra} }}')

    def loss(self, bottom):
        self.layer('loss', 'SoftmaxWithLoss', [bottom, 'label'], ['loss'])

    def text(self):
        return ''.join(self.out)


def resnet(depth, batch):
    blocks = {101: [3, 4, 23, 3], 152: [3, 8, 36, 3]}[depth]
    net = Net(f'ResNet-{depth}', batch)

    def conv_bn(name, suffix, bottom, n, k, stride, pad, relu):
        top = f'res{name}_{suffix}'
        net.conv(top, bottom, top, n, k, stride, pad, bias=False)
        net.layer(f'bn{name}_{suffix}', 'BatchNorm', [top], [top], 'batch_norm_param { use_global_stats: true }')
        net.layer(f'scale{name}_{suffix}', 'Scale', [top], [top], 'scale_param { bias_term: true }')
        if relu: net.layer(f'{top}_relu', 'ReLU', [top], [top])
        return top

    net.conv('conv1', 'data', 'conv1', 64, 7, 2, 3, bias=False)
    net.layer('bn_conv1', 'BatchNorm', ['conv1'], ['conv1'], 'batch_norm_param { use_global_stats: true }')
    net.layer('scale_conv1', 'Scale', ['conv1'], ['conv1'], 'scale_param { bias_term: true }')
    net.layer('conv1_relu', 'ReLU', ['conv1'], ['conv1'])
    net.layer('pool1', 'Pooling', ['conv1'], ['pool1'], 'pooling_param { kernel_size: 3 stride: 2 pool: MAX }')
    x = 'pool1'
    for stage, count in enumerate(blocks, start=2):
        width = 64 << (stage - 2)
        for i in range(count):
            # the first block of a stage is 'a'; ResNet-101/152 name the rest b1, b2, ... (the 50 names b, c)
            name = f'{stage}a' if i == 0 else f'{stage}b{i}'
            stride = 2 if i == 0 and stage > 2 else 1
            short = conv_bn(name, 'branch1', x, 4 * width, 1, stride, 0, False) if i == 0 else x
            y = conv_bn(name, 'branch2a', x, width, 1, stride, 0, True)
            y = conv_bn(name, 'branch2b', y, width, 3, 1, 1, True)
            y = conv_bn(name, 'branch2c', y, 4 * width, 1, 1, 0, False)
            net.layer(f'res{name}', 'Eltwise', [short, y], [f'res{name}'])
            net.layer(f'res{name}_relu', 'ReLU', [f'res{name}'], [f'res{name}'])
            x = f'res{name}'
    net.layer('pool5', 'Pooling', [x], ['pool5'], 'pooling_param { kernel_size: 7 stride: 1 pool: AVE }')
    net.layer('fc1000', 'InnerProduct', ['pool5'], ['fc1000'], 'inner_product_param { num_output: 1000 }')
    net.loss('fc1000')
    return net.text()


def squeezenet(batch):
    net = Net('SqueezeNet_v1.1', batch)
    fill = ' weight_filler { type: "xavier" }'
    net.conv('conv1', 'data', 'conv1', 64, 3, 2, extra=fill)
    net.layer('relu_conv1', 'ReLU', ['conv1'], ['conv1'])
    net.layer('pool1', 'Pooling', ['conv1'], ['pool1'], 'pooling_param { pool: MAX kernel_size: 3 stride: 2 }')
    x = 'pool1'
    plan = [(2, 16, 64), (3, 16, 64), 'pool3', (4, 32, 128), (5, 32, 128), 'pool5', (6, 48, 192),
            (7, 48, 192), (8, 64, 256), (9, 64, 256)]
    for item in plan:
        if isinstance(item, str):
            net.layer(item, 'Pooling', [x], [item], 'pooling_param { pool: MAX kernel_size: 3 stride: 2 }')
            x = item
            continue
        i, s, e = item
        f = f'fire{i}'
        net.conv(f'{f}/squeeze1x1', x, f'{f}/squeeze1x1', s, 1, extra=fill)
        net.layer(f'{f}/relu_squeeze1x1', 'ReLU', [f'{f}/squeeze1x1'], [f'{f}/squeeze1x1'])
        net.conv(f'{f}/expand1x1', f'{f}/squeeze1x1', f'{f}/expand1x1', e, 1, extra=fill)
        net.layer(f'{f}/relu_expand1x1', 'ReLU', [f'{f}/expand1x1'], [f'{f}/expand1x1'])
        net.conv(f'{f}/expand3x3', f'{f}/squeeze1x1', f'{f}/expand3x3', e, 3, pad=1, extra=fill)
        net.layer(f'{f}/relu_expand3x3', 'ReLU', [f'{f}/expand3x3'], [f'{f}/expand3x3'])
        net.layer(f'{f}/concat', 'Concat', [f'{f}/expand1x1', f'{f}/expand3x3'], [f'{f}/concat'])
        x = f'{f}/concat'
    net.layer('drop9', 'Dropout', [x], [x], 'dropout_param { dropout_ratio: 0.5 }')
    net.conv('conv10', x, 'conv10', 1000, 1,
             extra=' weight_filler { type: "gaussian" mean: 0.0 std: 0.01 }')
    net.layer('relu_conv10', 'ReLU', ['conv10'], ['conv10'])
    net.layer('pool10', 'Pooling', ['conv10'], ['pool10'], 'pooling_param { pool: AVE global_pooling: true }')
    net.loss('pool10')
    return net.text()


def mobilenet(batch):
    net = Net('MOBILENET', batch)
    frozen_params = 'param { lr_mult: 0 decay_mult: 0 }\n' * 3
    weights = 'param { lr_mult: 1 decay_mult: 1 }\n'
    msra = ' weight_filler { type: "msra" }'

    def conv_bn(name, bottom, n, k, stride, pad, group=1):
        extra = (' engine: CAFFE' if group > 1 else '') + msra
        net.conv(name, bottom, name, n, k, stride, pad, bias=False, group=group, extra=extra, param=weights)
        net.layer(f'{name}/bn', 'BatchNorm', [name], [f'{name}/bn'], frozen_params)
        net.layer(f'{name}/scale', 'Scale', [f'{name}/bn'], [f'{name}/bn'],
                  'scale_param { filler { value: 1 } bias_term: true bias_filler { value: 0 } }')
        relu = 'relu' + name[4:] if name != 'conv1' else 'relu1'
        net.layer(relu, 'ReLU', [f'{name}/bn'], [f'{name}/bn'])
        return f'{name}/bn'

    x = conv_bn('conv1', 'data', 32, 3, 2, 1)
    c = 32
    # (block name, output channels, depthwise stride)
    plan = [('2_1', 64, 1), ('2_2', 128, 2), ('3_1', 128, 1), ('3_2', 256, 2), ('4_1', 256, 1), ('4_2', 512, 2),
            ('5_1', 512, 1), ('5_2', 512, 1), ('5_3', 512, 1), ('5_4', 512, 1), ('5_5', 512, 1), ('5_6', 1024, 2),
            ('6', 1024, 1)]
    for name, out, stride in plan:
        x = conv_bn(f'conv{name}/dw', x, c, 3, stride, 1, group=c)
        x = conv_bn(f'conv{name}/sep', x, out, 1, 1, 0)
        c = out
    net.layer('pool6', 'Pooling', [x], ['pool6'], 'pooling_param { pool: AVE global_pooling: true }')
    net.conv('fc7', 'pool6', 'fc7', 1000, 1, extra=msra + ' bias_filler { type: "constant" value: 0 }',
             param=weights + 'param { lr_mult: 2 decay_mult: 0 }\n')
    net.loss('fc7')
    return net.text()


def vgg16(batch):
    net = Net('VGG_ILSVRC_16_layers', batch)
    x = 'data'
    for block, (convs, width) in enumerate([(2, 64), (2, 128), (3, 256), (3, 512), (3, 512)], start=1):
        for i in range(1, convs + 1):
            name = f'conv{block}_{i}'
            net.conv(name, x, name, width, 3, pad=1)
            net.layer(f'relu{block}_{i}', 'ReLU', [name], [name])
            x = name
        net.layer(f'pool{block}', 'Pooling', [x], [f'pool{block}'], 'pooling_param { pool: MAX kernel_size: 2 stride: 2 }')
        x = f'pool{block}'
    for fc in ('fc6', 'fc7'):
        net.layer(fc, 'InnerProduct', [x], [fc], 'inner_product_param { num_output: 4096 }')
        net.layer(f'relu{fc[2:]}', 'ReLU', [fc], [fc])
        net.layer(f'drop{fc[2:]}', 'Dropout', [fc], [fc], 'dropout_param { dropout_ratio: 0.5 }')
        x = fc
    net.layer('fc8', 'InnerProduct', [x], ['fc8'], 'inner_product_param { num_output: 1000 }')
    net.loss('fc8')
    return net.text()


NETS = {
    'resnet101': lambda b: resnet(101, b),
    'resnet152': lambda b: resnet(152, b),
    'squeezenet_v1.1': squeezenet,
    'mobilenet_v1': mobilenet,
    'vgg16': vgg16,
}


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument('out_dir')
    ap.add_argument('--batch', type=int, default=64)
    a = ap.parse_args()
    os.makedirs(a.out_dir, exist_ok=True)
    for name, make in NETS.items():
        with open(os.path.join(a.out_dir, name + '.prototxt'), 'w') as f:
            f.write(make(a.batch))


if __name__ == '__main__':
    main()
