"""Cortado's Python interface: pycaffe's API on Cortado.

Existing pycaffe scripts run with one changed line::

    import cortado as caffe

    net = caffe.Net('deploy.prototxt', caffe.TEST, weights='weights.caffemodel')
    net.blobs['data'].data[...] = image
    out = net.forward()

Everything pycaffe offers is here under the same names (Net, the solvers,
Layer for Python layers, io, net_spec, proto.caffe_pb2, coord_map,
Classifier, Detector, draw), and a few things it lacked: data-parallel and
multi-machine training with the engine of ``cortado train``
(:func:`train`), Python layers under data parallelism, and device arrays
(``Blob.device_data``) for CuPy and PyTorch without copies.  See
docs/python.md.
"""
from ._cortado import (  # noqa: F401
    API_VERSION, Blob, BlobVec, CortadoError, DeviceArray, Layer, TEST, TRAIN, __version__, gpu_count,
    has_cuda, has_gloo, has_mpi, has_nccl, init_log, layer_type_list, log, mode, mpi_launched,
    multiprocess, set_device, set_math, set_mode_cpu, set_mode_gpu, set_multiprocess, set_random_seed,
    set_solver_count, set_solver_rank, solver_count, solver_rank)
from .pycaffe import (  # noqa: F401
    AdaDeltaSolver, AdaGradSolver, AdamSolver, NCCL, Net, NesterovSolver, RMSPropSolver, SGDSolver,
    Solver, Timer, get_solver)
from .parallel import train  # noqa: F401
from . import io  # noqa: F401
from .classifier import Classifier  # noqa: F401
from .detector import Detector  # noqa: F401
from .net_spec import NetSpec, layers, params, to_proto  # noqa: F401
