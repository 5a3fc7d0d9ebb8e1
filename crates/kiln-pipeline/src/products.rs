//! Where a partition's a/b/c = A.w, B.w, C.w are computed: during
//! synthesis on the host (beside the witness; they then travel in the pool
//! buffer and across PCIe), or by the prover on its GPU from the circuit's
//! compiled matrices kept in VRAM, in which case synthesis writes only the
//! witness, the partition's pool buffer holds only aux, and only the
//! witness crosses PCIe (a 32 GiB PoRep partition: 4.2 GiB instead of
//! 16.7).
//!
//! The choice is made per partition, before its memory is acquired, from
//! what the engine's backends say they can do with this circuit and these
//! parameters (a GPU backend: the matrices fit in VRAM beside the
//! parameters; a CPU backend never) and the `device_products` setting
//! (`auto` by default; `always` and `never` force it for measurement).
//!
//! Products left to the GPU are checked there (a*b = c on every row). A
//! partition whose deferred products are rejected, or whose synthesis
//! failed while they were deferred, is redone once on the reference path:
//! the gadget witness with a/b/c on the host and the host's check.

use std::sync::Arc;

use kiln_groth16::{ParamsFile, ProductsSupport, ProverBackend};
use kiln_synth::CompiledR1cs;
use serde::{Deserialize, Serialize};

/// The `device_products` setting.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DeviceProducts {
    /// On the GPU whenever every backend evaluates them on its device and
    /// the circuit's matrices fit there; else on the host.
    #[default]
    Auto,
    /// On the GPU whenever every backend evaluates them on its device, even
    /// when the matrices do not fit (the backend then evaluates them on the
    /// host and uploads them): for measurement.
    Always,
    /// Always on the host, during synthesis.
    Never,
}

/// Whether a compiled circuit's products are left to backends that
/// answered `support` (every backend that may take the partition).
pub(crate) fn leave_to_prover(setting: DeviceProducts, support: impl IntoIterator<Item = ProductsSupport>) -> bool {
    let mut any = false;
    for s in support {
        any = true;
        let ok = match setting {
            DeviceProducts::Never => false,
            DeviceProducts::Auto => s == ProductsSupport::Yes,
            DeviceProducts::Always => s != ProductsSupport::No,
        };
        if !ok {
            return false;
        }
    }
    any
}

/// The compiled circuit whose products a partition leaves to the prover,
/// or `None` when synthesis computes them. `reference`: the partition is
/// being redone on the reference path.
pub(crate) fn plan(
    setting: DeviceProducts,
    compiled: Option<Arc<CompiledR1cs>>,
    params: &ParamsFile,
    backends: &[Arc<dyn ProverBackend>],
    reference: bool,
) -> Option<Arc<CompiledR1cs>> {
    if reference || setting == DeviceProducts::Never {
        return None;
    }
    let r1cs = compiled?;
    leave_to_prover(setting, backends.iter().map(|b| b.device_products(params, &r1cs))).then_some(r1cs)
}

#[cfg(test)]
mod tests {
    use super::*;
    use DeviceProducts::{Always, Auto, Never};
    use ProductsSupport::{No, NoRoom, Yes};

    #[test]
    fn the_setting_and_every_backend_decide() {
        assert!(leave_to_prover(Auto, [Yes]));
        assert!(leave_to_prover(Auto, [Yes, Yes]));
        assert!(!leave_to_prover(Auto, [Yes, NoRoom]), "a backend without room would evaluate them on the host");
        assert!(!leave_to_prover(Auto, [Yes, No]), "a CPU backend beside a GPU one");
        assert!(leave_to_prover(Always, [Yes, NoRoom]), "forced: a backend without room evaluates them on the host");
        assert!(!leave_to_prover(Always, [No]), "never to a backend without a device");
        assert!(!leave_to_prover(Never, [Yes]));
        assert!(!leave_to_prover(Auto, []), "no backend answered");
    }

    #[test]
    fn the_setting_reads_as_snake_case() {
        for (text, want) in [("\"auto\"", Auto), ("\"always\"", Always), ("\"never\"", Never)] {
            assert_eq!(serde_json::from_str::<DeviceProducts>(text).unwrap(), want);
        }
        assert_eq!(DeviceProducts::default(), Auto);
    }
}
