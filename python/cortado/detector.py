"""pycaffe's Detector: a Net that scores windows of images (R-CNN style),
with context padding around each window."""
import numpy as np

from . import io
from ._cortado import TEST
from .classifier import input_transformer
from .pycaffe import Net

__all__ = ['Detector']


class Detector(Net):
    """Detector(model_file, pretrained_file, mean=None, input_scale=None,
    raw_scale=None, channel_swap=None, context_pad=None).

    Each window (ymin, xmin, ymax, xmax) of an image is cropped, with
    context_pad pixels of context around it (as the R-CNN models were
    trained), warped to the input's size and preprocessed as in Classifier.
    """

    def __init__(self, model_file, pretrained_file, mean=None, input_scale=None, raw_scale=None,
                 channel_swap=None, context_pad=None):
        Net.__init__(self, model_file, pretrained_file, TEST)
        self.transformer = input_transformer(self, mean, input_scale, raw_scale, channel_swap)
        self.configure_crop(context_pad)

    def detect_windows(self, images_windows):
        """Scores of windows: images_windows is a list of (image file,
        windows), windows an array of (ymin, xmin, ymax, xmax) rows.
        Returns a list of {'window', 'prediction', 'filename'}."""
        crops = []
        color = self.blobs[self.inputs[0]].channels != 1  # a gray net gets gray images
        for filename, windows in images_windows:
            image = io.load_image(filename, color=color).astype(np.float32)
            for window in windows:
                crops.append(self.crop(image, window))
        in_ = self.inputs[0]
        caffe_in = np.zeros((len(crops),) + tuple(self.blobs[in_].data.shape[1:]), dtype=np.float32)
        for i, c in enumerate(crops):
            caffe_in[i] = self.transformer.preprocess(in_, c)
        predictions = self.forward_all(**{in_: caffe_in})[self.outputs[0]]
        predictions = predictions.reshape(len(predictions), -1)
        detections = []
        i = 0
        for filename, windows in images_windows:
            for window in windows:
                detections.append({'window': window, 'prediction': predictions[i], 'filename': filename})
                i += 1
        return detections

    def detect_selective_search(self, image_fnames):
        """detect_windows over the windows Selective Search proposes (needs
        the selective_search_ijcv_with_python module, as in pycaffe)."""
        import selective_search_ijcv_with_python as selective_search
        image_fnames = [str(f) for f in image_fnames]
        windows_list = selective_search.get_windows(image_fnames, cmd='selective_search_rcnn')
        return self.detect_windows(zip(image_fnames, windows_list))

    def crop(self, im, window):
        """The window of im (ymin, xmin, ymax, xmax) with its context, warped
        to the net's input size (H x W x K float32)."""
        crop = im[window[0]:window[2], window[1]:window[3]]
        if self.context_pad:
            box = np.array(window, dtype=np.float64)
            crop_size = self.blobs[self.inputs[0]].width
            scale = crop_size / (1. * crop_size - self.context_pad * 2)
            half_h = (box[2] - box[0] + 1) / 2.
            half_w = (box[3] - box[1] + 1) / 2.
            center = (box[0] + half_h, box[1] + half_w)
            scaled_dims = scale * np.array((-half_h, -half_w, half_h, half_w))
            box = np.round(np.tile(center, 2) + scaled_dims)
            full_h = box[2] - box[0] + 1
            full_w = box[3] - box[1] + 1
            scale_h = crop_size / full_h
            scale_w = crop_size / full_w
            pad_y = round(max(0, -box[0]) * scale_h)
            pad_x = round(max(0, -box[1]) * scale_w)
            im_h, im_w = im.shape[:2]
            box = np.clip(box, 0., [im_h, im_w, im_h, im_w])
            clip_h = box[2] - box[0] + 1
            clip_w = box[3] - box[1] + 1
            crop_h = round(clip_h * scale_h)
            crop_w = round(clip_w * scale_w)
            if pad_y + crop_h > crop_size:
                crop_h = crop_size - pad_y
            if pad_x + crop_w > crop_size:
                crop_w = crop_size - pad_x
            context_crop = im[int(box[0]):int(box[2]), int(box[1]):int(box[3])]
            context_crop = io.resize_image(context_crop, (int(crop_h), int(crop_w)))
            crop = np.ones(self.crop_dims, dtype=np.float32) * self.crop_mean
            crop[int(pad_y):int(pad_y + crop_h), int(pad_x):int(pad_x + crop_w)] = context_crop
        return crop

    def configure_crop(self, context_pad):
        """Sets the context padding (pixels) and the crop geometry, filling
        padding outside the image with the mean."""
        in_ = self.inputs[0]
        tpose = self.transformer.transpose[in_]
        inv_tpose = [tpose[t] for t in tpose]
        self.crop_dims = np.array(self.blobs[in_].data.shape[1:])[inv_tpose]
        self.context_pad = context_pad
        if self.context_pad:
            transpose = self.transformer.transpose.get(in_)
            channel_order = self.transformer.channel_swap.get(in_)
            raw_scale = self.transformer.raw_scale.get(in_)
            mean = self.transformer.mean.get(in_)
            if mean is not None:
                inv_transpose = [transpose[t] for t in transpose]
                crop_mean = mean.copy().transpose(inv_transpose)
                if channel_order is not None:
                    channel_order_inverse = [channel_order.index(i) for i in range(crop_mean.shape[2])]
                    crop_mean = crop_mean[:, :, channel_order_inverse]
                if raw_scale is not None:
                    crop_mean /= raw_scale
                self.crop_mean = crop_mean
            else:
                self.crop_mean = np.zeros(self.crop_dims, dtype=np.float32)
