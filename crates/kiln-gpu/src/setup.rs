//! Fixed-base multiplication on the device (cuda/setup.cuh): the points of
//! a test setup made on the GPU, `scalars[i] * G` for one generator G, from
//! a byte-window table of G (`table[k * 256 + d] = d * 2^(8k) * G`; the
//! caller builds it on the CPU, 8192 points). The points land in a device
//! buffer and stay there: a production-size setup (~47 GiB) is never copied
//! to the host.
use blstrs::Scalar;
use cudarc::driver::CudaFunction;

use crate::buffers::{as_words, DevicePoints, Limbs};
use crate::curve::ParamsGroup;
use crate::device::{GpuDevice, GpuStream};
use crate::error::GpuError;
use crate::launch::{blocks, launch, raw, Arg};

/// Entries of a byte-window table: 32 windows of 256 (entry 0 unused).
pub const WINDOW_TABLE_LEN: usize = 32 * 256;

/// Scalars copied to the device per launch (128 MiB of scalars): large
/// enough to fill the GPU, small enough that the staging stays a side cost.
const CHUNK: usize = 1 << 22;

impl GpuDevice {
    /// `scalars[i] * P` for every i, in `G`, where `table` is the byte-window
    /// table of the generator P ([`WINDOW_TABLE_LEN`] points). A zero
    /// scalar gives the point at infinity (all-zero coordinates).
    pub fn fixed_base<G: ParamsGroup>(&self, s: &GpuStream, table: &[G::Affine], scalars: &[Scalar]) -> Result<DevicePoints<G>, GpuError> {
        Ok(DevicePoints::new(self.fixed_base_words(s, G::fixed_base(&self.k), table, scalars)?))
    }

    fn fixed_base_words<P: Limbs>(
        &self,
        s: &GpuStream,
        kernel: &CudaFunction,
        table: &[P],
        scalars: &[Scalar],
    ) -> Result<cudarc::driver::CudaSlice<u64>, GpuError> {
        if table.len() != WINDOW_TABLE_LEN {
            return Err(GpuError::InvalidArgument(format!("a window table has {WINDOW_TABLE_LEN} points, not {}", table.len())));
        }
        let table = s.clone_htod(as_words(table))?;
        let out = s.alloc_zeros::<u64>(scalars.len() * P::WORDS)?;
        let mut staging = s.alloc_zeros::<u64>(scalars.len().min(CHUNK) * 4)?;
        let (table_ptr, out_ptr, staging_ptr) = (raw(&table, s), raw(&out, s), raw(&staging, s));
        for (c, chunk) in scalars.chunks(CHUNK).enumerate() {
            let mut view = staging.slice_mut(0..chunk.len() * 4);
            // The staging is reused: the copy waits on the stream for the
            // previous chunk's kernel, which read it.
            s.memcpy_htod(as_words(chunk), &mut view)?;
            let first = (c * CHUNK * P::WORDS * 8) as u64;
            // SAFETY: the kernel reads `chunk.len()` scalars from the staging
            // (filled above), WINDOW_TABLE_LEN points from `table` and writes
            // `chunk.len()` points of P::WORDS words from `first` bytes into
            // `out`, all within their allocations; every buffer lives until
            // the synchronize below.
            unsafe {
                launch(
                    s,
                    kernel,
                    blocks(chunk.len(), 128),
                    128,
                    &[Arg::U64(table_ptr), Arg::U64(staging_ptr), Arg::U64(out_ptr + first), Arg::U32(chunk.len() as u32)],
                )?
            };
        }
        s.synchronize()?;
        Ok(out)
    }
}
