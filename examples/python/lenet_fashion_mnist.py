"""LeNet on Fashion-MNIST from Python, the pycaffe way, with Cortado:

  1. reads Fashion-MNIST's idx files (Debian's dataset-fashion-mnist) into
     numpy arrays;
  2. writes LeNet with NetSpec (MemoryData inputs fed by set_input_arrays);
  3. trains it with an SGDSolver, stepping from Python and testing every
     few hundred iterations;
  4. plots the first layer's filters to a PNG (conv1_filters.png);
  5. does net surgery: casts the fully connected layers into convolutions,
     copies the trained weights over, and classifies four test images tiled
     into one 56 x 56 picture in a single pass, which must agree with the
     classifier on each image.

    python examples/python/lenet_fashion_mnist.py [--iters 2000] [--gpu 0] [--out DIR]

With `pip install .` done (or PYTHONPATH=build/python after `make build`).
"""
import argparse
import gzip
import os
import struct
import sys
import time

import numpy as np

import cortado as caffe
from cortado import layers as L, params as P

CLASSES = ['T-shirt/top', 'Trouser', 'Pullover', 'Dress', 'Coat', 'Sandal', 'Shirt', 'Sneaker', 'Bag',
           'Ankle boot']


def read_idx(path, limit=None):
    """An idx file (gzipped or not) as a uint8 array."""
    opener = gzip.open if path.endswith('.gz') else open
    with opener(path, 'rb') as f:
        magic = struct.unpack('>I', f.read(4))[0]
        dims = struct.unpack('>' + 'I' * (magic & 0xFF), f.read(4 * (magic & 0xFF)))
        n = dims[0] if limit is None else min(limit, dims[0])
        size = int(np.prod(dims[1:])) if len(dims) > 1 else 1
        return np.frombuffer(f.read(n * size), dtype=np.uint8).reshape((n,) + tuple(dims[1:]))


def load_split(data_dir, prefix, limit=None):
    images = read_idx(os.path.join(data_dir, prefix + '-images-idx3-ubyte.gz'), limit)
    labels = read_idx(os.path.join(data_dir, prefix + '-labels-idx1-ubyte.gz'), limit)
    x = (images.astype(np.float32) / 256.0)[:, np.newaxis]  # N x 1 x 28 x 28, as Caffe's MNIST scale
    return np.ascontiguousarray(x), labels.astype(np.float32)


def lenet(batch_size, deploy=False):
    n = caffe.NetSpec()
    if deploy:
        n.data = L.Input(shape=dict(dim=[batch_size, 1, 28, 28]))
    else:
        n.data, n.label = L.MemoryData(batch_size=batch_size, channels=1, height=28, width=28, ntop=2)
    n.conv1 = L.Convolution(n.data, kernel_size=5, num_output=20, weight_filler=dict(type='xavier'))
    n.pool1 = L.Pooling(n.conv1, kernel_size=2, stride=2, pool=P.Pooling.MAX)
    n.conv2 = L.Convolution(n.pool1, kernel_size=5, num_output=50, weight_filler=dict(type='xavier'))
    n.pool2 = L.Pooling(n.conv2, kernel_size=2, stride=2, pool=P.Pooling.MAX)
    n.ip1 = L.InnerProduct(n.pool2, num_output=500, weight_filler=dict(type='xavier'))
    n.relu1 = L.ReLU(n.ip1, in_place=True)
    n.ip2 = L.InnerProduct(n.relu1, num_output=10, weight_filler=dict(type='xavier'))
    if deploy:
        n.prob = L.Softmax(n.ip2)
    else:
        n.loss = L.SoftmaxWithLoss(n.ip2, n.label)
        n.accuracy = L.Accuracy(n.ip2, n.label)
    return n.to_proto()


