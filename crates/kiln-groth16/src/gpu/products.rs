//! a/b/c on the device for assignments whose products were left to the
//! prover ([`Products::Deferred`]): the circuit's compiled matrices stay in
//! VRAM beside its parameters (uploaded by the first such proof, keyed by
//! the parameter id, evicted with the parameters), each proof uploads only
//! its inputs and aux, and kiln-gpu's `r1cs_products` evaluates a, b, c and
//! checks a*b = c on every row in one pass. A bad row fails the proof with
//! [`SynthError::Unsatisfied`] before any other work (the engine then redoes
//! the partition on its reference path).
//!
//! Parameters come first in VRAM: the matrices are uploaded only into what
//! the placed parameters, the NTT tables and one proof's working space
//! leave of the device's memory (capped by
//! [`GpuContext::set_matrix_vram_limit`]), and only when the proofs on the
//! device leave their bytes free at that moment (else a later proof
//! uploads them). When they do not fit, a
//! deferred proof still runs: its products are evaluated and checked on
//! the host a block of rows at a time and uploaded (a fallback: the engine
//! stops deferring for that circuit when [`GpuContext::products_support`]
//! says so, and asks again a minute later).

use std::sync::Arc;
use std::time::{Duration, Instant};

use blstrs::Scalar;
use ff::Field;
use kiln_gpu::{DeviceR1cs, DeviceScalars, DeviceSpan, GpuStream, HostMatrix, HostR1cs};
use kiln_synth::{Assignment, CompiledR1cs, SynthError};

use super::srs::{gpu_err, srs_device_bytes, GpuContext};
use crate::error::ProveError;
use crate::params::ParamsFile;
use crate::prover::{PhaseTimings, ProductsSupport};

/// How long a circuit whose matrices found no room is evaluated on the
/// host before room is looked for again.
const NO_ROOM_RETRY: Duration = Duration::from_secs(60);

/// Rows evaluated on the host and uploaded at a time when the matrices are
/// not in VRAM: 3 x 8 MiB of host staging.
const HOST_ROWS: usize = 1 << 18;

/// The matrices of one parameter set's circuit on a device.
pub(super) struct ResidentMatrices {
    /// [`CompiledR1cs::id`] of the recording they were uploaded from.
    r1cs_id: u64,
    /// `None`: they did not fit (at `since`); proofs take the host path.
    matrices: Option<Arc<DeviceR1cs>>,
    since: Instant,
}

impl ResidentMatrices {
    pub(super) fn device_bytes(&self) -> u64 {
        self.matrices.as_ref().map_or(0, |m| m.device_bytes())
    }
}

/// kiln-synth's compiled matrices in kiln-gpu's terms (the same encoding).
pub fn host_r1cs(r: &CompiledR1cs) -> HostR1cs<'_> {
    let shape = r.shape();
    let matrices = r.matrices().map(|m| HostMatrix { row_start: m.row_start, terms: m.terms });
    HostR1cs { num_inputs: shape.num_inputs, num_aux: shape.num_aux, coeffs: r.coefficients(), matrices }
}

fn unsatisfied(index: usize, total: usize) -> ProveError {
    ProveError::Synth(SynthError::Unsatisfied { index, total })
}

impl GpuContext {
    /// Caps the VRAM one circuit's matrices may take on this device
    /// (`None`: whatever is free beside the parameters; `Some(0)`: never
    /// resident, so deferred products are evaluated on the host). Applies
    /// to matrices placed after the call.
    pub fn set_matrix_vram_limit(&self, bytes: Option<u64>) {
        self.limits.lock().matrix_vram = bytes;
    }

    /// Whether `r1cs`'s matrices are, or would be, resident beside
    /// `params` on this device ([`ProductsSupport::Yes`]), or would not fit
    /// ([`ProductsSupport::NoRoom`]: a deferred proof then runs its products
    /// on the host).
    pub fn products_support(&self, params: &ParamsFile, r1cs: &CompiledR1cs) -> ProductsSupport {
        if let Some(e) = self.matrices.lock().get(&params.id()).filter(|e| e.r1cs_id == r1cs.id()) {
            match e.matrices {
                Some(_) => return ProductsSupport::Yes,
                None if e.since.elapsed() < NO_ROOM_RETRY => return ProductsSupport::NoRoom,
                None => {}
            }
        }
        // Parameters not placed yet come first.
        let shape = params.shape();
        let srs = if self.srs_placed(params.id()) { 0 } else { srs_device_bytes(&shape, r1cs.shape().b_input_count) };
        if host_r1cs(r1cs).device_bytes() <= self.room_for_matrices(params, srs) {
            ProductsSupport::Yes
        } else {
            ProductsSupport::NoRoom
        }
    }

    /// VRAM one circuit's matrices may take, with `reserved` more bytes
    /// still to be placed first: what placing them leaves one proof of
    /// the proof capacity. Counted from the device's whole memory, not
    /// from what is free now: proofs running while a partition is planned
    /// (at 32 GiB, a proof holds ~17 GiB) would otherwise keep the
    /// matrices off the device for good.
    fn room_for_matrices(&self, params: &ParamsFile, reserved: u64) -> u64 {
        let shape = params.shape();
        let room = self.proof_capacity(&shape).saturating_sub(self.proof_working_bytes(&shape) + reserved);
        self.limits.lock().matrix_vram.map_or(room, |cap| cap.min(room))
    }

