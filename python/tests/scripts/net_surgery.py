"""Caffe's net_surgery notebook, step by step: designer filters set by
hand, then a classifier cast into a fully convolutional net (inner products
become convolutions) that scores every position of a larger input.  Usage:
    python net_surgery.py DEPLOY WEIGHTS OUT_DIR
Only the import differs from a pycaffe script."""
import sys

import numpy as np

import cortado as caffe

deploy, weights, out_dir = sys.argv[1:4]
caffe.set_mode_cpu()

# ---- designer filters: a convolution whose filters we write ourselves
with open(out_dir + '/conv.prototxt', 'w') as f:
    f.write('''name: "convolution"
input: "data"
input_shape { dim: 1 dim: 1 dim: 28 dim: 28 }
layer { name: "conv" type: "Convolution" bottom: "data" top: "conv"
  convolution_param { num_output: 3 kernel_size: 5 stride: 1
    weight_filler { type: "gaussian" std: 0.01 } bias_filler { type: "constant" value: 0 } } }
''')
net = caffe.Net(out_dir + '/conv.prototxt', caffe.TEST)
print('blobs', [(k, v.data.shape) for k, v in net.blobs.items()])
print('params', [(k, v[0].data.shape) for k, v in net.params.items()])
im = np.zeros((28, 28), dtype=np.float32)
im[:, 14:] = 1.0  # a vertical edge
net.blobs['data'].data[...] = im
net.params['conv'][0].data[...] = 0
net.params['conv'][0].data[0, 0, :, 2] = 1    # a blur: identity-ish column
net.params['conv'][0].data[1, 0, :, :2] = -1  # a vertical edge detector
net.params['conv'][0].data[1, 0, :, 3:] = 1
net.params['conv'][0].data[2, 0, 2, :2] = -1  # a horizontal edge detector
net.params['conv'][0].data[2, 0, 2, 3:] = 1
net.params['conv'][1].data[...] = 0
net.forward()
edges = net.blobs['conv'].data[0]
print('vertical edge response at the edge', float(edges[1, 10, 12]), 'away', float(edges[1, 10, 2]))
net.save(out_dir + '/designed.caffemodel')

# ---- casting a classifier into a fully convolutional net
net = caffe.Net(deploy, weights, caffe.TEST)
params = ['ip1', 'ip2']
fc_params = {pr: (net.params[pr][0].data, net.params[pr][1].data) for pr in params}
for fc in params:
    print('{} weights are {} dimensional and biases are {} dimensional'.format(
        fc, fc_params[fc][0].shape, fc_params[fc][1].shape))

with open(out_dir + '/lenet_full_conv.prototxt', 'w') as f:
    f.write('''name: "LeNetFullConv"
input: "data"
input_shape { dim: 1 dim: 1 dim: 36 dim: 36 }
layer { name: "conv1" type: "Convolution" bottom: "data" top: "conv1"
  convolution_param { num_output: 20 kernel_size: 5 stride: 1 } }
layer { name: "pool1" type: "Pooling" bottom: "conv1" top: "pool1"
  pooling_param { pool: MAX kernel_size: 2 stride: 2 } }
layer { name: "conv2" type: "Convolution" bottom: "pool1" top: "conv2"
  convolution_param { num_output: 50 kernel_size: 5 stride: 1 } }
layer { name: "pool2" type: "Pooling" bottom: "conv2" top: "pool2"
  pooling_param { pool: MAX kernel_size: 2 stride: 2 } }
layer { name: "ip1-conv" type: "Convolution" bottom: "pool2" top: "ip1-conv"
  convolution_param { num_output: 500 kernel_size: 4 } }
layer { name: "relu1" type: "ReLU" bottom: "ip1-conv" top: "ip1-conv" }
layer { name: "ip2-conv" type: "Convolution" bottom: "ip1-conv" top: "ip2-conv"
  convolution_param { num_output: 10 kernel_size: 1 } }
layer { name: "prob" type: "Softmax" bottom: "ip2-conv" top: "prob" }
''')
net_full_conv = caffe.Net(out_dir + '/lenet_full_conv.prototxt', weights, caffe.TEST)
params_full_conv = ['ip1-conv', 'ip2-conv']
conv_params = {pr: (net_full_conv.params[pr][0].data, net_full_conv.params[pr][1].data)
               for pr in params_full_conv}
for conv in params_full_conv:
    print('{} weights are {} dimensional and biases are {} dimensional'.format(
        conv, conv_params[conv][0].shape, conv_params[conv][1].shape))

# transplant: the inner products' weights, flattened, are the convolutions'
for pr, pr_conv in zip(params, params_full_conv):
    conv_params[pr_conv][0].flat = fc_params[pr][0].flat  # flat unrolls the arrays
    conv_params[pr_conv][1][...] = fc_params[pr][1]
net_full_conv.save(out_dir + '/lenet_full_conv.caffemodel')

# a 36 x 36 image with a one in its bottom-right 28 x 28 corner
big = np.zeros((36, 36), dtype=np.float32)
big[8 + 4:8 + 24, 8 + 12:8 + 16] = 255 / 256.
net_full_conv.blobs['data'].data[0, 0] = big
out = net_full_conv.forward()
scores = out['prob'][0]
print('score map', scores.shape, 'classes', scores.argmax(axis=0).tolist())
# the classifier on the same 28 x 28 crop agrees with that position of the map
crop = np.zeros((64, 1, 28, 28), dtype=np.float32)
crop[0, 0] = big[8:, 8:]
prob = net.forward(data=crop)['prob'][0]
print('classifier on the crop', int(prob.argmax()), 'map there', int(scores[:, 2, 2].argmax()),
      'max difference', float(np.abs(prob - scores[:, 2, 2]).max()))
