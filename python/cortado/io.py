"""pycaffe's caffe.io: images in and out, input preprocessing (Transformer),
and conversions between numpy arrays and Caffe's BlobProto and Datum.

Images are decoded and encoded by Cortado's own JPEG and PNG codecs, so
nothing beyond numpy is needed (pycaffe needed scikit-image and scipy).
"""
import numpy as np

from . import _cortado

__all__ = ['blobproto_to_array', 'array_to_blobproto', 'arraylist_to_blobprotovector_str',
           'blobprotovector_str_to_arraylist', 'array_to_datum', 'datum_to_array', 'Transformer',
           'load_image', 'save_image', 'resize_image', 'oversample']


def _pb2():
    from .proto import caffe_pb2
    return caffe_pb2


# ---------------------------------------------------------------- proto <-> array

def blobproto_to_array(blob, return_diff=False):
    """The values (or, with return_diff, the gradients) of a BlobProto as an
    array of its shape: the legacy num/channels/height/width when any is set,
    else shape.dim."""
    values = np.array(blob.diff if return_diff else blob.data, dtype=np.float32)
    if blob.HasField('num') or blob.HasField('channels') or blob.HasField('height') or \
            blob.HasField('width'):
        return values.reshape(blob.num, blob.channels, blob.height, blob.width)
    return values.reshape(tuple(blob.shape.dim))


def array_to_blobproto(arr, diff=None):
    """A BlobProto of an N-d array (and its gradients when diff is given, of
    the same shape)."""
    blob = _pb2().BlobProto()
    blob.shape.dim.extend(arr.shape)
    blob.data.extend(np.asarray(arr, dtype=np.float32).flat)
    if diff is not None:
        blob.diff.extend(np.asarray(diff, dtype=np.float32).flat)
    return blob


def arraylist_to_blobprotovector_str(arraylist):
    """A serialized BlobProtoVector of a list of arrays."""
    vec = _pb2().BlobProtoVector()
    vec.blobs.extend([array_to_blobproto(a) for a in arraylist])
    return vec.SerializeToString()


def blobprotovector_str_to_arraylist(data):
    """The arrays of a serialized BlobProtoVector."""
    vec = _pb2().BlobProtoVector()
    vec.ParseFromString(data)
    return [blobproto_to_array(b) for b in vec.blobs]


def array_to_datum(arr, label=None):
    """A Datum of a C x H x W array: uint8 arrays as bytes (data), anything
    else as float_data."""
    if arr.ndim != 3:
        raise ValueError('Incorrect array shape.')
    datum = _pb2().Datum()
    datum.channels, datum.height, datum.width = arr.shape
    if arr.dtype == np.uint8:
        datum.data = arr.tobytes()
    else:
        datum.float_data.extend(np.asarray(arr, dtype=np.float32).flat)
    if label is not None:
        datum.label = label
    return datum


def datum_to_array(datum):
    """The C x H x W array of a Datum (uint8 from data, else float from
    float_data); the label is datum.label."""
    shape = (datum.channels, datum.height, datum.width)
    if len(datum.data):
        return np.frombuffer(datum.data, dtype=np.uint8).reshape(shape)
    return np.array(datum.float_data).astype(float).reshape(shape)


# ---------------------------------------------------------------- preprocessing

class Transformer:
    """Prepares images for a net's inputs, as pycaffe's Transformer.

    inputs: {input name: input shape (N, C, H, W)}, e.g.
    ``{'data': net.blobs['data'].data.shape}``.  preprocess() resizes an
    H' x W' x K image to the input's H x W, then in this order transposes,
    swaps channels, scales by raw_scale, subtracts the mean and scales by
    input_scale; deprocess() undoes it.
    """

    def __init__(self, inputs):
        self.inputs = inputs
        self.transpose = {}
        self.channel_swap = {}
        self.raw_scale = {}
        self.mean = {}
        self.input_scale = {}

    def _check(self, name):
        if name not in self.inputs:
            raise Exception('{} is not one of the net inputs: {}'.format(name, self.inputs))

    def preprocess(self, in_, data):
        """A (K x H x W) float32 array for input in_ from an (H' x W' x K) image."""
        self._check(in_)
        out = data.astype(np.float32, copy=False)
        size = tuple(self.inputs[in_][2:])
        if out.shape[:2] != size:
            out = resize_image(out, size)
        transpose = self.transpose.get(in_)
        if transpose is not None:
            out = out.transpose(transpose)
        swap = self.channel_swap.get(in_)
        if swap is not None:
            out = out[swap, :, :]
        raw_scale = self.raw_scale.get(in_)
        if raw_scale is not None:
            out = out * raw_scale
        mean = self.mean.get(in_)
        if mean is not None:
            out = out - mean
        input_scale = self.input_scale.get(in_)
        if input_scale is not None:
            out = out * input_scale
        return out.astype(np.float32, copy=False)

    def deprocess(self, in_, data):
        """The image (H x W x K) of a preprocessed input: preprocess undone."""
        self._check(in_)
        out = data.copy().squeeze()
        input_scale = self.input_scale.get(in_)
        if input_scale is not None:
            out /= input_scale
        mean = self.mean.get(in_)
        if mean is not None:
            out += mean
        raw_scale = self.raw_scale.get(in_)
        if raw_scale is not None:
            out /= raw_scale
        swap = self.channel_swap.get(in_)
        if swap is not None:
            out = out[np.argsort(swap), :, :]
        transpose = self.transpose.get(in_)
        if transpose is not None:
            out = out.transpose(np.argsort(transpose))
        return out

    def set_transpose(self, in_, order):
        """The order of the image's axes for the input, e.g. (2, 0, 1) for
        H x W x K -> K x H x W."""
        self._check(in_)
        if len(order) != len(self.inputs[in_]) - 1:
            raise Exception('Transpose order needs to have the same number of dimensions as the input.')
        self.transpose[in_] = order

    def set_channel_swap(self, in_, order):
        """The order of the channels (after the transpose), e.g. (2, 1, 0)
        for RGB -> BGR."""
        self._check(in_)
        if len(order) != self.inputs[in_][1]:
            raise Exception('Channel swap needs to have the same number of dimensions as the input '
                            'channels.')
        self.channel_swap[in_] = order

    def set_raw_scale(self, in_, scale):
        """A factor for the raw image (255 for models trained on [0, 255]
        pixels, as CaffeNet: load_image gives [0, 1])."""
        self._check(in_)
        self.raw_scale[in_] = scale

    def set_mean(self, in_, mean):
        """The mean to subtract: one value per channel (a vector), or an
        image of the input's shape (C x H x W)."""
        self._check(in_)
        ms = mean.shape
        if mean.ndim == 1:
            if ms[0] != self.inputs[in_][1]:
                raise ValueError('Mean channels incompatible with input.')
            mean = mean[:, np.newaxis, np.newaxis]
        else:
            if len(ms) == 2:
                ms = (1,) + ms
            if len(ms) != 3:
                raise ValueError('Mean shape invalid')
            if ms != tuple(self.inputs[in_][1:]):
                raise ValueError('Mean shape incompatible with input shape.')
        self.mean[in_] = mean

    def set_input_scale(self, in_, scale):
        """A factor applied last, after the mean."""
        self._check(in_)
        self.input_scale[in_] = scale