def full_conv_lenet(side):
    """LeNet with ip1 and ip2 as convolutions (4 x 4 and 1 x 1), for inputs
    of side x side."""
    n = caffe.NetSpec()
    n.data = L.Input(shape=dict(dim=[1, 1, side, side]))
    n.conv1 = L.Convolution(n.data, kernel_size=5, num_output=20)
    n.pool1 = L.Pooling(n.conv1, kernel_size=2, stride=2, pool=P.Pooling.MAX)
    n.conv2 = L.Convolution(n.pool1, kernel_size=5, num_output=50)
    n.pool2 = L.Pooling(n.conv2, kernel_size=2, stride=2, pool=P.Pooling.MAX)
    n['ip1-conv'] = L.Convolution(n.pool2, kernel_size=4, num_output=500)
    n.relu1 = L.ReLU(n['ip1-conv'], in_place=True)
    n['ip2-conv'] = L.Convolution(n.relu1, kernel_size=1, num_output=10)
    n.prob = L.Softmax(n['ip2-conv'])
    return n.to_proto()


def tile(filters, zoom=8):
    """N x h x w filters, each normalised, in a square grid with 1-pixel
    gaps, each pixel zoomed."""
    count, h, w = filters.shape
    lo = filters.min(axis=(1, 2), keepdims=True)
    hi = filters.max(axis=(1, 2), keepdims=True)
    filters = (filters - lo) / np.maximum(hi - lo, 1e-12)
    side = int(np.ceil(np.sqrt(count)))
    grid = np.ones((side * (h + 1) + 1, side * (w + 1) + 1), dtype=np.float32)
    for i in range(count):
        r, c = divmod(i, side)
        grid[1 + r * (h + 1):1 + r * (h + 1) + h, 1 + c * (w + 1):1 + c * (w + 1) + w] = filters[i]
    return np.kron(grid, np.ones((zoom, zoom), dtype=np.float32))


