//! Test setups for Filecoin circuits whose published parameters are not at
//! hand: production sector sizes on a test or benchmark machine, where a
//! 47 GiB `.params` file can be neither fetched nor generated in time.
//!
//! With a test-setup directory set ([`set_dir`], or `KILN_TEST_SETUP_DIR`),
//! a circuit whose `.params` file is absent from `FIL_PROOFS_PARAMETER_CACHE`
//! is proved against a test setup instead (a real file, when present, is
//! always used as before): random parameters made from a seed kept in that
//! directory (`v28-<id>.kiln-test-setup`), held as scalars and turned into
//! points on the GPU (`kiln_groth16::setup::test_setup`). Only the
//! verifying key is written, under filecoin-proofs' own name
//! (`v28-<id>.vk`, with its `.meta`), so filecoin-proofs' verifiers accept
//! kiln's proofs when `FIL_PROOFS_PARAMETER_CACHE` names that directory.
//!
//! Whoever has the seed can forge proofs: never for proofs that go on chain.
//! Everything that makes or uses a test setup says so in its log.

use std::fs::{self, OpenOptions};
use std::io::BufReader;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use bellperson::groth16::VerifyingKey;
use blstrs::Bls12;
use fs2::FileExt;
use kiln_groth16::setup::Admit;
use kiln_groth16::{ParamsFile, ProveError};
use kiln_memory::{MemoryBudget, MemoryClass};
use kiln_pipeline::SrsSpec;
use rand::RngCore;
use serde::{Deserialize, Serialize};
use storage_proofs_core::parameter_cache::CacheEntryMetadata;

/// The environment variable naming the test-setup directory.
pub const DIR_ENV: &str = "KILN_TEST_SETUP_DIR";

static DIR: Mutex<Option<PathBuf>> = Mutex::new(None);

/// Sets the test-setup directory for this process (`None`: only the
/// environment's [`DIR_ENV`] counts). Parameter sets made afterwards use it.
pub fn set_dir(dir: Option<PathBuf>) {
    *DIR.lock().expect("not poisoned") = dir;
}

/// The test-setup directory: [`set_dir`]'s, else [`DIR_ENV`]'s, else none
/// (test setups off: missing production parameters fail their job).
pub fn dir() -> Option<PathBuf> {
    DIR.lock().expect("not poisoned").clone().or_else(|| std::env::var_os(DIR_ENV).filter(|v| !v.is_empty()).map(PathBuf::from))
}

