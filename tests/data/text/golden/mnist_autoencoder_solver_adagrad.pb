ôd ô-
×#<0d8èûBfixedeo:pNz.examples/mnist/mnist_autoencoder_adagrad_trainˆ˜Â)examples/mnist/mnist_autoencoder.prototxtÚtest-on-trainÚtest-on-testÂAdaGrad