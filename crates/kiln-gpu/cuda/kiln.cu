// The one translation unit nvcc compiles into kiln's fatbin (xtask kernels,
// kiln-gpu's build.rs). Every kernel is extern "C" so the host finds it by name.
#include "field.cuh"
#include "curve.cuh"
#include "ntt.cuh"
#include "msm.cuh"
#include "points.cuh"
#include "setup.cuh"
#include "r1cs.cuh"
// Last: the Pasta constants then sit after every BLS12-381 one.
#include "pasta_kernels.cuh"
