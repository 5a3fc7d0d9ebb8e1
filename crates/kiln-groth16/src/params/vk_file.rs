//! The `.vk` file beside a `.params` file: filecoin-proofs verifies with
//! the verifying key in `<name>.vk`, kiln with the one inside `<name>.params`.
//! If they differ, every proof kiln makes would verify for kiln and fail for
//! the chain (or the other way round), so such parameters are refused when
//! they are opened.

use std::io::Read;

use bellperson::groth16::VerifyingKey;
use blstrs::Bls12;

use super::ParamsFile;
use crate::error::ParamsError;

/// A `.vk` larger than this is not one (a 32 GiB PoRep's is 6.5 KiB).
const MAX_VK_BYTES: u64 = 64 << 20;

/// Checks the `.vk` beside `params`' file, if there is one.
pub(super) fn check_beside(params: &ParamsFile) -> Result<(), ParamsError> {
    let Some(path) = params.path() else { return Ok(()) };
    let vk_path = path.with_extension("vk");
    let mismatch = |why: String| ParamsError::VkMismatch { params: path.to_path_buf(), vk: vk_path.clone(), why };
    let file = match std::fs::File::open(&vk_path) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(ParamsError::Io { path: vk_path, source: e }),
    };
    let mut bytes = Vec::new();
    // Read with a cap: a hostile or wrong file is not read whole.
    file.take(MAX_VK_BYTES + 1).read_to_end(&mut bytes).map_err(|e| ParamsError::Io { path: vk_path.clone(), source: e })?;
    if bytes.len() as u64 > MAX_VK_BYTES {
        return Err(mismatch(format!("the .vk is over {MAX_VK_BYTES} bytes")));
    }
    let mut ours = Vec::new();
    params.vk().write(&mut ours).expect("writing to a Vec cannot fail");
    if bytes == ours {
        return Ok(());
    }
    let theirs = VerifyingKey::<Bls12>::read(&bytes[..]).map_err(|e| mismatch(format!("the .vk is not a verifying key ({e})")))?;
    Err(mismatch(describe(params.vk(), &theirs, bytes.len(), ours.len())))
}

/// What differs, in words.
fn describe(ours: &VerifyingKey<Bls12>, theirs: &VerifyingKey<Bls12>, their_len: usize, our_len: usize) -> String {
    let fields = [
        ("alpha_g1", ours.alpha_g1 != theirs.alpha_g1),
        ("beta_g1", ours.beta_g1 != theirs.beta_g1),
        ("beta_g2", ours.beta_g2 != theirs.beta_g2),
        ("gamma_g2", ours.gamma_g2 != theirs.gamma_g2),
        ("delta_g1", ours.delta_g1 != theirs.delta_g1),
        ("delta_g2", ours.delta_g2 != theirs.delta_g2),
    ];
    let mut differ: Vec<String> = fields.iter().filter(|f| f.1).map(|f| f.0.to_string()).collect();
    if ours.ic.len() != theirs.ic.len() {
        differ.push(format!("ic ({} points in the .params, {} in the .vk)", ours.ic.len(), theirs.ic.len()));
    } else if ours.ic != theirs.ic {
        differ.push("ic".to_string());
    }
    if differ.is_empty() {
        format!("the .vk is {their_len} bytes where the key is {our_len} (trailing bytes)")
    } else {
        format!("{} differ", differ.join(", "))
    }
}
