è è-
×#<08Ð»BstepMÍÌÌ=]fff?eo:h pNz-models/bvlc_reference_caffenet/caffenet_trainˆÂ1models/bvlc_reference_caffenet/train_val.prototxt