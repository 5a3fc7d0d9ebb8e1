//! `cargo xtask gen-vanilla --sector-size 2KiB`: real inputs of every
//! Filecoin proof kind, made on the CPU with filecoin-proofs (seal a sector
//! of random data, C1, SnapDeals and PoSt vanilla proofs), written as
//! request payloads (cuzk.v1 SubmitProofRequest fields, bytes in base64) for
//! tests, demos and benchmarks. Production sizes (`--sector-size 32GiB`,
//! `64GiB`), and test sizes with `--sparse`, are made sparse instead
//! (kiln_filecoin::sparse: a CC sector materialized only where the proofs
//! look; seconds, not a seal) and checked with filecoin-proofs' vanilla
//! verifiers before the command says done. `--params` also makes sure the four
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
use kiln_filecoin::{porep, post, snap, sparse, vanilla};
use rand::SeedableRng;

#[derive(clap::Args)]
pub struct Args {
    /// Sector size: 2KiB, 8MiB, 512MiB (test sizes: sealed unless --sparse) or 32GiB, 64GiB (always sparse).
    #[arg(long, default_value = "2KiB")]
    sector_size: String,
    /// Make a test size's inputs sparse too (no sealing; what production sizes always get).
    #[arg(long)]
    sparse: bool,
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
    let name = sector_size_name(size);
    if kiln_filecoin::current_seal_proof(size).is_none() {
        return Err(anyhow!("no registered proofs for {name}: the sector sizes are 2KiB, 8MiB, 512MiB, 32GiB and 64GiB"));
    }
    let sparse = args.sparse || !kiln_filecoin::registered::is_test_sector_size(size);
    if sparse && args.ni_porep {
        return Err(anyhow!("--ni-porep needs a sealed sector (non-interactive challenges are drawn from comm_r): a test size without --sparse"));
    }
    let out = args.out.unwrap_or_else(|| crate::workspace_root().join("target/filecoin-inputs").join(&name));
    let seed = args.seed.unwrap_or_else(rand::random);
    let started = Instant::now();
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
    let mut files = if sparse {
        let files = sparse::generate_to_dir(size, &out, &mut rng).map_err(|e| anyhow!(e))?;
        println!("made a sparse {name} CC sector (seed {seed}) and its C1 and vanilla proofs in {:.2?}:", started.elapsed());
        files
    } else {
        let files = vanilla::generate_to_dir(size, &out, &mut rng).map_err(|e| anyhow!(e))?;
        println!("sealed a {name} sector (seed {seed}) and made its C1 and vanilla proofs in {:.2?}:", started.elapsed());
        files
    };
    if args.ni_porep {
        let t = Instant::now();
        files.push(vanilla::generate_ni_porep_to_dir(size, &out, &mut rng).map_err(|e| anyhow!(e))?);
        println!("sealed a second sector for non-interactive PoRep and made its C1 in {:.2?}", t.elapsed());
    }
    for f in &files {
        let p = vanilla::read_payload(f).map_err(|e| anyhow!(e))?;
        let bytes = p.vanilla_proof.len() + p.vanilla_proofs.iter().map(Vec::len).sum::<usize>();
        let file_bytes = std::fs::metadata(f).map(|m| m.len()).unwrap_or(0);
        println!("  {} ({:?}, registered proof {}, {bytes} bytes of vanilla proofs, file {file_bytes} bytes)", f.display(), p.proof_kind, p.registered_proof);
        if sparse {
            let t = Instant::now();
            sparse::check_vanilla(&p).map_err(|e| anyhow!("{}: {e}", f.display()))?;
            println!("    accepted by filecoin-proofs' vanilla verifiers ({:.2?})", t.elapsed());
        }
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
