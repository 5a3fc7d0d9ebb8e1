//! Host-to-device copy bandwidth from a `PinnedPool` buffer against a plain
//! `Vec<u8>`, at 256 MiB, 1 GiB and 4 GiB.
//!
//! ```text
//! cargo build --release -p kiln-memory --example h2d_bandwidth
//! target/release/examples/h2d_bandwidth [--reps N] [--sizes-mib 256,1024,4096]
//! ```
//!
//! Each copy is one `cuMemcpyHtoDAsync` on a stream followed by a stream
//! synchronize, timed with `Instant` around both (so it is what a caller
//! sees); one warm-up copy per source and size, then `--reps` (default 10)
//! timed ones; the table gives the median. Prints a markdown table, and
//! exits 0 with "no GPU: skipped" where `libcuda` is absent.
//! Target on the H200 (issue 3): pool >= 52 GB/s and >= 6x the Vec.

use std::process::ExitCode;
use std::sync::Arc;
use std::time::Instant;

use cudarc::driver::{CudaContext, CudaSlice, CudaStream};
use kiln_memory::{MemoryBudget, PinnedPool};

const MIB: usize = 1 << 20;
const TARGET_GBPS: f64 = 52.0;
const TARGET_RATIO: f64 = 6.0;

struct Args {
    reps: usize,
    sizes: Vec<usize>,
}

fn parse_args() -> Result<Args, String> {
    let mut args = Args {
        reps: 10,
        sizes: vec![256 * MIB, 1024 * MIB, 4096 * MIB],
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let value = it.next().ok_or(format!("{flag} needs a value"))?;
        match flag.as_str() {
            "--reps" => args.reps = value.parse().map_err(|e| format!("--reps: {e}"))?,
            "--sizes-mib" => {
                args.sizes = value
                    .split(',')
                    .map(|s| {
                        s.trim()
                            .parse::<usize>()
                            .map(|m| m * MIB)
                            .map_err(|e| format!("--sizes-mib: {e}"))
                    })
                    .collect::<Result<_, _>>()?
            }
            _ => return Err(format!("unknown argument {flag}")),
        }
    }
    if args.reps == 0 || args.sizes.is_empty() {
        return Err("--reps and --sizes-mib must not be empty".into());
    }
    Ok(args)
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// Median GB/s (10^9 bytes/s) of copying `src` into `dst`.
fn measure(
    stream: &Arc<CudaStream>,
    src: &[u8],
    dst: &mut CudaSlice<u8>,
    reps: usize,
) -> Result<f64, String> {
    let mut copy = || -> Result<f64, String> {
        let started = Instant::now();
        stream.memcpy_htod(src, dst).map_err(|e| e.to_string())?;
        stream.synchronize().map_err(|e| e.to_string())?;
        Ok(src.len() as f64 / started.elapsed().as_secs_f64() / 1e9)
    };
    copy()?; // warm-up: first-touch mappings, driver staging buffers
    let runs = (0..reps).map(|_| copy()).collect::<Result<Vec<_>, _>>()?;
    Ok(median(runs))
}

fn run(args: Args) -> Result<(), String> {
    let ctx = CudaContext::new(0).map_err(|e| format!("CUDA device 0: {e}"))?;
    let name = ctx.name().unwrap_or_else(|_| "unknown GPU".into());
    let stream = ctx.new_stream().map_err(|e| e.to_string())?;
    let largest = *args.sizes.iter().max().expect("non-empty");
    let largest_class = PinnedPool::capacity_for(largest) as u64;
    // Room for the largest pinned buffer; the budget is only the pool's here.
    let budget = MemoryBudget::new(2 * largest_class);
    let pool = PinnedPool::new(&budget, largest_class);
    println!(
        "device: {name}; pool page-locked: {}; {} timed copies per cell (median)",
        pool.is_page_locked(),
        args.reps
    );
    println!();
    println!("| size | pinned pool GB/s | Vec GB/s | pinned / Vec |");
    println!("| --- | --- | --- | --- |");
    let mut met = true;
    for &size in &args.sizes {
        let mut dst = stream.alloc_zeros::<u8>(size).map_err(|e| e.to_string())?;
        let pinned_gbps = {
            let mut buf = pool.checkout(size).map_err(|e| e.to_string())?;
            buf.as_bytes_mut().fill(0x5a);
            let gbps = measure(&stream, &buf, &mut dst, args.reps)?;
            // Return it and free it before the next, larger size: the pool's cap
            // holds one buffer.
            drop(buf);
            pool.release_idle(u64::MAX);
            gbps
        };
        let vec_gbps = {
            let v = vec![0x5au8; size];
            measure(&stream, &v, &mut dst, args.reps)?
        };
        let ratio = pinned_gbps / vec_gbps;
        met &= pinned_gbps >= TARGET_GBPS && ratio >= TARGET_RATIO;
        println!(
            "| {} MiB | {pinned_gbps:.1} | {vec_gbps:.1} | {ratio:.1}x |",
            size / MIB
        );
    }
    println!();
    println!(
        "target (pool >= {TARGET_GBPS} GB/s and >= {TARGET_RATIO}x the Vec at every size): {}",
        if met { "met" } else { "NOT met" }
    );
    Ok(())
}

fn main() -> ExitCode {
    let args = match parse_args() {
        Ok(a) => a,
        Err(e) => {
            eprintln!("h2d_bandwidth: {e}");
            return ExitCode::from(2);
        }
    };
    // SAFETY: only probes whether the driver library can be loaded;
    // CudaContext::new would panic without it.
    if !unsafe { cudarc::driver::sys::is_culib_present() } {
        println!("no GPU: skipped (libcuda not found)");
        return ExitCode::SUCCESS;
    }
    match run(args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("h2d_bandwidth: {e}");
            ExitCode::FAILURE
        }
    }
}
