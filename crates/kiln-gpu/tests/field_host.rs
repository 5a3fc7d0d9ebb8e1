//! The Montgomery product, sum and difference of cuda/field.cuh, checked on
//! the CPU: the header is compiled as host C++ (g++, with the PTX carry flag
//! emulated), once per way of adding (`KILN_FIELD_ADD_PTX` 1 and 0; Fp2
//! sums reduced or not, `KILN_FP2_LAZY`), and fed
//! random and edge operands whose expected results come from blstrs (Fr)
//! and from big-integer arithmetic (Fp: blstrs does not export its Fp). This
//! runs on machines without a GPU, so every CI run checks the carry-chain
//! logic the kernels use; the GPU run (examples/gpu_check) checks the same
//! code as PTX. The Pasta fields (cuda/pasta.cuh) are checked the same way
//! against pasta_curves, their `from_mont` (the MSM's scalar digits) too.
use std::io::Write;
use std::path::PathBuf;
use std::process::{Command, Stdio};

use blstrs::Scalar;
use ff::{Field, PrimeField};
use num_bigint::{BigUint, RandBigInt};
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;

fn fr_limbs(x: &Scalar) -> [u64; 4] {
    // SAFETY: blstrs' Scalar is repr(transparent) over blst_fr, four
    // little-endian u64 limbs in Montgomery form.
    unsafe { std::mem::transmute::<Scalar, [u64; 4]>(*x) }
}

const FP_MODULUS: &str = "1a0111ea397fe69a4b1ba7b6434bacd764774b84f38512bf6730d2a0f6b0f6241eabfffeb153ffffb9feffffffffaaab";

fn fp_limbs(x: &BigUint) -> [u64; 6] {
    let mut out = [0u64; 6];
    for (o, d) in out.iter_mut().zip(x.to_u64_digits()) {
        *o = d;
    }
    out
}

/// 32-bit limbs, low first, as the CUDA code holds them.
fn words(limbs: &[u64]) -> String {
    limbs.iter().flat_map(|l| [*l as u32, (*l >> 32) as u32]).map(|w| format!("{w:x}")).collect::<Vec<_>>().join(" ")
}

/// `tag` names the executable: tests run in parallel, each with its own.
fn compile(tag: &str, add_ptx: u8, fp2_lazy: u8) -> PathBuf {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("cuda");
    let out = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(format!("field_host_{tag}_{add_ptx}_{fp2_lazy}"));
    let cxx = std::env::var("CXX").unwrap_or_else(|_| "c++".into());
    let status = Command::new(&cxx)
        .args(["-O2", "-std=c++17", "-Wall", &format!("-DKILN_FIELD_ADD_PTX={add_ptx}"), &format!("-DKILN_FP2_LAZY={fp2_lazy}"), "-o"])
        .arg(&out)
        .arg(root.join("test/field_host.cpp"))
        .status()
        .unwrap_or_else(|e| panic!("running {cxx} (a C++ compiler is needed for this test): {e}"));
    assert!(status.success(), "{cxx} failed on cuda/test/field_host.cpp");
    out
}

#[test]
fn montgomery_arithmetic_matches_blstrs() {
    let mut rng = ChaCha8Rng::seed_from_u64(0x6b696c6e);
    let fr_edge = [Scalar::ZERO, Scalar::ONE, -Scalar::ONE, -Scalar::ONE.double(), Scalar::from(2u64), Scalar::ROOT_OF_UNITY];
    // Fp operands are raw Montgomery limbs (any value below p); the product
    // is a * b * 2^-384 mod p.
    let p = BigUint::parse_bytes(FP_MODULUS.as_bytes(), 16).unwrap();
    let r_inv = (BigUint::from(1u8) << 384u32).modinv(&p).unwrap();
    let one = BigUint::from(1u8);
    let fp_edge = [BigUint::from(0u8), one.clone(), &p - 1u8, &p - 2u8, BigUint::from(2u8), (&one << 384u32) % &p];
    let mut input = String::new();
    let mut count = 0;
    let fr: Vec<Scalar> = fr_edge.iter().copied().chain((0..2000).map(|_| Scalar::random(&mut rng))).collect();
    let fp: Vec<BigUint> = fp_edge.iter().cloned().chain((0..2000).map(|_| rng.gen_biguint_below(&p))).collect();
    for (i, a) in fr.iter().enumerate() {
        // Every edge value against every value, random pairs otherwise.
        let others: Vec<&Scalar> = if i < fr_edge.len() { fr.iter().collect() } else { vec![&fr[(i * 7919) % fr.len()]] };
        for b in others {
            let (prod, sum, diff) = (a * b, a + b, a - b);
            input += &format!("fr {} {} {} {} {}\n", words(&fr_limbs(a)), words(&fr_limbs(b)), words(&fr_limbs(&prod)), words(&fr_limbs(&sum)), words(&fr_limbs(&diff)));
            count += 1;
        }
    }
    for (i, a) in fp.iter().enumerate() {
        let others: Vec<&BigUint> = if i < fp_edge.len() { fp.iter().collect() } else { vec![&fp[(i * 7919) % fp.len()]] };
        for b in others {
            let product = a * b * &r_inv % &p;
            let sum = (a + b) % &p;
            let diff = (a + &p - b) % &p;
            input += &format!("fp {} {} {} {} {}\n", words(&fp_limbs(a)), words(&fp_limbs(b)), words(&fp_limbs(&product)), words(&fp_limbs(&sum)), words(&fp_limbs(&diff)));
            count += 1;
        }
    }
    // Fp2: (a0 + a1 u)(b0 + b1 u) with u^2 = -1, on Montgomery limbs (each
    // product scaled by 2^-384), and the square of a.
    let mont = |x: &BigUint, y: &BigUint| x * y * &r_inv % &p;
    let sub = |x: BigUint, y: BigUint| (x + &p - y) % &p;
    // Every combination of edge values (p - 1 + p - 1 is the largest
    // unreduced Karatsuba sum), then random ones.
    let e = fp_edge.len();
    let mut quads: Vec<[&BigUint; 4]> = (0..e * e * e * e).map(|k| [&fp[k % e], &fp[k / e % e], &fp[k / (e * e) % e], &fp[k / (e * e * e)]]).collect();
    quads.extend((0..fp.len()).map(|i| [&fp[i], &fp[(i * 31 + 7) % fp.len()], &fp[(i * 7919 + 3) % fp.len()], &fp[(i * 13 + 1) % fp.len()]]));
    for [a0, a1, b0, b1] in quads {
        let prod0 = sub(mont(a0, b0), mont(a1, b1));
        let prod1 = (mont(a0, b1) + mont(a1, b0)) % &p;
        let sq0 = sub(mont(a0, a0), mont(a1, a1));
        let sq1 = (mont(a0, a1) * 2u8) % &p;
        let w: Vec<String> = [a0, a1, b0, b1, &prod0, &prod1, &sq0, &sq1].iter().map(|x| words(&fp_limbs(x))).collect();
        input += &format!("fp2 {}\n", w.join(" "));
        count += 1;
    }
    for (add_ptx, fp2_lazy) in [(1, 0), (0, 0), (1, 1)] {
        let exe = compile("bls", add_ptx, fp2_lazy);
        let mut child = Command::new(&exe).stdin(Stdio::piped()).stdout(Stdio::piped()).spawn().expect("run field_host");
        child.stdin.take().unwrap().write_all(input.as_bytes()).unwrap();
        let out = child.wait_with_output().unwrap();
        let text = String::from_utf8_lossy(&out.stdout);
        let build = format!("KILN_FIELD_ADD_PTX={add_ptx} KILN_FP2_LAZY={fp2_lazy}");
        assert!(out.status.success(), "field_host ({build}): {text}");
        assert_eq!(text.trim(), format!("0 of {count} lines wrong"), "{build}");
    }
}