/// Makes one circuit's test setup from a seed (its blank circuit is built
/// inside; `Admit` is asked for the host bytes first).
pub(crate) type Maker = Arc<dyn Fn([u8; 32], Admit<'_>) -> Result<ParamsFile, ProveError> + Send + Sync>;

/// What one parameter set's test setup needs to be made.
#[derive(Clone)]
pub(crate) struct TestSetup {
    pub cache_id: String,
    pub sector_size: u64,
    pub label: String,
    pub make: Maker,
}

/// The seed file's contents.
#[derive(Serialize, Deserialize)]
struct SeedFile {
    /// What this file is, for whoever finds it.
    what: String,
    /// 32 bytes, hex.
    seed: String,
}

impl TestSetup {
    fn vk_path(&self, dir: &Path) -> PathBuf {
        dir.join(format!("v28-{}.vk", self.cache_id))
    }

    /// The spec the engine proves against: parameters made by [`open`](Self::open).
    pub fn srs_spec(&self, dir: PathBuf) -> SrsSpec {
        let this = self.clone();
        let path = self.vk_path(&dir);
        SrsSpec::opened(self.cache_id.clone(), path, Arc::new(move |budget: &MemoryBudget| this.open(&dir, budget)))
    }

    /// Makes the test setup: its seed read from `dir` (written there the
    /// first time), its working memory reserved from `budget` while it is
    /// made, its verifying key written to `dir` (or checked against the one
    /// there).
    pub fn open(&self, dir: &Path, budget: &MemoryBudget) -> Result<ParamsFile, String> {
        let io = |what: &str, p: &Path| {
            let what = what.to_string();
            let p = p.to_path_buf();
            move |e: std::io::Error| format!("{what} {}: {e}", p.display())
        };
        fs::create_dir_all(dir).map_err(io("creating the test-setup directory", dir))?;
        // One process at a time makes the seed and writes the key.
        let lock_path = dir.join(format!("v28-{}.kiln-test-setup.lock", self.cache_id));
        let lock = OpenOptions::new().create(true).truncate(false).write(true).open(&lock_path).map_err(io("opening", &lock_path))?;
        lock.lock_exclusive().map_err(io("locking", &lock_path))?;
        let seed = self.seed(dir)?;
        tracing::warn!(
            label = %self.label,
            dir = %dir.display(),
            "proving against a TEST SETUP (the published parameters are absent): random parameters whose seed is in this \
             directory; its proofs verify only with the .vk written there, never on chain"
        );
        let mut hold = None;
        let made = (self.make)(seed, &mut |bytes| {
            hold = Some(budget.reserve_blocking(bytes, MemoryClass::Srs).map_err(|e| e.to_string())?);
            Ok(())
        });
        drop(hold);
        let params = made.map_err(|e| format!("making the {} test setup: {e}", self.label))?;
        self.keep_vk(dir, params.vk())?;
        let _ = FileExt::unlock(&lock);
        Ok(params)
    }

    fn seed(&self, dir: &Path) -> Result<[u8; 32], String> {
        let path = dir.join(format!("v28-{}.kiln-test-setup", self.cache_id));
        if path.exists() {
            let f: SeedFile = serde_json::from_reader(BufReader::new(fs::File::open(&path).map_err(|e| format!("{}: {e}", path.display()))?))
                .map_err(|e| format!("{} is not a kiln test-setup seed file: {e}", path.display()))?;
            let mut seed = [0u8; 32];
            hex::decode_to_slice(f.seed.trim(), &mut seed).map_err(|e| format!("{}: the seed is not 32 bytes of hex: {e}", path.display()))?;
            return Ok(seed);
        }
        let mut seed = [0u8; 32];
        rand::thread_rng().fill_bytes(&mut seed);
        let file = SeedFile {
            what: format!(
                "kiln test setup of {} ({}): the seed of random parameters made by kiln; whoever has it can forge proofs, \
                 so these parameters are for tests and benchmarks only",
                self.label, self.cache_id
            ),
            seed: hex::encode(seed),
        };
        write_atomically(&path, &serde_json::to_vec_pretty(&file).expect("serializable"))?;
        Ok(seed)
    }

    /// Writes `.vk` and `.meta` when absent; an existing `.vk` must be this setup's.
    fn keep_vk(&self, dir: &Path, vk: &VerifyingKey<Bls12>) -> Result<(), String> {
        let path = self.vk_path(dir);
        if path.exists() {
            let f = fs::File::open(&path).map_err(|e| format!("{}: {e}", path.display()))?;
            let on_disk = VerifyingKey::<Bls12>::read(BufReader::new(f)).map_err(|e| format!("reading {}: {e}", path.display()))?;
            if &on_disk != vk {
                return Err(format!(
                    "{} is not the verifying key of the test setup whose seed is beside it (was the seed file replaced?); \
                     remove both to make a new test setup",
                    path.display()
                ));
            }
        } else {
            let mut bytes = Vec::new();
            vk.write(&mut bytes).map_err(|e| e.to_string())?;
            write_atomically(&path, &bytes)?;
        }
        let meta = dir.join(format!("v28-{}.meta", self.cache_id));
        if !meta.exists() {
            write_atomically(&meta, &serde_json::to_vec(&CacheEntryMetadata { sector_size: self.sector_size }).expect("serializable"))?;
        }
        Ok(())
    }
}

fn write_atomically(path: &Path, bytes: &[u8]) -> Result<(), String> {
    let tmp = path.with_extension(format!("tmp{}", std::process::id()));
    fs::write(&tmp, bytes).map_err(|e| format!("writing {}: {e}", tmp.display()))?;
    fs::rename(&tmp, path).map_err(|e| format!("renaming into {}: {e}", path.display()))
}
