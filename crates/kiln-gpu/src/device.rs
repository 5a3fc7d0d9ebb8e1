//! Opening a device, loading the embedded module, device properties.
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use cudarc::driver::sys::{self, CUdevice_attribute};
use cudarc::driver::{CudaContext, CudaStream};

use crate::error::GpuError;
use crate::launch::Kernels;
use crate::ntt::NttTables;

/// A stream of work on one device; cheap to clone, one per worker.
pub type GpuStream = Arc<CudaStream>;

/// What the launch parameters and memory plans are derived from.
#[derive(Clone, Debug)]
pub struct DeviceInfo {
    pub ordinal: usize,
    pub name: String,
    pub total_memory: usize,
    pub sm_count: u32,
    pub compute_capability: (i32, i32),
    /// Which of the fatbin's codes the driver loaded, e.g. `sm_90 machine
    /// code` or `compute_80 PTX, JIT-compiled` (a GPU newer than every
    /// machine-code target, or `CUDA_FORCE_PTX_JIT=1`).
    pub kernel_code: String,
}

/// One opened GPU with kiln's kernels loaded. `Send + Sync`: share it
/// between workers (each on its own stream).
pub struct GpuDevice {
    pub(crate) ctx: Arc<CudaContext>,
    pub(crate) k: Kernels,
    pub(crate) info: DeviceInfo,
    /// Per (field id, log_n): see ntt.rs.
    pub(crate) ntt_tables: Mutex<HashMap<(u8, u32), Arc<NttTables>>>,
}

impl GpuDevice {
    /// Number of CUDA devices; 0 when there is no driver.
    pub fn count() -> usize {
        // SAFETY: only probes for the driver library.
        if !unsafe { cudarc::driver::sys::is_culib_present() } {
            return 0;
        }
        CudaContext::device_count().map(|n| n.max(0) as usize).unwrap_or(0)
    }

    /// Opens device `ordinal` and loads the kernels.
    pub fn open(ordinal: usize) -> Result<Self, GpuError> {
        // CudaContext::new panics without libcuda: check first.
        // SAFETY: only probes for the driver library.
        if !unsafe { cudarc::driver::sys::is_culib_present() } {
            return Err(GpuError::NoDriver);
        }
        let fatbin = crate::launch::fatbin()?;
        let count = Self::count();
        if ordinal >= count {
            return Err(GpuError::InvalidArgument(format!("device {ordinal} of {count}")));
        }
        let ctx = CudaContext::new(ordinal)?;
        // SAFETY: kiln orders all work on a buffer through the stream it was
        // made on (documented on the crate); per-buffer events are not needed.
        unsafe { ctx.disable_event_tracking() };
        let name = ctx.name()?;
        let compute_capability = (
            ctx.attribute(CUdevice_attribute::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR)?,
            ctx.attribute(CUdevice_attribute::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR)?,
        );
        let (major, minor) = compute_capability;
        let k = Kernels::load(&ctx, fatbin).map_err(|e| match e {
            GpuError::Cuda(source) => GpuError::KernelsDoNotLoad {
                ordinal,
                name: name.clone(),
                major,
                minor,
                holds: if std::env::var_os("KILN_KERNELS_FILE").is_some() { "the file KILN_KERNELS_FILE names" } else { crate::KERNEL_TARGETS.unwrap_or("no GPU") },
                source,
            },
            other => other,
        })?;
        let info = DeviceInfo {
            ordinal,
            name,
            total_memory: ctx.total_mem()?,
            sm_count: ctx.attribute(CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT)? as u32,
            compute_capability,
            kernel_code: kernel_code(k.ptx_and_binary_version()?),
        };
        Ok(Self { ctx, k, info, ntt_tables: Mutex::new(HashMap::new()) })
    }

    pub fn info(&self) -> &DeviceInfo {
        &self.info
    }

    /// (free, total) device memory in bytes, now.
    pub fn memory(&self) -> Result<(usize, usize), GpuError> {
        Ok(self.ctx.mem_get_info()?)
    }

    /// Bytes kiln's buffers on this device hold now (every one comes from
    /// the device's stream-ordered pool), and the most they held at once
    /// since [`GpuDevice::reset_allocation_peak`]: exact, where sampling
    /// free memory misses short peaks and counts what the pool keeps in
    /// reserve.
    pub fn allocated_bytes(&self) -> Result<(u64, u64), GpuError> {
        let pool = self.mem_pool()?;
        let get = |attr| -> Result<u64, GpuError> {
            let mut v: u64 = 0;
            // SAFETY: both attributes are cuuint64_t values the driver
            // writes into `v`, which outlives the call.
            unsafe { sys::cuMemPoolGetAttribute(pool, attr, &mut v as *mut u64 as *mut std::ffi::c_void) }.result()?;
            Ok(v)
        };
        Ok((get(sys::CUmemPool_attribute::CU_MEMPOOL_ATTR_USED_MEM_CURRENT)?, get(sys::CUmemPool_attribute::CU_MEMPOOL_ATTR_USED_MEM_HIGH)?))
    }