def accuracy(net, x, y):
    """Top-1 accuracy of a MemoryData net over whole batches of x, y."""
    batch = net.blobs['data'].num
    count = (len(x) // batch) * batch
    net.set_input_arrays(x[:count], y[:count])
    correct = 0
    for _ in range(count // batch):
        net.forward()
        correct += int((net.blobs['ip2'].data.argmax(axis=1) == net.blobs['label'].data).sum())
    return correct / float(count)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    parser.add_argument('--data', default=os.environ.get('FASHION_MNIST_DIR', '/usr/share/datasets/fashion-mnist'))
    parser.add_argument('--out', default=os.path.join(os.path.dirname(os.path.abspath(__file__)), 'out'))
    parser.add_argument('--iters', type=int, default=2000)
    parser.add_argument('--test_interval', type=int, default=500)
    parser.add_argument('--train_limit', type=int, default=None, help='use the first N training images')
    parser.add_argument('--gpu', type=int, default=None, help='train on this GPU (default: the CPU)')
    parser.add_argument('--min_accuracy', type=float, default=0.0,
                        help='exit 1 when the final test accuracy is below this')
    args = parser.parse_args(argv)
    if not os.path.isfile(os.path.join(args.data, 'train-images-idx3-ubyte.gz')):
        sys.exit('Fashion-MNIST is not in {} (Debian: apt-get install dataset-fashion-mnist)'.format(args.data))
    os.makedirs(args.out, exist_ok=True)
    caffe.init_log(1)
    if args.gpu is not None:
        caffe.set_device(args.gpu)
        caffe.set_mode_gpu()
    caffe.set_random_seed(1)

    # 1. the data
    train_x, train_y = load_split(args.data, 'train', args.train_limit)
    test_x, test_y = load_split(args.data, 't10k')
    print('train {} images, test {}'.format(len(train_x), len(test_x)))

    # 2. the nets and the solver
    paths = {name: os.path.join(args.out, name) for name in
             ('lenet_train.prototxt', 'lenet_test.prototxt', 'lenet_solver.prototxt', 'lenet_deploy.prototxt',
              'lenet_full_conv.prototxt')}
    with open(paths['lenet_train.prototxt'], 'w') as f:
        f.write(str(lenet(64)))
    with open(paths['lenet_test.prototxt'], 'w') as f:
        f.write(str(lenet(100)))
    with open(paths['lenet_deploy.prototxt'], 'w') as f:
        f.write(str(lenet(1, deploy=True)))
    with open(paths['lenet_solver.prototxt'], 'w') as f:
        f.write('''train_net: "{train}"
test_net: "{test}"
test_iter: 100
test_interval: 1000000
test_initialization: false
base_lr: 0.01
momentum: 0.9
weight_decay: 0.0005
lr_policy: "inv"
gamma: 0.0001
power: 0.75
display: 0
max_iter: {iters}
snapshot: 0
snapshot_prefix: "{out}/lenet"
random_seed: 1
'''.format(train=paths['lenet_train.prototxt'], test=paths['lenet_test.prototxt'], iters=args.iters,
           out=args.out))
    solver = caffe.SGDSolver(paths['lenet_solver.prototxt'])
    whole = (len(train_x) // 64) * 64  # MemoryData takes whole batches
    train_x, train_y = train_x[:whole], train_y[:whole]
    solver.net.set_input_arrays(train_x, train_y)
    solver.test_nets[0].set_input_arrays(test_x, test_y)

    # 3. training, stepping from Python
    start = time.time()
    losses = []
    while solver.iter < args.iters:
        steps = min(args.test_interval, args.iters - solver.iter)
        solver.step(steps)
        losses.append(float(solver.net.blobs['loss'].data))
        acc = accuracy(solver.test_nets[0], test_x, test_y)
        print('iteration {:5d}  loss {:.4f}  test accuracy {:.4f}  ({:.1f} s)'.format(
            solver.iter, losses[-1], acc, time.time() - start))
    weights = os.path.join(args.out, 'lenet_fashion.caffemodel')
    solver.net.save(weights)
    print('final test accuracy {:.4f}'.format(acc))

    # 4. the first layer's filters
    filters = solver.net.params['conv1'][0].data[:, 0]
    png = os.path.join(args.out, 'conv1_filters.png')
    caffe.io.save_image(png, tile(filters))
    print('wrote', png)

    # 5. net surgery: the classifier as a fully convolutional net
    deploy = caffe.Net(paths['lenet_deploy.prototxt'], caffe.TEST, weights=weights)
    with open(paths['lenet_full_conv.prototxt'], 'w') as f:
        f.write(str(full_conv_lenet(56)))
    conv = caffe.Net(paths['lenet_full_conv.prototxt'], caffe.TEST, weights=weights)  # conv1, conv2 by name
    for fc, cv in (('ip1', 'ip1-conv'), ('ip2', 'ip2-conv')):
        print('{} {} -> {} {}'.format(fc, deploy.params[fc][0].data.shape, cv, conv.params[cv][0].data.shape))
        conv.params[cv][0].data.flat = deploy.params[fc][0].data.flat
        conv.params[cv][1].data[...] = deploy.params[fc][1].data
    picture = np.zeros((56, 56), dtype=np.float32)
    corners = [(0, 0), (0, 28), (28, 0), (28, 28)]
    for k, (r, c) in enumerate(corners):
        picture[r:r + 28, c:c + 28] = test_x[k, 0]
    scores = conv.forward(data=picture[np.newaxis, np.newaxis])['prob'][0]
    print('score map', scores.shape)
    agree = 0
    for k, (r, c) in enumerate(corners):
        from_map = int(scores[:, r // 4, c // 4].argmax())
        alone = int(deploy.forward(data=test_x[k:k + 1])['prob'][0].argmax())
        agree += from_map == alone
        print('image {} ({}): fully convolutional {}, classifier {}'.format(
            k, CLASSES[int(test_y[k])], CLASSES[from_map], CLASSES[alone]))
    print('net surgery: {} of 4 positions agree with the classifier'.format(agree))
    if acc < args.min_accuracy:
        print('test accuracy {:.4f} is below {}'.format(acc, args.min_accuracy))
        return 1
    return 0 if agree == 4 else 1


if __name__ == '__main__':
    sys.exit(main())
