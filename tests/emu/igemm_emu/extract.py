#!/usr/bin/env python3
"""Cuts the TF32 implicit-GEMM kernels out of their .cu files for the host
emulator (emu.cpp): writes OUT/body.inc (conv_igemm_tf32.cu without its
device primitives, launchers and includes; shared memory as host buffers)
and OUT/sum.inc (conv_igemm.cu's split-sum kernel).

Usage: extract.py SRC_LAYERS_DIR OUT_DIR"""
import os
import sys


def cut(text, start, end):
    a = text.index(start)
    b = text.index(end, a)
    return text[a:b]


def main():
    src, out = sys.argv[1], sys.argv[2]
    s = open(os.path.join(src, 'conv_igemm_tf32.cu')).read()
    prims = cut(s, '/* ---------------------------------------------------------------- primitives */',
                "/* One warp's share of one pipeline stage")
    s = s.replace(prims, '')
    s = s[:s.index('/* ---------------------------------------------------------------- launchers */')]
    s = '\n'.join(l for l in s.split('\n') if not l.startswith('#include'))
    for name in ('ig_tf32_gemm_smem', 'ig_tf32_wgrad_smem'):
        old = 'extern __shared__ __align__(16) float %s[];' % name
        if old not in s:
            sys.exit('extract.py: %s not found' % old)
        s = s.replace(old, 'float *%s = emu_smem;' % name)
    s = s.replace('__shared__ int4 tab[BN];', 'static int4 tab[BN];')
    open(os.path.join(out, 'body.inc'), 'w').write(s)
    t = open(os.path.join(src, 'conv_igemm.cu')).read()
    k = cut(t, '#define IG_SUM_LANES', '/* ---------------------------------------------------------------- mode */')
    k = k.replace('__shared__ float', 'static float').replace('__global__ static void', 'static void')
    open(os.path.join(out, 'sum.inc'), 'w').write(k)


if __name__ == '__main__':
    main()
