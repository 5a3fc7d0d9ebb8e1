//! The wire's numeric registered-proof values -> filecoin-proofs-api's
//! enums, and the facts kiln needs about each (sector size, whether its
//! parameters may be generated here).
//!
//! The numbers are the Filecoin actors' ABI values (what Curio and Lotus put
//! on the wire), which are the declaration order of filecoin-proofs-api's
//! enums; the tables below spell them out so a reordering there cannot
//! silently change what a number means here.

use filecoin_proofs_api::{RegisteredPoStProof, RegisteredSealProof, RegisteredUpdateProof};

use RegisteredPoStProof as P;
use RegisteredSealProof as S;
use RegisteredUpdateProof as U;

const SEAL: [RegisteredSealProof; 20] = [
    S::StackedDrg2KiBV1,
    S::StackedDrg8MiBV1,
    S::StackedDrg512MiBV1,
    S::StackedDrg32GiBV1,
    S::StackedDrg64GiBV1,
    S::StackedDrg2KiBV1_1,
    S::StackedDrg8MiBV1_1,
    S::StackedDrg512MiBV1_1,
    S::StackedDrg32GiBV1_1,
    S::StackedDrg64GiBV1_1,
    S::StackedDrg2KiBV1_1_Feat_SyntheticPoRep,
    S::StackedDrg8MiBV1_1_Feat_SyntheticPoRep,
    S::StackedDrg512MiBV1_1_Feat_SyntheticPoRep,
    S::StackedDrg32GiBV1_1_Feat_SyntheticPoRep,
    S::StackedDrg64GiBV1_1_Feat_SyntheticPoRep,
    S::StackedDrg2KiBV1_2_Feat_NonInteractivePoRep,
    S::StackedDrg8MiBV1_2_Feat_NonInteractivePoRep,
    S::StackedDrg512MiBV1_2_Feat_NonInteractivePoRep,
    S::StackedDrg32GiBV1_2_Feat_NonInteractivePoRep,
    S::StackedDrg64GiBV1_2_Feat_NonInteractivePoRep,
];

const POST: [RegisteredPoStProof; 15] = [
    P::StackedDrgWinning2KiBV1,
    P::StackedDrgWinning8MiBV1,
    P::StackedDrgWinning512MiBV1,
    P::StackedDrgWinning32GiBV1,
    P::StackedDrgWinning64GiBV1,
    P::StackedDrgWindow2KiBV1,
    P::StackedDrgWindow8MiBV1,
    P::StackedDrgWindow512MiBV1,
    P::StackedDrgWindow32GiBV1,
    P::StackedDrgWindow64GiBV1,
    P::StackedDrgWindow2KiBV1_2,
    P::StackedDrgWindow8MiBV1_2,
    P::StackedDrgWindow512MiBV1_2,
    P::StackedDrgWindow32GiBV1_2,
    P::StackedDrgWindow64GiBV1_2,
];

const UPDATE: [RegisteredUpdateProof; 5] =
    [U::StackedDrg2KiBV1, U::StackedDrg8MiBV1, U::StackedDrg512MiBV1, U::StackedDrg32GiBV1, U::StackedDrg64GiBV1];

/// The RegisteredSealProof numbered `n`.
pub fn seal_proof(n: u64) -> Result<RegisteredSealProof, String> {
    SEAL.get(n as usize).copied().ok_or_else(|| format!("unknown registered seal proof {n} (known: 0..={})", SEAL.len() - 1))
}

/// The number of a RegisteredSealProof (its position in the ABI).
pub fn seal_proof_number(p: RegisteredSealProof) -> u64 {
    SEAL.iter().position(|&q| q == p).expect("every variant is in the table") as u64
}

/// The RegisteredPoStProof numbered `n`.
pub fn post_proof(n: u64) -> Result<RegisteredPoStProof, String> {
    POST.get(n as usize).copied().ok_or_else(|| format!("unknown registered PoSt proof {n} (known: 0..={})", POST.len() - 1))
}

/// The number of a RegisteredPoStProof.
pub fn post_proof_number(p: RegisteredPoStProof) -> u64 {
    POST.iter().position(|&q| q == p).expect("every variant is in the table") as u64
}

/// The RegisteredUpdateProof numbered `n`.
pub fn update_proof(n: u64) -> Result<RegisteredUpdateProof, String> {
    UPDATE.get(n as usize).copied().ok_or_else(|| format!("unknown registered update proof {n} (known: 0..={})", UPDATE.len() - 1))
}

