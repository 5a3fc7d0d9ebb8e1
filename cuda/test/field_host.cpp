// Host check of field.cuh's Montgomery product (the PTX carry flag is
// emulated when __CUDA_ARCH__ is not defined). Reads lines "a b expected"
// of hex limbs from stdin (field name first), prints the count that failed.
// Built and run by kiln-gpu's field_host test (g++), no GPU needed.
#define __device__
#define __forceinline__ inline
#define __noinline__
#define __constant__
#include <cstdio>
#include <cstring>
#include "../field.cuh"

template <class F>
static bool read_fe(F& x) {
    for (int i = 0; i < F::N; i++)
        if (scanf("%x", &x.v[i]) != 1) return false;
    return true;
}

int main() {
    char field[8];
    long bad = 0, total = 0;
    while (scanf("%7s", field) == 1) {
        if (!strcmp(field, "fr")) {
            Fr a, b, e;
            if (!read_fe(a) || !read_fe(b) || !read_fe(e)) return 2;
            bad += !((a * b) == e);
        } else {
            Fp a, b, e;
            if (!read_fe(a) || !read_fe(b) || !read_fe(e)) return 2;
            bad += !((a * b) == e);
        }
        total++;
    }
    printf("%ld of %ld products wrong\n", bad, total);
    return bad != 0;
}