    /// Starts a new peak for [`GpuDevice::allocated_bytes`].
    pub fn reset_allocation_peak(&self) -> Result<(), GpuError> {
        let pool = self.mem_pool()?;
        let mut zero: u64 = 0;
        // SAFETY: the high-water attribute takes a cuuint64_t, and 0 is the
        // one value the driver accepts for it; `zero` outlives the call.
        unsafe { sys::cuMemPoolSetAttribute(pool, sys::CUmemPool_attribute::CU_MEMPOOL_ATTR_USED_MEM_HIGH, &mut zero as *mut u64 as *mut std::ffi::c_void) }.result()?;
        Ok(())
    }

    /// The pool `cuMemAllocAsync` takes this device's buffers from.
    fn mem_pool(&self) -> Result<sys::CUmemoryPool, GpuError> {
        self.ctx.bind_to_thread()?;
        let mut pool: sys::CUmemoryPool = std::ptr::null_mut();
        // SAFETY: `pool` is written by the driver for a device handle the
        // open context belongs to.
        unsafe { sys::cuDeviceGetMemPool(&mut pool, self.ctx.cu_device()) }.result()?;
        Ok(pool)
    }

    /// A new stream on this device.
    pub fn new_stream(&self) -> Result<GpuStream, GpuError> {
        Ok(self.ctx.new_stream()?)
    }

    /// A new stream at the device's highest priority: when SMs free up, the
    /// scheduler starts its pending blocks before those of ordinary streams
    /// (running blocks are not preempted, so a kernel on it waits at most
    /// for the blocks already running elsewhere to end).
    pub fn new_urgent_stream(&self) -> Result<GpuStream, GpuError> {
        self.ctx.bind_to_thread()?;
        // (least, greatest): the greatest priority is the smallest number.
        let (_, greatest) = cudarc::driver::result::stream::get_priority_range()?;
        Ok(self.ctx.new_stream_with_priority(greatest)?)
    }
}

/// Names the code a kernel was loaded from, given its (PTX, binary)
/// versions as the driver reports them (`90` for sm_90): machine code
/// compiled from PTX of its own version, or PTX of an older virtual
/// architecture that the driver JIT-compiled at load.
fn kernel_code((ptx, binary): (i32, i32)) -> String {
    let v = |n: i32| format!("{}{}", n / 10, n % 10);
    if ptx == binary {
        format!("sm_{} machine code", v(binary))
    } else {
        format!("compute_{} PTX, JIT-compiled for sm_{}", v(ptx), v(binary))
    }
}

/// The device time of the work queued on a stream between [`begin`] and
/// [`end`], from CUDA events: what the GPU spent, not what the host waited.
///
/// [`begin`]: DeviceSpan::begin
/// [`end`]: DeviceSpan::end
pub struct DeviceSpan<'a> {
    stream: &'a GpuStream,
    start: cudarc::driver::CudaEvent,
}

impl<'a> DeviceSpan<'a> {
    pub fn begin(stream: &'a GpuStream) -> Result<Self, GpuError> {
        Ok(DeviceSpan { stream, start: record(stream)? })
    }

    /// Waits for the stream's work so far; returns its device time.
    pub fn end(self) -> Result<std::time::Duration, GpuError> {
        let end = record(self.stream)?;
        end.synchronize()?;
        let ms = self.start.elapsed_ms(&end)?;
        Ok(std::time::Duration::from_secs_f64(f64::from(ms.max(0.0)) / 1e3))
    }
}

fn record(stream: &GpuStream) -> Result<cudarc::driver::CudaEvent, GpuError> {
    Ok(stream.record_event(Some(cudarc::driver::sys::CUevent_flags::CU_EVENT_DEFAULT))?)
}

#[cfg(test)]
mod tests {
    use super::kernel_code;

    #[test]
    fn kernel_code_names_machine_code_or_jit_compiled_ptx() {
        assert_eq!(kernel_code((90, 90)), "sm_90 machine code");
        assert_eq!(kernel_code((86, 86)), "sm_86 machine code");
        assert_eq!(kernel_code((80, 90)), "compute_80 PTX, JIT-compiled for sm_90");
        assert_eq!(kernel_code((80, 121)), "compute_80 PTX, JIT-compiled for sm_121");
    }
}
