d ô-
×#<0d8NB	multistepMfff?]fff?eo:pˆ'zexamples/mnist/lenet_multistepˆÂ(examples/mnist/lenet_train_test.prototxtˆ'Ø6À>¨FœJ