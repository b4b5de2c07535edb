"""Fashion-MNIST from Debian's package dataset-fashion-mnist (never downloaded):
the IDX files read with NumPy only (train.py and train_tf.py share it)."""
import gzip
import math
import os

import numpy as np

DATA_DIR = "/usr/share/datasets/fashion-mnist"
MEAN, STD = 0.2860, 0.3530  # of the training images, scaled to [0, 1]
FILES = ("train-images-idx3-ubyte.gz", "train-labels-idx1-ubyte.gz",
         "t10k-images-idx3-ubyte.gz", "t10k-labels-idx1-ubyte.gz")


def read_idx(path):
    """An IDX file (gzip): two zero bytes, the type (0x08: uint8), the number
    of dimensions, one big-endian uint32 per dimension, then the data."""
    with gzip.open(path, "rb") as f:
        raw = f.read()
    if len(raw) < 4 or raw[0] != 0 or raw[1] != 0 or raw[2] != 0x08:
        raise ValueError(f"{path}: not an IDX file of uint8")
    ndim = raw[3]
    shape = tuple(int(d) for d in np.frombuffer(raw, ">u4", ndim, offset=4))
    data = np.frombuffer(raw, np.uint8, offset=4 + 4 * ndim)
    if data.size != math.prod(shape):
        raise ValueError(f"{path}: {data.size} bytes of data for shape {shape}")
    return data.reshape(shape).copy()


def load(data_dir=DATA_DIR):
    """(train_images (60000, 28, 28), train_labels, test_images (10000, 28, 28),
    test_labels), all uint8."""
    paths = [os.path.join(data_dir, name) for name in FILES]
    for path in paths:
        if not os.path.exists(path):
            raise FileNotFoundError(f"{path} is missing: apt-get install dataset-fashion-mnist "
                                    f"(scripts/install-deps.sh), or give --data-dir")
    return tuple(read_idx(path) for path in paths)
