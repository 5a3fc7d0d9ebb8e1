// Host check of field.cuh's Montgomery product, sum and difference (the PTX
// carry flag is emulated when __CUDA_ARCH__ is not defined). Reads lines
// "a b a*b a+b a-b" of hex limbs from stdin (field name first), prints the
// count of lines with a wrong result. Lines "fp2 a0 a1 b0 b1 (a*b).c0
// (a*b).c1 (a^2).c0 (a^2).c1" check the Fp2 product and square. The Pasta
// fields (pasta.cuh): "pfp"/"pfq" lines as "fr" ones, and "pfp_plain"/
// "pfq_plain" lines "a plain(a)" check from_mont (the MSM's scalar digits).
// Built and run by kiln-gpu's field_host test (g++), no GPU needed.
#define __device__
#define __forceinline__ inline
#define __noinline__
#define __constant__
#include <cstdio>
#include <cstring>
#include "../field.cuh"
#include "../pasta.cuh"

template <class F>
static bool read_fe(F& x) {
    for (int i = 0; i < F::N; i++)
        if (scanf("%x", &x.v[i]) != 1) return false;
    return true;
}

template <class F>
static bool check(long& bad) {
    F a, b, prod, sum, diff;
    if (!read_fe(a) || !read_fe(b) || !read_fe(prod) || !read_fe(sum) || !read_fe(diff)) return false;
    bad += !((a * b) == prod && (a + b) == sum && (a - b) == diff);
    return true;
}

template <class F>
static bool check_plain(long& bad) {
    F a, plain;
    if (!read_fe(a) || !read_fe(plain)) return false;
    bad += !(a.from_mont() == plain);
    return true;
}

int main() {
    char field[16];
    long bad = 0, total = 0;
    while (scanf("%15s", field) == 1) {
        if (!strcmp(field, "fr")) {
            if (!check<Fr>(bad)) return 2;
        } else if (!strcmp(field, "pfp")) {
            if (!check<PastaFp>(bad)) return 2;
        } else if (!strcmp(field, "pfq")) {
            if (!check<PastaFq>(bad)) return 2;
        } else if (!strcmp(field, "pfp_plain")) {
            if (!check_plain<PastaFp>(bad)) return 2;
        } else if (!strcmp(field, "pfq_plain")) {
            if (!check_plain<PastaFq>(bad)) return 2;
        } else if (!strcmp(field, "fp2")) {
            Fp2 a, b, prod, sq;
            if (!read_fe(a.c0) || !read_fe(a.c1) || !read_fe(b.c0) || !read_fe(b.c1) || !read_fe(prod.c0) ||
                !read_fe(prod.c1) || !read_fe(sq.c0) || !read_fe(sq.c1))
                return 2;
            Fp2 p = a * b, q = a.sqr();
            bad += !(p.c0 == prod.c0 && p.c1 == prod.c1 && q.c0 == sq.c0 && q.c1 == sq.c1);
        } else {
            if (!check<Fp>(bad)) return 2;
        }
        total++;
    }
    printf("%ld of %ld lines wrong\n", bad, total);
    return bad != 0;
}
