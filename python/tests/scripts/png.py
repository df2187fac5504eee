"""A tiny PNG writer (zlib + struct) for the example scripts, so that they
need nothing beyond numpy and run unchanged on pycaffe as on Cortado."""
import struct
import zlib

import numpy as np


def write_png(path, image):
    """image: H x W (gray) or H x W x 3 floats in [0, 1]."""
    img = np.clip(np.rint(np.asarray(image, dtype=np.float64) * 255), 0, 255).astype(np.uint8)
    if img.ndim == 2:
        img = img[:, :, None]
    h, w, c = img.shape
    color = {1: 0, 3: 2}[c]
    raw = b''.join(b'\x00' + img[y].tobytes() for y in range(h))

    def chunk(kind, data):
        return struct.pack('>I', len(data)) + kind + data + struct.pack('>I', zlib.crc32(kind + data) & 0xFFFFFFFF)
    with open(path, 'wb') as f:
        f.write(b'\x89PNG\r\n\x1a\n' + chunk(b'IHDR', struct.pack('>IIBBBBB', w, h, 8, color, 0, 0, 0)) +
                chunk(b'IDAT', zlib.compress(raw)) + chunk(b'IEND', b''))


def vis_square(data):
    """Tiles n arrays of H x W (x 3) into a square grid with 1-pixel
    padding, values normalised to [0, 1] (the notebooks' vis_square)."""
    data = (data - data.min()) / (data.max() - data.min() + 1e-12)
    n = int(np.ceil(np.sqrt(data.shape[0])))
    padding = ((0, n ** 2 - data.shape[0]), (0, 1), (0, 1)) + ((0, 0),) * (data.ndim - 3)
    data = np.pad(data, padding, mode='constant', constant_values=1)
    data = data.reshape((n, n) + data.shape[1:]).transpose((0, 2, 1, 3) + tuple(range(4, data.ndim + 1)))
    return data.reshape((n * data.shape[1], n * data.shape[3]) + data.shape[4:])