# ---------------------------------------------------------------- images

def load_image(filename, color=True):
    """A JPEG or PNG file as a float32 array in [0, 1]: H x W x 3 in RGB
    order when color, else H x W x 1."""
    pixels, h, w, c = _cortado._image_read(filename, bool(color))
    img = np.frombuffer(pixels, dtype=np.uint8).reshape(h, w, c)
    return img.astype(np.float32) / np.float32(255.0)


def save_image(filename, image):
    """Writes an H x W (gray), H x W x 1 or H x W x 3 (RGB) image as a PNG:
    floats in [0, 1] (clipped) or uint8."""
    img = np.asarray(image)
    if img.ndim == 2:
        img = img[:, :, np.newaxis]
    if img.ndim != 3 or img.shape[2] not in (1, 3):
        raise ValueError('save_image: give H x W, H x W x 1 or H x W x 3, not {}'.format(img.shape))
    if img.dtype != np.uint8:
        img = np.clip(np.rint(np.asarray(img, dtype=np.float64) * 255.0), 0, 255).astype(np.uint8)
    img = np.ascontiguousarray(img)
    _cortado._image_write_png(filename, img.tobytes(), img.shape[0], img.shape[1], img.shape[2])


def _resize_axis(img, new, axis, order):
    """Resamples one axis with pixel centres aligned (nearest for order 0,
    linear otherwise), edges replicated."""
    old = img.shape[axis]
    if old == new:
        return img
    pos = (np.arange(new, dtype=np.float64) + 0.5) * (old / new) - 0.5
    if order == 0:
        idx = np.clip(np.floor(pos + 0.5).astype(int), 0, old - 1)
        return np.take(img, idx, axis=axis)
    pos = np.clip(pos, 0, old - 1)
    lo = np.floor(pos).astype(int)
    hi = np.minimum(lo + 1, old - 1)
    frac = pos - lo
    shape = [1] * img.ndim
    shape[axis] = new
    frac = frac.reshape(shape)
    return np.take(img, lo, axis=axis) * (1 - frac) + np.take(img, hi, axis=axis) * frac


def resize_image(im, new_dims, interp_order=1):
    """An H x W x K image resized to new_dims (height, width) with
    interpolation of the given order (0 nearest, 1 bilinear), as float32."""
    im = np.asarray(im, dtype=np.float32)
    h, w = int(new_dims[0]), int(new_dims[1])
    if im.size and im.min() == im.max():
        out = np.empty((h, w) + im.shape[2:], dtype=np.float32)
        out.fill(im.flat[0])
        return out
    out = _resize_axis(_resize_axis(im, h, 0, interp_order), w, 1, interp_order)
    return out.astype(np.float32)


def oversample(images, crop_dims):
    """The 10 crops of each image: the four corners and the centre, and
    their mirror images.  images: H x W x K arrays of one size; returns
    (10 N) x h x w x K float32."""
    im_shape = np.array(images[0].shape)
    crop_dims = np.array(crop_dims)
    center = im_shape[:2] / 2.0
    corners = [(i, j) for i in (0, im_shape[0] - crop_dims[0]) for j in (0, im_shape[1] - crop_dims[1])]
    boxes = np.empty((5, 4), dtype=int)
    for k, (i, j) in enumerate(corners):
        boxes[k] = (i, j, i + crop_dims[0], j + crop_dims[1])
    boxes[4] = np.concatenate([center - crop_dims / 2.0, center + crop_dims / 2.0])
    boxes = np.tile(boxes, (2, 1))
    crops = np.empty((10 * len(images), crop_dims[0], crop_dims[1], im_shape[-1]), dtype=np.float32)
    n = 0
    for im in images:
        for box in boxes:
            crops[n] = im[box[0]:box[2], box[1]:box[3], :]
            n += 1
        crops[n - 5:n] = crops[n - 5:n, :, ::-1, :]
    return crops
