use cudarc::driver::DriverError;

/// Errors from the GPU side. CUDA failures are returned, never panicked on.
#[derive(Debug, thiserror::Error)]
pub enum GpuError {
    /// No CUDA driver library (libcuda) on this machine.
    #[error("no CUDA driver (libcuda) found on this machine")]
    NoDriver,
    /// This build has no embedded kernels.
    #[error("kiln-gpu was built without CUDA kernels (its build found no nvcc: see the cargo warning, or run `cargo xtask kernels`, then rebuild)")]
    NoKernels,
    /// A CUDA driver call failed.
    #[error("CUDA error: {0}")]
    Cuda(#[from] DriverError),
    /// The GPU cannot load this build's kernels: none of their machine code
    /// fits it and its driver cannot JIT-compile their PTX (a GPU older than
    /// every target, or a driver older than the compiler).
    #[error("kiln's CUDA kernels do not load on GPU {ordinal} ({name}, sm_{major}{minor}): {source}; this build holds code for {holds}")]
    KernelsDoNotLoad { ordinal: usize, name: String, major: i32, minor: i32, holds: &'static str, source: DriverError },
    /// A caller-side mistake (sizes, lengths).
    #[error("invalid argument: {0}")]
    InvalidArgument(String),
}