/// Montgomery limbs of a 32-byte field element (blstrs' Scalar, pasta_curves'
/// Fp and Fq: each repr(transparent) over [u64; 4]).
fn mont_limbs<F: PrimeField>(x: &F) -> [u64; 4] {
    assert_eq!(std::mem::size_of::<F>(), 32);
    // SAFETY: F is exactly four initialized u64 limbs (asserted size; the
    // repr(transparent) of the types this test passes), read unaligned.
    unsafe { std::ptr::read_unaligned(x as *const F as *const [u64; 4]) }
}

/// Plain (canonical) limbs of x, from its little-endian repr.
fn plain_limbs<F: PrimeField<Repr = [u8; 32]>>(x: &F) -> [u64; 4] {
    let r = x.to_repr();
    std::array::from_fn(|i| u64::from_le_bytes(r[i * 8..i * 8 + 8].try_into().unwrap()))
}

/// Lines for one Pasta field: products, sums, differences of edge values
/// against every value and random pairs, and from_mont of every value.
fn pasta_lines<F: PrimeField<Repr = [u8; 32]>>(tag: &str, rng: &mut ChaCha8Rng, input: &mut String) -> usize {
    let edge = [F::ZERO, F::ONE, -F::ONE, -F::ONE.double(), F::from(2u64), F::ROOT_OF_UNITY, F::MULTIPLICATIVE_GENERATOR, F::DELTA, F::TWO_INV];
    let all: Vec<F> = edge.iter().copied().chain((0..2000).map(|_| F::random(&mut *rng))).collect();
    let mut count = 0;
    for (i, a) in all.iter().enumerate() {
        let others: Vec<&F> = if i < edge.len() { all.iter().collect() } else { vec![&all[(i * 7919) % all.len()]] };
        for b in others {
            let l = [a, b, &(*a * b), &(*a + b), &(*a - b)].map(|x| words(&mont_limbs(x)));
            *input += &format!("{tag} {}\n", l.join(" "));
            count += 1;
        }
        *input += &format!("{tag}_plain {} {}\n", words(&mont_limbs(a)), words(&plain_limbs(a)));
        count += 1;
    }
    count
}

#[test]
fn pasta_montgomery_arithmetic_matches_pasta_curves() {
    let mut rng = ChaCha8Rng::seed_from_u64(0x70617374);
    let mut input = String::new();
    let mut count = pasta_lines::<pasta_curves::Fp>("pfp", &mut rng, &mut input);
    count += pasta_lines::<pasta_curves::Fq>("pfq", &mut rng, &mut input);
    for add_ptx in [1, 0] {
        let exe = compile("pasta", add_ptx, 1);
        let mut child = Command::new(&exe).stdin(Stdio::piped()).stdout(Stdio::piped()).spawn().expect("run field_host");
        child.stdin.take().unwrap().write_all(input.as_bytes()).unwrap();
        let out = child.wait_with_output().unwrap();
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(out.status.success(), "field_host (KILN_FIELD_ADD_PTX={add_ptx}): {text}");
        assert_eq!(text.trim(), format!("0 of {count} lines wrong"), "KILN_FIELD_ADD_PTX={add_ptx}");
    }
}
