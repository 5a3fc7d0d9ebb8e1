//! For tests only: a fake SnarkPack inner-product SRS, written where
//! filecoin-proofs reads the real one (`v28-fil-inner-product-v1.srs` in the
//! test's FIL_PROOFS_PARAMETER_CACHE). Production nodes fetch the real file
//! with paramfetch; kiln itself never makes one.

use std::fs;
use std::io::{BufWriter, Write};
use std::path::Path;

use bellperson::groth16::aggregate::{setup_fake_srs, GenericSRS};
use blstrs::Bls12;
use rand::SeedableRng;

/// Proofs the fake SRS can aggregate: `setup_fake_srs(n)` holds 2n powers,
/// and filecoin-proofs specializes it for the partition count rounded up to
/// a power of two (it needs 2 x that many; it reads at most 2^15 + 1).
/// 128 covers every NI-PoRep (13 partitions at test sizes, 126 at 32/64 GiB).
pub const FAKE_SRS_PROOFS: usize = 128;

/// Writes the fake SRS at `path` unless a file is there (atomically: a
/// temporary file renamed in).
pub fn ensure_fake_srs(path: &Path) {
    if path.exists() {
        return;
    }
    let srs: GenericSRS<Bls12> = setup_fake_srs(&mut rand_chacha::ChaCha8Rng::seed_from_u64(0x5eed), FAKE_SRS_PROOFS);
    fs::create_dir_all(path.parent().unwrap()).unwrap();
    let tmp = path.with_extension(format!("srs.{}.tmp", std::process::id()));
    let mut f = BufWriter::new(fs::File::create(&tmp).unwrap());
    srs.write(&mut f).unwrap();
    f.flush().unwrap();
    drop(f);
    fs::rename(&tmp, path).unwrap();
}
