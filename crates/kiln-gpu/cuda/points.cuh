// Parameter points in the .params file's own encoding (zcash uncompressed:
// big-endian coordinates, an Fp2 written c1 then c0) turned into blst affine
// points in Montgomery form on the device. Streaming a parameter set that
// does not fit in VRAM then costs one copy of the file's bytes and no host
// decoding; the host validated every point once when it first saw the file.
#pragma once
#include "field.cuh"
#include "curve.cuh"

// R^2 mod p (R = 2^384): a Montgomery product with it maps x to xR.
__constant__ uint32_t KILN_FP_R2[12] = {0x1c341746, 0xf4df1f34, 0x09d104f1, 0x0a76e6a6,
                                        0x4c95b6d5, 0x8de5476c, 0x939d83c0, 0x67eb88a9,
                                        0xb519952d, 0x9a793e85, 0x92cae3aa, 0x11988fe5};

// One 48-byte big-endian coordinate -> Fp in Montgomery form. The three top
// bits of the first byte are the encoding's flags (compressed, infinity,
// sign); they are zero in a validated uncompressed finite point.
__device__ __forceinline__ Fp fp_from_be48(const uint8_t* b) {
    Fp x, r2;
#pragma unroll
    for (int i = 0; i < 12; i++) {
        const uint8_t* w = b + 44 - 4 * i;
        x.v[i] = ((uint32_t)w[0] << 24) | ((uint32_t)w[1] << 16) | ((uint32_t)w[2] << 8) | w[3];
        r2.v[i] = KILN_FP_R2[i];
    }
    x.v[11] &= 0x1fffffffu;
    return x * r2;
}

extern "C" __global__ void kiln_points_from_raw_g1(const uint8_t* raw, Affine<Fp>* out, uint32_t n) {
    uint32_t i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    const uint8_t* p = raw + (size_t)i * 96;
    out[i] = {fp_from_be48(p), fp_from_be48(p + 48)};
}

extern "C" __global__ void kiln_points_from_raw_g2(const uint8_t* raw, Affine<Fp2>* out, uint32_t n) {
    uint32_t i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    const uint8_t* p = raw + (size_t)i * 192;
    Affine<Fp2> a;
    a.x.c1 = fp_from_be48(p);
    a.x.c0 = fp_from_be48(p + 48);
    a.y.c1 = fp_from_be48(p + 96);
    a.y.c0 = fp_from_be48(p + 144);
    out[i] = a;
}