    /// `r1cs`'s matrices on this device, uploading them on `s` if they
    /// are not there yet and fit (the second value says an upload ran);
    /// `None` when they do not fit.
    fn resident_matrices(&self, params: &ParamsFile, r1cs: &CompiledR1cs, s: &GpuStream) -> Result<(Option<Arc<DeviceR1cs>>, bool), ProveError> {
        let key = params.id();
        let current = |m: &ResidentMatrices| m.r1cs_id == r1cs.id() && (m.matrices.is_some() || m.since.elapsed() < NO_ROOM_RETRY);
        if let Some(e) = self.matrices.lock().get(&key).filter(|e| current(e)) {
            return Ok((e.matrices.clone(), false));
        }
        // One upload per device: workers wait here rather than upload twice.
        let _one = self.matrix_upload.lock();
        if let Some(e) = self.matrices.lock().get(&key).filter(|e| current(e)) {
            return Ok((e.matrices.clone(), false));
        }
        // Another recording's (or a refusal's) copy goes first, freeing its VRAM.
        drop(self.matrices.lock().remove(&key));
        let host = host_r1cs(r1cs);
        let bytes = host.device_bytes();
        let room = self.room_for_matrices(params, 0);
        // The upload takes its bytes through the proof gate, beside the
        // proofs admitted now (the caller's among them): if they hold too
        // much of the device, this proof evaluates on the host and a later
        // one uploads. Waiting here could wait on a proof that waits for
        // this upload.
        let matrices = if bytes > room {
            tracing::info!(params_id = key, bytes, room, "no room in VRAM for the circuit's matrices; evaluating a/b/c on the host");
            None
        } else if let Some(_reserved) = self.try_reserve(bytes, &params.shape()) {
            match self.device.upload_r1cs(s, &host) {
                Ok(m) => Some(Arc::new(m)),
                Err(e) => {
                    tracing::warn!(params_id = key, bytes, error = %e, "the circuit's matrices could not be uploaded; evaluating a/b/c on the host");
                    None
                }
            }
        } else {
            tracing::info!(params_id = key, bytes, proofs = self.proofs_on_device(), "the proofs on the device leave no room for the circuit's matrices now; evaluating a/b/c on the host, a later proof uploads them");
            None
        };
        let uploaded = matrices.is_some();
        let entry = ResidentMatrices { r1cs_id: r1cs.id(), matrices: matrices.clone(), since: Instant::now() };
        self.matrices.lock().insert(key, Arc::new(entry));
        Ok((matrices, uploaded))
    }
}

/// The device vectors of a deferred assignment: its inputs and aux
/// uploaded (on `s`, the caller's copy stream), a, b, c over the `domain`
/// evaluated from `r1cs` and checked, on the device when the matrices are
/// resident, else on the host. Returns (a, b, c, aux); the assignment's
/// host buffers may be released when it returns.
pub(super) fn upload_and_evaluate(
    ctx: &GpuContext,
    s: &GpuStream,
    params: &ParamsFile,
    r1cs: &Arc<CompiledR1cs>,
    asg: &Assignment,
    domain: usize,
    t: &mut PhaseTimings,
) -> Result<[DeviceScalars; 4], ProveError> {
    let dev = &ctx.device;
    let n = asg.num_constraints;
    let t0 = Instant::now();
    let (matrices, uploaded) = ctx.resident_matrices(params, r1cs, s)?;
    if uploaded {
        t.push("gpu_matrices_upload", t0.elapsed());
    }
    let h2d = DeviceSpan::begin(s).map_err(gpu_err)?;
    let inputs = dev.upload_scalars(s, &asg.input).map_err(gpu_err)?;
    let mut aux = dev.alloc_scalars(s, asg.num_aux.max(1)).map_err(gpu_err)?;
    dev.write_scalars(s, &mut aux, asg.aux()).map_err(gpu_err)?;
    t.push("h2d", h2d.end().map_err(gpu_err)?);
    let Some(m) = matrices else {
        let t1 = Instant::now();
        let [a, b, c] = host_products(ctx, s, r1cs, asg, domain)?;
        t.push("abc_host", t1.elapsed());
        return Ok([a, b, c, aux]);
    };
    let span = DeviceSpan::begin(s).map_err(gpu_err)?;
    let p = dev.r1cs_products(s, &m, &inputs, &aux, domain).map_err(gpu_err)?;
    t.push("abc", span.end().map_err(gpu_err)?);
    if let Some(row) = p.first_unsatisfied {
        return Err(unsatisfied(row, n));
    }
    Ok([p.a, p.b, p.c, aux])
}

/// The fallback: a/b/c evaluated and checked on the host a block of rows
/// at a time, each block uploaded into its place.
fn host_products(ctx: &GpuContext, s: &GpuStream, r1cs: &CompiledR1cs, asg: &Assignment, domain: usize) -> Result<[DeviceScalars; 3], ProveError> {
    let dev = &ctx.device;
    let n = asg.num_constraints;
    let mut out = [dev.alloc_scalars(s, domain).map_err(gpu_err)?, dev.alloc_scalars(s, domain).map_err(gpu_err)?, dev.alloc_scalars(s, domain).map_err(gpu_err)?];
    let rows = HOST_ROWS.min(n);
    let mut stage = [vec![Scalar::ZERO; rows], vec![Scalar::ZERO; rows], vec![Scalar::ZERO; rows]];
    let mut lo = 0;
    while lo < n {
        let hi = (lo + HOST_ROWS).min(n);
        let [a, b, c] = &mut stage;
        let len = hi - lo;
        if let Some(row) = r1cs.products_checked(lo, &asg.input, asg.aux(), [&mut a[..len], &mut b[..len], &mut c[..len]]) {
            return Err(unsatisfied(row, n));
        }
        for (dst, src) in out.iter_mut().zip(&stage) {
            dev.write_scalars_at(s, dst, lo, &src[..len]).map_err(gpu_err)?;
        }
        lo = hi;
    }
    Ok(out)
}
