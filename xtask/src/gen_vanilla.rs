//! `cargo xtask gen-vanilla --sector-size 2KiB`: real inputs of every
//! Filecoin proof kind, made on the CPU with filecoin-proofs (seal a sector
//! of random data, C1, SnapDeals and PoSt vanilla proofs), written as
//! request payloads (cuzk.v1 SubmitProofRequest fields, bytes in base64) for
//! tests, demos and benchmarks. `--params` also makes sure the four
//! parameter sets exist in FIL_PROOFS_PARAMETER_CACHE (generated with
//! kiln's generator for test sizes). `--ni-porep` also seals a second
//! sector for non-interactive PoRep and writes its C2 payload
//! (`porep-c2-ni.json`; proving it needs the SnarkPack SRS, which is
//! fetched, never generated).

use std::path::PathBuf;
use std::time::Instant;

use anyhow::{anyhow, Result};
use kiln_filecoin::payload::PayloadKind;
use kiln_filecoin::registered::{parse_sector_size, post_proof, sector_size_name, seal_proof, update_proof};
use kiln_filecoin::{porep, post, snap, vanilla};
use rand::SeedableRng;

#[derive(clap::Args)]
pub struct Args {
    /// Sector size: 2KiB, 8MiB or 512MiB (the test sizes).
    #[arg(long, default_value = "2KiB")]
    sector_size: String,
    /// Where the payloads go (default: target/filecoin-inputs/<size>).
    #[arg(long)]
    out: Option<PathBuf>,
    /// Seed of the sector's data, ticket, seed and randomness (default: random).
    #[arg(long)]
    seed: Option<u64>,
    /// Also make sure the parameters of the four kinds exist (generating test sizes' with kiln's generator).
    #[arg(long)]
    params: bool,
    /// Also write a non-interactive PoRep C2 payload (porep-c2-ni.json) from a second sector sealed for it.
    #[arg(long)]
    ni_porep: bool,
}

pub fn run(args: Args) -> Result<()> {
    let size = parse_sector_size(&args.sector_size).map_err(|e| anyhow!(e))?;
    if !kiln_filecoin::registered::is_test_sector_size(size) {
        return Err(anyhow!("gen-vanilla seals test sector sizes (2KiB, 8MiB, 512MiB), not {}", sector_size_name(size)));
    }
    let out = args.out.unwrap_or_else(|| crate::workspace_root().join("target/filecoin-inputs").join(sector_size_name(size)));
    let seed = args.seed.unwrap_or_else(rand::random);
    let started = Instant::now();
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
    let mut files = vanilla::generate_to_dir(size, &out, &mut rng).map_err(|e| anyhow!(e))?;
    println!("sealed a {} sector (seed {seed}) and made its C1 and vanilla proofs in {:.2?}:", sector_size_name(size), started.elapsed());
    if args.ni_porep {
        let t = Instant::now();
        files.push(vanilla::generate_ni_porep_to_dir(size, &out, &mut rng).map_err(|e| anyhow!(e))?);
        println!("sealed a second sector for non-interactive PoRep and made its C1 in {:.2?}", t.elapsed());
    }
    for f in &files {
        let p = vanilla::read_payload(f).map_err(|e| anyhow!(e))?;
        let bytes = p.vanilla_proof.len() + p.vanilla_proofs.iter().map(Vec::len).sum::<usize>();
        println!("  {} ({:?}, registered proof {}, {bytes} bytes of vanilla proofs)", f.display(), p.proof_kind, p.registered_proof);
        if args.params {
            let set = match p.proof_kind {
                // The C1 output names its registered proof; the payload's number is the same one.
                PayloadKind::PorepSealCommit => porep::param_set(seal_proof(p.registered_proof).map_err(|e| anyhow!(e))?),
                PayloadKind::SnapDealsUpdate => Ok(snap::param_set(update_proof(p.registered_proof).map_err(|e| anyhow!(e))?)),
                PayloadKind::WindowPostPartition | PayloadKind::WinningPost => post::param_set(post_proof(p.registered_proof).map_err(|e| anyhow!(e))?),
            }
            .map_err(|e| anyhow!(e))?;
            let t = Instant::now();
            let existed = set.params_path().exists();
            set.ensure().map_err(|e| anyhow!(e))?;
            let what = if existed { "present" } else { "generated" };
            println!("    parameters {what} in {:.1?}: {}", t.elapsed(), set.params_path().display());
        }
    }
    if args.ni_porep {
        let srs = kiln_filecoin::ni_porep::srs_path();
        let state = if srs.is_file() { "present" } else { "MISSING (fetch it with paramfetch; kiln never generates it)" };
        println!("  non-interactive PoRep also needs the SnarkPack SRS {}: {state}", srs.display());
    }
    Ok(())
}
