"""Caffe's 00-classification notebook, step by step, on a trained LeNet
(the notebook uses CaffeNet; the steps are the same).  Usage:
    python classification.py DEPLOY WEIGHTS IMAGE OUT_DIR
Only the import differs from a pycaffe script."""
import sys

import numpy as np

import cortado as caffe
from png import vis_square, write_png

model_def, model_weights, image_file, out_dir = sys.argv[1:5]

caffe.set_mode_cpu()
net = caffe.Net(model_def,      # defines the structure of the model
                model_weights,  # contains the trained weights
                caffe.TEST)     # use test mode (e.g., don't perform dropout)

# input preprocessing: 'data' is the name of the input blob == net.inputs[0]
transformer = caffe.io.Transformer({'data': net.blobs['data'].data.shape})
transformer.set_transpose('data', (2, 0, 1))   # move image channels to outermost dimension
transformer.set_raw_scale('data', 255 / 256.)  # the model works on [0, 255] / 256

# set the size of the input (we can skip this if we're happy with the default)
net.blobs['data'].reshape(50,        # batch size
                          1,         # gray image
                          28, 28)    # image size

image = caffe.io.load_image(image_file, color=False)
transformed_image = transformer.preprocess('data', image)

# copy the image data into the memory allocated for the net
net.blobs['data'].data[...] = transformed_image

# perform classification
output = net.forward()
output_prob = output['prob'][0]  # the output probability vector for the first image in the batch
print('predicted class is:', output_prob.argmax())

# sort top five predictions from softmax output
top_inds = output_prob.argsort()[::-1][:5]
print('probabilities and labels:', list(zip(output_prob[top_inds], top_inds)))

# for each layer, show the output shape
for layer_name, blob in net.blobs.items():
    print(layer_name + '\t' + str(blob.data.shape))
for layer_name, param in net.params.items():
    print(layer_name + '\t' + str(param[0].data.shape), str(param[1].data.shape))

# the parameters are a list of [weights, biases]
filters = net.params['conv1'][0].data
write_png(out_dir + '/conv1_filters.png', vis_square(filters.transpose(0, 2, 3, 1)[:, :, :, 0]))
feat = net.blobs['conv1'].data[0, :20]
write_png(out_dir + '/conv1_output.png', vis_square(feat))
print('conv1 filters', filters.shape, 'feature maps', feat.shape)
