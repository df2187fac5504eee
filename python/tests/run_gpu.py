"""The GPU part of the Python tests (ctest: python_tests_gpu, label gpu):
exits 77 (ctest's "skipped") without a CUDA GPU, else runs the tests marked
gpu with pytest and exits with its status."""
import os
import sys

import pytest

import cortado

def main():
    if not cortado.has_cuda() or cortado.gpu_count() == 0:
        print('python_tests_gpu: no CUDA GPU here (has_cuda() = {}, gpu_count() = {}): skipped'.format(
            cortado.has_cuda(), cortado.gpu_count()))
        return 77
    return pytest.main(['-q', '-p', 'no:cacheprovider', '-m', 'gpu',
                        os.path.dirname(os.path.abspath(__file__))])


# The guard matters: the tests start worker processes with multiprocessing's
# spawn, whose children import this module as __mp_main__ and must not run
# the suite again.
if __name__ == '__main__':
    sys.exit(main())
