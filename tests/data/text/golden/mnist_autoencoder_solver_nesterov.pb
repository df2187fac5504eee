ôd ô-
×#<0d8èûBstepMÍÌÌ=]33s?eo:hNpNz/examples/mnist/mnist_autoencoder_nesterov_trainˆ˜Â)examples/mnist/mnist_autoencoder.prototxtÚtest-on-trainÚtest-on-testÂNesterov