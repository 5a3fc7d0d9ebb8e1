use cudarc::driver::DriverError;

/// Errors from the GPU side. CUDA failures are returned, never panicked on.
#[derive(Debug, thiserror::Error)]
pub enum GpuError {
    /// No CUDA driver library (libcuda) on this machine.
    #[error("no CUDA driver (libcuda) found on this machine")]
    NoDriver,
    /// This build has no embedded kernels.
    #[error("kiln-gpu was built without CUDA kernels (run `cargo xtask kernels`, then rebuild)")]
    NoKernels,
    /// A CUDA driver call failed.
    #[error("CUDA error: {0}")]
    Cuda(#[from] DriverError),
    /// A caller-side mistake (sizes, lengths).
    #[error("invalid argument: {0}")]
    InvalidArgument(String),
}