/// The number of a RegisteredUpdateProof.
pub fn update_proof_number(p: RegisteredUpdateProof) -> u64 {
    UPDATE.iter().position(|&q| q == p).expect("every variant is in the table") as u64
}

/// Sector sizes whose parameters kiln may generate itself (a local random
/// setup): the test sizes. Production sizes (32 GiB, 64 GiB) must come
/// from the published parameter files; generating them silently would give
/// proofs nobody else accepts.
pub fn is_test_sector_size(bytes: u64) -> bool {
    bytes < (1 << 30)
}

/// `2KiB`, `8MiB`, `512MiB`, `32GiB`, `64GiB`.
pub fn sector_size_name(bytes: u64) -> String {
    const UNITS: [(u64, &str); 3] = [(1 << 30, "GiB"), (1 << 20, "MiB"), (1 << 10, "KiB")];
    for (unit, name) in UNITS {
        if bytes >= unit && bytes.is_multiple_of(unit) {
            return format!("{}{name}", bytes / unit);
        }
    }
    format!("{bytes}B")
}

/// Parses `2KiB`, `8MiB`, `512MiB`, `32GiB`, `64GiB` (case-insensitive, the
/// `i` and `B` optional) or a plain byte count.
pub fn parse_sector_size(s: &str) -> Result<u64, String> {
    let t = s.trim().to_ascii_lowercase();
    let t = t.trim_end_matches('b').trim_end_matches('i');
    let (num, unit) = match t.chars().last() {
        Some('k') => (&t[..t.len() - 1], 1u64 << 10),
        Some('m') => (&t[..t.len() - 1], 1 << 20),
        Some('g') => (&t[..t.len() - 1], 1 << 30),
        _ => (t, 1),
    };
    let bad = || format!("bad sector size {s:?} (expected e.g. 2KiB, 8MiB, 32GiB)");
    let n: u64 = num.parse().map_err(|_| bad())?;
    n.checked_mul(unit).ok_or_else(bad)
}

/// The prover id filecoin-proofs expects for miner `f0<id>`: the payload of
/// the ID address (the id as an unsigned LEB128 varint), zero-padded to 32
/// bytes, as Lotus and Curio build it.
pub fn prover_id(miner_id: u64) -> [u8; 32] {
    let mut out = [0u8; 32];
    let (mut v, mut i) = (miner_id, 0);
    loop {
        let byte = (v & 0x7f) as u8;
        v >>= 7;
        if v == 0 {
            out[i] = byte;
            return out;
        }
        out[i] = byte | 0x80;
        i += 1;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_round_trip_and_match_the_abi() {
        for n in 0..20 {
            assert_eq!(seal_proof_number(seal_proof(n).unwrap()), n);
        }
        for n in 0..15 {
            assert_eq!(post_proof_number(post_proof(n).unwrap()), n);
        }
        for n in 0..5 {
            assert_eq!(update_proof_number(update_proof(n).unwrap()), n);
        }
        assert_eq!(seal_proof(5).unwrap(), S::StackedDrg2KiBV1_1);
        assert_eq!(post_proof(10).unwrap(), P::StackedDrgWindow2KiBV1_2);
        assert!(seal_proof(20).unwrap_err().contains("unknown registered seal proof 20"));
        assert!(post_proof(99).is_err());
        assert!(update_proof(5).is_err());
    }

    #[test]
    fn sizes() {
        assert_eq!(sector_size_name(2048), "2KiB");
        assert_eq!(sector_size_name(8 << 20), "8MiB");
        assert_eq!(sector_size_name(32 << 30), "32GiB");
        assert_eq!(parse_sector_size("2KiB").unwrap(), 2048);
        assert_eq!(parse_sector_size("8mib").unwrap(), 8 << 20);
        assert_eq!(parse_sector_size("512M").unwrap(), 512 << 20);
        assert_eq!(parse_sector_size("2048").unwrap(), 2048);
        assert!(parse_sector_size("lots").is_err());
        assert!(parse_sector_size("18446744073709551615GiB").is_err(), "overflow is an error, not a panic");
        assert!(is_test_sector_size(512 << 20) && !is_test_sector_size(32 << 30));
    }

    #[test]
    fn prover_ids_are_leb128_payloads() {
        assert_eq!(prover_id(1000)[..3], [0xe8, 0x07, 0]);
        assert_eq!(prover_id(0)[..2], [0, 0]);
        assert_eq!(prover_id(127)[..2], [127, 0]);
    }
}
