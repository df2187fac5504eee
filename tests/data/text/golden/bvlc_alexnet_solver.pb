è è-
×#<08Ð»BstepMÍÌÌ=]fff?eo:h pNz'models/bvlc_alexnet/caffe_alexnet_trainˆÂ&models/bvlc_alexnet/train_val.prototxt