"""pycaffe's Classifier: a Net that takes images and gives class
probabilities, with the usual preprocessing and optional 10-crop
oversampling."""
import numpy as np

from . import io
from ._cortado import TEST
from .pycaffe import Net

__all__ = ['Classifier']


def input_transformer(net, mean=None, input_scale=None, raw_scale=None, channel_swap=None):
    """The Transformer of net's first input for H x W x K images: transposed
    to K x H x W, then the given channel swap, raw scale, mean and input
    scale (what Classifier and Detector set up)."""
    in_ = net.inputs[0]
    t = io.Transformer({in_: net.blobs[in_].data.shape})
    t.set_transpose(in_, (2, 0, 1))
    if mean is not None:
        t.set_mean(in_, mean)
    if input_scale is not None:
        t.set_input_scale(in_, input_scale)
    if raw_scale is not None:
        t.set_raw_scale(in_, raw_scale)
    if channel_swap is not None:
        t.set_channel_swap(in_, channel_swap)
    return t


class Classifier(Net):
    """Classifier(model_file, pretrained_file, image_dims=None, mean=None,
    input_scale=None, raw_scale=None, channel_swap=None).

    Images are resized to image_dims (default: the input's size), cropped
    to the input's size, transposed to K x H x W and preprocessed by a
    Transformer with the given mean, input_scale, raw_scale and
    channel_swap (see cortado.io.Transformer).
    """

    def __init__(self, model_file, pretrained_file, image_dims=None, mean=None, input_scale=None,
                 raw_scale=None, channel_swap=None):
        Net.__init__(self, model_file, pretrained_file, TEST)
        in_ = self.inputs[0]
        self.transformer = input_transformer(self, mean, input_scale, raw_scale, channel_swap)
        self.crop_dims = np.array(self.blobs[in_].data.shape[2:])
        if not image_dims:
            image_dims = self.crop_dims
        self.image_dims = image_dims

    def predict(self, inputs, oversample=True):
        """Class scores (N x classes) of a list of H x W x K images: the
        mean over the 10 crops when oversample, else of the centre crop."""
        first = np.asarray(inputs[0])
        channels = first.shape[2] if first.ndim == 3 else 1
        batch = np.zeros((len(inputs), self.image_dims[0], self.image_dims[1], channels), dtype=np.float32)
        for i, image in enumerate(inputs):
            image = np.asarray(image, dtype=np.float32)
            if image.ndim == 2:
                image = image[:, :, np.newaxis]
            batch[i] = io.resize_image(image, self.image_dims)
        if oversample:
            batch = io.oversample(batch, self.crop_dims)
        else:
            center = np.array(self.image_dims) / 2.0
            box = np.concatenate([center - self.crop_dims / 2.0, center + self.crop_dims / 2.0]).astype(int)
            batch = batch[:, box[0]:box[2], box[1]:box[3], :]
        in_ = self.inputs[0]
        caffe_in = np.zeros((batch.shape[0], batch.shape[3], batch.shape[1], batch.shape[2]), dtype=np.float32)
        for i, image in enumerate(batch):
            caffe_in[i] = self.transformer.preprocess(in_, image)
        predictions = self.forward_all(**{in_: caffe_in})[self.outputs[0]]
        if oversample:
            predictions = predictions.reshape((len(predictions) // 10, 10, -1)).mean(1)
        return predictions
