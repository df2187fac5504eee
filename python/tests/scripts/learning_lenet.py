"""Caffe's 01-learning-lenet notebook, step by step: LeNet written with
NetSpec, its solver, then training by hand with solver.step while watching
the loss and the test accuracy.  Usage:
    python learning_lenet.py TRAIN_LMDB TEST_LMDB OUT_DIR
Only the import differs from a pycaffe script."""
import sys

import numpy as np

import cortado as caffe
from cortado import layers as L, params as P
from png import vis_square, write_png

train_lmdb, test_lmdb, out_dir = sys.argv[1:4]


def lenet(lmdb, batch_size):
    # our version of LeNet: a series of linear and simple nonlinear transformations
    n = caffe.NetSpec()
    n.data, n.label = L.Data(batch_size=batch_size, backend=P.Data.LMDB, source=lmdb,
                             transform_param=dict(scale=1. / 255), ntop=2)
    n.conv1 = L.Convolution(n.data, kernel_size=5, num_output=20, weight_filler=dict(type='xavier'))
    n.pool1 = L.Pooling(n.conv1, kernel_size=2, stride=2, pool=P.Pooling.MAX)
    n.conv2 = L.Convolution(n.pool1, kernel_size=5, num_output=50, weight_filler=dict(type='xavier'))
    n.pool2 = L.Pooling(n.conv2, kernel_size=2, stride=2, pool=P.Pooling.MAX)
    n.fc1 = L.InnerProduct(n.pool2, num_output=500, weight_filler=dict(type='xavier'))
    n.relu1 = L.ReLU(n.fc1, in_place=True)
    n.score = L.InnerProduct(n.relu1, num_output=10, weight_filler=dict(type='xavier'))
    n.loss = L.SoftmaxWithLoss(n.score, n.label)
    return n.to_proto()


with open(out_dir + '/lenet_auto_train.prototxt', 'w') as f:
    f.write(str(lenet(train_lmdb, 64)))
with open(out_dir + '/lenet_auto_test.prototxt', 'w') as f:
    f.write(str(lenet(test_lmdb, 100)))
with open(out_dir + '/lenet_auto_solver.prototxt', 'w') as f:
    f.write('''train_net: "%s/lenet_auto_train.prototxt"
test_net: "%s/lenet_auto_test.prototxt"
test_iter: 2
test_interval: 500
base_lr: 0.01
momentum: 0.9
weight_decay: 0.0005
lr_policy: "inv"
gamma: 0.0001
power: 0.75
display: 100
max_iter: 10000
snapshot: 5000
snapshot_prefix: "%s/lenet"
random_seed: 3
''' % (out_dir, out_dir, out_dir))

caffe.set_mode_cpu()
# load the solver and create train and test nets
solver = caffe.SGDSolver(out_dir + '/lenet_auto_solver.prototxt')

# each output is (batch size, feature dim, spatial dim)
print([(k, v.data.shape) for k, v in solver.net.blobs.items()])
# just print the weight sizes (we'll omit the biases)
print([(k, v[0].data.shape) for k, v in solver.net.params.items()])

solver.net.forward()  # train net
solver.test_nets[0].forward()  # test net (there can be more than one)
print('train labels', solver.net.blobs['label'].data[:8])
print('test labels', solver.test_nets[0].blobs['label'].data[:8])

solver.step(1)
first_grads = solver.net.params['conv1'][0].diff[:, 0]
write_png(out_dir + '/conv1_gradients.png', vis_square(first_grads))

niter = 60
test_interval = 30
train_loss = np.zeros(niter)
test_acc = np.zeros(int(np.ceil(niter / test_interval)))
output = np.zeros((niter, 8, 10))

# the main solver loop
for it in range(niter):
    solver.step(1)  # SGD by Caffe
    # store the train loss
    train_loss[it] = solver.net.blobs['loss'].data
    # store the output on the first test batch
    solver.test_nets[0].forward(start='conv1')
    output[it] = solver.test_nets[0].blobs['score'].data[:8]
    # run a full test every so often (Caffe can also do this for us and write to a log)
    if it % test_interval == 0:
        correct = 0
        for test_it in range(2):
            solver.test_nets[0].forward()
            correct += sum(solver.test_nets[0].blobs['score'].data.argmax(1)
                           == solver.test_nets[0].blobs['label'].data)
        test_acc[it // test_interval] = correct / 200.
        print('Iteration', it, 'testing... accuracy', test_acc[it // test_interval])

print('train loss first', train_loss[0], 'last', train_loss[-10:].mean())
print('final test accuracy', test_acc[-1])
write_png(out_dir + '/conv1_filters.png', vis_square(solver.net.params['conv1'][0].data[:, 0]))
