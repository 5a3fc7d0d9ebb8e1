//! [`Payload`]: one proof request's fields, named as cuzk.v1's
//! SubmitProofRequest names them (bytes in base64), as `cargo xtask
//! gen-vanilla` writes them and tests and benchmarks read them back.

use serde::{Deserialize, Serialize};

/// Which cuzk.v1 ProofKind a payload is for (the proto enum's names).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum PayloadKind {
    PorepSealCommit,
    SnapDealsUpdate,
    WindowPostPartition,
    WinningPost,
}

impl PayloadKind {
    pub const ALL: [PayloadKind; 4] =
        [PayloadKind::PorepSealCommit, PayloadKind::SnapDealsUpdate, PayloadKind::WindowPostPartition, PayloadKind::WinningPost];

    /// The file name `gen-vanilla` writes this kind to.
    pub fn file_name(self) -> &'static str {
        match self {
            PayloadKind::PorepSealCommit => "porep-c2.json",
            PayloadKind::SnapDealsUpdate => "snap-deals.json",
            PayloadKind::WindowPostPartition => "window-post.json",
            PayloadKind::WinningPost => "winning-post.json",
        }
    }
}

/// The request fields of one proof (what is not set stays empty / 0).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Payload {
    pub proof_kind: PayloadKind,
    pub sector_size: u64,
    pub registered_proof: u64,
    #[serde(default, with = "b64", skip_serializing_if = "Vec::is_empty")]
    pub vanilla_proof: Vec<u8>,
    #[serde(default, with = "b64_list", skip_serializing_if = "Vec::is_empty")]
    pub vanilla_proofs: Vec<Vec<u8>>,
    #[serde(default)]
    pub sector_number: u64,
    #[serde(default)]
    pub miner_id: u64,
    #[serde(default, with = "b64", skip_serializing_if = "Vec::is_empty")]
    pub randomness: Vec<u8>,
    #[serde(default)]
    pub partition_index: u32,
    #[serde(default, with = "b64", skip_serializing_if = "Vec::is_empty")]
    pub comm_r_old: Vec<u8>,
    #[serde(default, with = "b64", skip_serializing_if = "Vec::is_empty")]
    pub comm_r_new: Vec<u8>,
    #[serde(default, with = "b64", skip_serializing_if = "Vec::is_empty")]
    pub comm_d_new: Vec<u8>,
}

impl Payload {
    /// An empty payload of `kind`.
    pub fn new(kind: PayloadKind, sector_size: u64, registered_proof: u64) -> Self {
        Payload {
            proof_kind: kind,
            sector_size,
            registered_proof,
            vanilla_proof: Vec::new(),
            vanilla_proofs: Vec::new(),
            sector_number: 0,
            miner_id: 0,
            randomness: Vec::new(),
            partition_index: 0,
            comm_r_old: Vec::new(),
            comm_r_new: Vec::new(),
            comm_d_new: Vec::new(),
        }
    }
}

#[cfg(feature = "wire")]
impl Payload {
    /// The SubmitProofRequest this payload describes, as Curio would send
    /// it (its fields are the request's, named alike); the request id,
    /// priority and deadline are left for the caller.
    pub fn into_request(self) -> kiln_proto::v1::SubmitProofRequest {
        use kiln_proto::v1::ProofKind;
        let kind = match self.proof_kind {
            PayloadKind::PorepSealCommit => ProofKind::PorepSealCommit,
            PayloadKind::SnapDealsUpdate => ProofKind::SnapDealsUpdate,
            PayloadKind::WindowPostPartition => ProofKind::WindowPostPartition,
            PayloadKind::WinningPost => ProofKind::WinningPost,
        };
        kiln_proto::v1::SubmitProofRequest {
            proof_kind: kind as i32,
            sector_size: self.sector_size,
            registered_proof: self.registered_proof,
            vanilla_proof: self.vanilla_proof,
            vanilla_proofs: self.vanilla_proofs,
            sector_number: self.sector_number,
            miner_id: self.miner_id,
            randomness: self.randomness,
            partition_index: self.partition_index,
            comm_r_old: self.comm_r_old,
            comm_r_new: self.comm_r_new,
            comm_d_new: self.comm_d_new,
            ..Default::default()
        }
    }
}

mod b64 {
    use base64::Engine as _;
    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(v: &[u8], s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&base64::engine::general_purpose::STANDARD.encode(v))
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<u8>, D::Error> {
        let s = String::deserialize(d)?;
        base64::engine::general_purpose::STANDARD.decode(s).map_err(serde::de::Error::custom)
    }
}

mod b64_list {
    use base64::Engine as _;
    use serde::ser::SerializeSeq;
    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(v: &[Vec<u8>], s: S) -> Result<S::Ok, S::Error> {
        let mut seq = s.serialize_seq(Some(v.len()))?;
        for b in v {
            seq.serialize_element(&base64::engine::general_purpose::STANDARD.encode(b))?;
        }
        seq.end()
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<Vec<u8>>, D::Error> {
        Vec::<String>::deserialize(d)?
            .into_iter()
            .map(|s| base64::engine::general_purpose::STANDARD.decode(s).map_err(serde::de::Error::custom))
            .collect()
    }
}

/// Decodes each of a request's `vanilla_proofs` as bincode `T`; the error
/// names the entry, what it should have been (`what`) and the sector size.
pub(crate) fn decode_vanilla<T: serde::de::DeserializeOwned>(blobs: &[Vec<u8>], what: &str, sector_size: u64) -> Result<Vec<T>, String> {
    blobs
        .iter()
        .enumerate()
        .map(|(i, b)| {
            bincode::deserialize::<T>(b).map_err(|e| {
                format!("vanilla_proofs[{i}] is not a bincode {what} of a {} sector: {e}", crate::registered::sector_size_name(sector_size))
            })
        })
        .collect()
}
