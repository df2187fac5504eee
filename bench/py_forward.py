"""The Python half of bench/py_overhead.sh: net.forward() of LeNet's deploy
net (batch 64, trained weights), as a pycaffe script calls it (the outputs
come back as numpy arrays).

    python py_forward.py DEPLOY WEIGHTS ITERS ROUNDS [GPU]

After 20 warm-up passes, ROUNDS rounds of ITERS passes; prints one line per
round, "py <microseconds per forward>"."""
import sys

import numpy as np

import cortado as caffe

deploy, weights, iters, rounds = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
caffe.init_log(2)
if len(sys.argv) > 5:
    caffe.set_device(int(sys.argv[5]))
    caffe.set_mode_gpu()
net = caffe.Net(deploy, caffe.TEST, weights=weights)
net.blobs['data'].data[...] = (np.arange(net.blobs['data'].count) % 97).reshape(net.blobs['data'].shape) / 97.0
sink = 0.0
for _ in range(20):
    sink += float(net.forward()['prob'][0, 0])
for _ in range(rounds):
    t0 = caffe._cortado._seconds()
    for _ in range(iters):
        out = net.forward()
        sink += out['prob'][0, 0]
    print('py %.3f' % ((caffe._cortado._seconds() - t0) / iters * 1e6), flush=True)
