//! Fuzzing `ParamsFile` bytes (issue 22, part 1): a valid small key's
//! file form mutated in its header (the verifying key's ic count, each
//! section's length, including counts whose byte size overflows), cut short,
//! lengthened, and with point bytes flipped; then, when it opens, every
//! section decoded. Pass: no panic; a bad file is an error that says what
//! is wrong. From memory and from a file on disk (the `pread` path).
//!
//! Cases: `KILN_FUZZ_CASES` (default 64); `cargo xtask fuzz --cases N`.

use std::sync::OnceLock;

use blstrs::{G1Affine, G2Affine};
use kiln_groth16::{setup, ParamsError, ParamsFile, Section};
use kiln_synth::workload::{SyntheticCircuit, WorkloadKind};
use proptest::prelude::*;
use rand::SeedableRng;

fn valid() -> &'static [u8] {
    static B: OnceLock<Vec<u8>> = OnceLock::new();
    B.get_or_init(|| {
        let c = SyntheticCircuit { kind: WorkloadKind::FilecoinLike, constraints: 60, inputs: 3, structure_seed: 1, witness_seed: None };
        let p = setup::generate(c, &mut rand_chacha::ChaCha8Rng::seed_from_u64(1)).unwrap();
        let mut bytes = Vec::new();
        p.write(&mut bytes).unwrap();
        bytes
    })
}

/// Offsets of the u32 counts: ic, then h, l, a, b_g1, b_g2.
fn count_offsets(b: &[u8]) -> Vec<usize> {
    let ic_at = 3 * 96 + 3 * 192;
    let ic = u32::from_be_bytes(b[ic_at..ic_at + 4].try_into().unwrap()) as usize;
    let mut at = ic_at + 4 + ic * 96;
    let mut out = vec![ic_at];
    for point in [96, 96, 96, 96, 192] {
        out.push(at);
        let n = u32::from_be_bytes(b[at..at + 4].try_into().unwrap()) as usize;
        at += 4 + n * point;
    }
    out
}

#[derive(Clone, Debug)]
enum Mutation {
    /// Count `which` (ic, h, l, a, b_g1, b_g2) set to `value`.
    Count { which: usize, value: u32 },
    Cut(usize),
    Append(Vec<u8>),
    Flip { at: usize, mask: u8 },
}

fn mutation() -> impl Strategy<Value = Mutation> {
    let count = prop_oneof![0u32..4, Just(u32::MAX), Just(u32::MAX / 96), Just(1 << 26), any::<u32>()];
    prop_oneof![
        (0usize..6, count).prop_map(|(which, value)| Mutation::Count { which, value }),
        any::<usize>().prop_map(Mutation::Cut),
        proptest::collection::vec(any::<u8>(), 1..300).prop_map(Mutation::Append),
        (any::<usize>(), 1u8..=255).prop_map(|(at, mask)| Mutation::Flip { at, mask }),
    ]
}

fn apply(b: &mut Vec<u8>, m: &Mutation) {
    match m {
        Mutation::Count { which, value } => {
            let offsets = count_offsets(valid());
            let at = offsets[*which];
            if at + 4 <= b.len() {
                b[at..at + 4].copy_from_slice(&value.to_be_bytes());
            }
        }
        Mutation::Cut(at) => b.truncate(at % (b.len() + 1)),
        Mutation::Append(extra) => b.extend_from_slice(extra),
        Mutation::Flip { at, mask } if !b.is_empty() => {
            let i = at % b.len();
            b[i] ^= mask;
        }
        Mutation::Flip { .. } => {}
    }
}

/// Decodes every point of every section; an error must name what is bad.
fn decode_all(p: &ParamsFile) -> Result<(), TestCaseError> {
    let mut g1: Vec<G1Affine> = Vec::new();
    let mut g2: Vec<G2Affine> = Vec::new();
    for s in Section::ALL {
        let r = if s == Section::BG2 { p.g2_points(0..p.len(s), &mut g2) } else { p.g1_points(s, 0..p.len(s), &mut g1) };
        match r {
            Ok(()) => {}
            Err(ParamsError::InvalidPoint { what, .. }) => prop_assert_eq!(what, s.name()),
            Err(e) => prop_assert!(false, "unexpected error decoding {}: {e}", s.name()),
        }
    }
    Ok(())
}

fn opened_or_clear(r: Result<ParamsFile, ParamsError>) -> Result<(), TestCaseError> {
    match r {
        Ok(p) => decode_all(&p),
        Err(e) => {
            let m = e.to_string();
            prop_assert!(m.contains("truncated") || m.contains("unexpected bytes") || m.contains("invalid"), "unclear: {m}");
            Ok(())
        }
    }
}

fn cases() -> u32 {
    std::env::var("KILN_FUZZ_CASES").ok().and_then(|v| v.parse().ok()).unwrap_or(64)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: cases(), failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn mutated_params_bytes_open_or_fail_clearly(ms in proptest::collection::vec(mutation(), 1..4)) {
        let mut b = valid().to_vec();
        for m in &ms {
            apply(&mut b, m);
        }
        opened_or_clear(ParamsFile::from_bytes(b.clone()))?;
        // The same bytes as a file (read with pread).
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f.params");
        std::fs::write(&path, &b).unwrap();
        opened_or_clear(ParamsFile::open(&path))?;
    }

    #[test]
    fn random_bytes_as_params(b in proptest::collection::vec(any::<u8>(), 0..2048)) {
        opened_or_clear(ParamsFile::from_bytes(b))?;
    }
}

#[test]
fn the_unmutated_file_opens_and_decodes() {
    let p = ParamsFile::from_bytes(valid().to_vec()).unwrap();
    decode_all(&p).unwrap();
    assert_eq!(count_offsets(valid()).len(), 6);
}
