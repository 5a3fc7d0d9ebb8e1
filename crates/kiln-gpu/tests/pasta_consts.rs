//! cuda/pasta.cuh's constants derived from pasta_curves at test time: each
//! modulus, R mod p (Montgomery one, R = 2^256), -p^-1 mod 2^32; and the
//! roots and coset generators kiln-gpu's Pasta NTT uses. No GPU needed.
use std::path::PathBuf;

use ff::{Field, PrimeField};
use kiln_gpu::root_of_unity_of;
use num_bigint::BigUint;

/// The 8 words of `uint32_t NAME[8] = {...}` in cuda/pasta.cuh.
fn header_words(name: &str) -> Vec<u32> {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("cuda/pasta.cuh");
    let text = std::fs::read_to_string(&path).unwrap();
    let at = text.find(&format!("{name}[8] = {{")).unwrap_or_else(|| panic!("{name} not in pasta.cuh"));
    let body = &text[at..];
    let body = &body[body.find('{').unwrap() + 1..body.find('}').unwrap()];
    body.split(',').map(|w| u32::from_str_radix(w.trim().trim_start_matches("0x"), 16).unwrap()).collect()
}

fn words_of(x: &BigUint) -> Vec<u32> {
    let mut d = x.to_u32_digits();
    d.resize(8, 0);
    d
}

fn modulus<F: PrimeField>() -> BigUint {
    BigUint::parse_bytes(F::MODULUS.trim_start_matches("0x").as_bytes(), 16).unwrap()
}

/// One in Montgomery form, as pasta_curves holds it.
fn mont_one<F: PrimeField>() -> Vec<u32> {
    assert_eq!(std::mem::size_of::<F>(), 32);
    // SAFETY: pasta_curves' Fp/Fq are repr(transparent) over [u64; 4]
    // (size asserted); read unaligned.
    let limbs: [u64; 4] = unsafe { std::ptr::read_unaligned(&F::ONE as *const F as *const [u64; 4]) };
    limbs.iter().flat_map(|l| [*l as u32, (*l >> 32) as u32]).collect()
}

fn check_field<F: PrimeField>(tag: &str) {
    let p = modulus::<F>();
    assert_eq!(p.bits(), 255, "{tag}: field.cuh needs the top bit free");
    assert_eq!(header_words(&format!("KILN_PASTA_{tag}_MOD")), words_of(&p), "{tag} modulus");
    let r = (BigUint::from(1u8) << 256u32) % &p;
    assert_eq!(header_words(&format!("KILN_PASTA_{tag}_ONE")), words_of(&r), "{tag}: R mod p");
    assert_eq!(mont_one::<F>(), words_of(&r), "{tag}: pasta_curves' Montgomery one is 2^256 mod p");
    // -p^-1 mod 2^32 (the PastaXxParams::INV in the header): p = 1 mod 2^32.
    let p0 = p.to_u32_digits()[0];
    let inv = (0..32).fold(1u32, |x, _| x.wrapping_mul(2u32.wrapping_sub(p0.wrapping_mul(x))));
    assert_eq!(inv.wrapping_mul(p0), 1);
    assert_eq!(inv.wrapping_neg(), 0xffff_ffff, "{tag}: INV");
    // Roots: two-adicity 32; root_of_unity_of(k) has order exactly 2^k.
    assert_eq!(F::S, 32);
    for k in [1u32, 2, 10, 20, 31, 32] {
        let w = root_of_unity_of::<F>(k);
        let mut x = w;
        for _ in 0..k - 1 {
            x = x.square();
        }
        assert_eq!(x, -F::ONE, "{tag}: w_2^{k} to the 2^{} is -1", k - 1);
    }
    // The coset generator is outside every 2^k subgroup (a non-residue).
    let g = F::MULTIPLICATIVE_GENERATOR;
    assert_eq!(g, F::from(5u64), "{tag}: halo2's coset generator is 5");
    let half = (&p - 1u8) >> 1u32;
    assert_eq!(g.pow_vartime(half.to_u64_digits()), -F::ONE, "{tag}: g is a non-residue");
}

#[test]
fn pasta_fp_constants_match_pasta_curves() {
    check_field::<pasta_curves::Fp>("FP");
}

#[test]
fn pasta_fq_constants_match_pasta_curves() {
    check_field::<pasta_curves::Fq>("FQ");
}

#[test]
fn pasta_curves_are_a_zero_b_five_with_infinity_zero() {
    use group::prime::PrimeCurveAffine;
    use pasta_curves::arithmetic::CurveExt;
    use pasta_curves::{pallas, vesta};
    // curve.cuh's formulas are for a = 0; its infinity test is x = y = 0.
    assert_eq!(pallas::Point::a(), pasta_curves::Fp::ZERO);
    assert_eq!(vesta::Point::a(), pasta_curves::Fq::ZERO);
    assert_eq!(pallas::Point::b(), pasta_curves::Fp::from(5u64));
    assert_eq!(vesta::Point::b(), pasta_curves::Fq::from(5u64));
    assert!(bool::from(pallas::Affine::identity().is_identity()));
    // (0, 0) is not on y^2 = x^3 + 5, so it only ever means infinity.
    assert_ne!(pasta_curves::Fp::ZERO, pasta_curves::Fp::from(5u64));
}
