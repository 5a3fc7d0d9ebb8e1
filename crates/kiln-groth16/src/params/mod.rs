//! Groth16 parameters in bellperson's file format (Filecoin's `.params`):
//! sections are located once, and points are read and decoded chunk by
//! chunk when a prover needs them, so a file is never copied whole into RAM.
//! The file is guarded against changes while in use ([`file`]): decoded
//! points are read with `pread`, never through the mapping, and a file
//! changed in place fails the proof reading it.
//!
//! Layout (all integers big-endian, points uncompressed):
//! `vk | u32 |h| h.. | u32 |l| l.. | u32 |a| a.. | u32 |b_g1| b_g1.. | u32 |b_g2| b_g2..`
//! with vk = `alpha_g1 beta_g1 beta_g2 gamma_g2 delta_g1 delta_g2 u32 |ic| ic..`.

use std::cell::RefCell;
use std::ops::Range;
use std::path::{Path, PathBuf};

use bellperson::groth16::{prepare_verifying_key, Parameters, PreparedVerifyingKey, VerifyingKey};
use blstrs::{Bls12, G1Affine, G2Affine, Scalar};
use rayon::prelude::*;

use crate::error::ParamsError;
use crate::setup::table::{g1_table, g2_table};
use crate::setup::SetupScalars;

mod file;
mod vk_file;

use file::GuardedFile;

const G1_BYTES: usize = 96;
const G2_BYTES: usize = 192;
const VK_FIXED_BYTES: usize = 3 * G1_BYTES + 3 * G2_BYTES; // alpha, beta, delta in G1; beta, gamma, delta in G2

/// The five point vectors of a proving key.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Section {
    /// `tau^i t(tau) / delta`, one per coefficient of h (domain - 1).
    H,
    /// One per aux variable.
    L,
    /// A query: inputs, then aux variables with A density.
    A,
    /// B query in G1: inputs with B density, then aux with B density.
    BG1,
    /// B query in G2 (same selection as BG1).
    BG2,
}

impl Section {
    pub const ALL: [Section; 5] = [Section::H, Section::L, Section::A, Section::BG1, Section::BG2];
    pub fn name(self) -> &'static str {
        match self {
            Section::H => "h",
            Section::L => "l",
            Section::A => "a",
            Section::BG1 => "b_g1",
            Section::BG2 => "b_g2",
        }
    }
    pub(crate) fn point_bytes(self) -> usize {
        if self == Section::BG2 { G2_BYTES } else { G1_BYTES }
    }
    fn index(self) -> usize {
        self as usize
    }
}

/// Where a section's points lie in the file.
#[derive(Clone, Copy, Debug)]
struct Span {
    offset: usize,
    len: usize,
}

/// The sizes of a proving key's vectors.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ParamsShape {
    /// `ic.len()`: public inputs including ONE.
    pub num_inputs: usize,
    pub h_len: usize,
    pub l_len: usize,
    pub a_len: usize,
    pub b_g1_len: usize,
    pub b_g2_len: usize,
}

impl ParamsShape {
    /// The evaluation domain the parameters were made for (`h_len + 1`).
    pub fn domain(&self) -> usize {
        self.h_len + 1
    }
}

enum Backing {
    File(GuardedFile),
    Owned(Vec<u8>),
    /// A test setup: every point is a known multiple of the standard
    /// generator, made when needed (on the CPU chunk by chunk, or on a GPU).
    Setup(SetupScalars),
}

/// Raw points of one section of a [`ParamsFile`] ([`ParamsFile::raw`]).
pub struct RawPoints<'a> {
    backing: &'a Backing,
    start: usize,
    len: usize,
}

impl RawPoints<'_> {
    /// Bytes in the range.
    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Fills `dst` with bytes `offset..offset + dst.len()` of the range
    /// (`pread` for a file; safe to call from several threads at once).
    pub fn read_into(&self, offset: usize, dst: &mut [u8]) -> Result<(), ParamsError> {
        let end = offset.checked_add(dst.len()).filter(|&e| e <= self.len);
        assert!(end.is_some(), "bytes {offset}..+{} of a range of {}", dst.len(), self.len);
        match self.backing {
            Backing::File(f) => f.read_at(self.start + offset, dst),
            Backing::Owned(v) => {
                dst.copy_from_slice(&v[self.start + offset..self.start + offset + dst.len()]);
                Ok(())
            }
            Backing::Setup(_) => unreachable!("checked in ParamsFile::raw"),
        }
    }
}

thread_local! {
    /// Each decoding thread's buffer for the bytes it reads with `pread`.
    static READ_BUF: RefCell<Vec<u8>> = const { RefCell::new(Vec::new()) };
}

impl Backing {
    /// Bytes in the file form (0 for a test setup, which has none).
    fn len(&self) -> usize {
        match self {
            Backing::File(f) => f.len(),
            Backing::Owned(v) => v.len(),
            Backing::Setup(_) => 0,
        }
    }

    /// Calls `f` with bytes `at..at + len`: a slice of memory, or for a
    /// file what `pread` read into this thread's buffer (never the mapping).
    fn with_bytes<T>(&self, at: usize, len: usize, f: impl FnOnce(&[u8]) -> Result<T, ParamsError>) -> Result<T, ParamsError> {
        match self {
            Backing::File(file) => READ_BUF.with(|buf| {
                let mut buf = buf.borrow_mut();
                buf.resize(len, 0);
                file.read_at(at, &mut buf)?;
                f(&buf)
            }),
            Backing::Owned(v) => f(&v[at..at + len]),
            Backing::Setup(_) => f(&[]),
        }
    }

    /// The file is unchanged since it was opened (always, for memory).
    fn check(&self) -> Result<(), ParamsError> {
        match self {
            Backing::File(f) => f.check(),
            _ => Ok(()),
        }
    }
}

/// A Groth16 proving key, mapped from a file (or held in memory for tests,
/// or a test setup's scalars).
pub struct ParamsFile {
    id: u64,
    backing: Backing,
    path: Option<PathBuf>,
    vk: VerifyingKey<Bls12>,
    pvk: PreparedVerifyingKey<Bls12>,
    spans: [Span; 5],
}

impl std::fmt::Debug for ParamsFile {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ParamsFile").field("path", &self.path).field("shape", &self.shape()).finish()
    }
}

impl ParamsFile {
    /// Open (and map) a `.params` file and index its sections. Reads only
    /// the verifying key and the section headers; fails on a truncated or
    /// oversized file, and on a verifying key that differs from the `.vk`
    /// file beside it (`<name>.vk`, as filecoin-proofs writes them) when
    /// there is one.
    pub fn open(path: impl AsRef<Path>) -> Result<Self, ParamsError> {
        let path = path.as_ref();
        let mut p = Self::index(Backing::File(GuardedFile::open(path)?))?;
        p.path = Some(path.to_path_buf());
        vk_file::check_beside(&p)?;
        Ok(p)
    }

    /// Parameters held in memory, in the file format.
    pub fn from_bytes(bytes: Vec<u8>) -> Result<Self, ParamsError> {
        Self::index(Backing::Owned(bytes))
    }

    /// Serialize bellperson parameters into the file format, in memory.
    pub fn from_parameters(params: &Parameters<Bls12>) -> Self {
        let mut bytes = Vec::new();
        params.write(&mut bytes).expect("writing to a Vec cannot fail");
        Self::from_bytes(bytes).expect("bellperson writes well-formed parameters")
    }

    fn index(backing: Backing) -> Result<Self, ParamsError> {
        let total = backing.len();
        let need = |what: &str, end: usize| {
            if end > total {
                Err(ParamsError::Truncated { what: what.to_string(), needed: end as u64, actual: total as u64 })
            } else {
                Ok(())
            }
        };
        let u32_at = |at: usize| backing.with_bytes(at, 4, |b| Ok(read_u32(b, 0) as usize));
        need("verifying key", VK_FIXED_BYTES + 4)?;
        let ic_len = u32_at(VK_FIXED_BYTES)?;
        let vk_end = (VK_FIXED_BYTES + 4).saturating_add(ic_len.saturating_mul(G1_BYTES));
        need("verifying key ic", vk_end)?;
        let vk = backing.with_bytes(0, vk_end, |b| {
            VerifyingKey::<Bls12>::read(b).map_err(|_| ParamsError::InvalidPoint {
                what: "verifying key",
                index: 0,
                reason: "not a valid curve point",
            })
        })?;
        let mut spans = [Span { offset: 0, len: 0 }; 5];
        let mut at = vk_end;
        for s in Section::ALL {
            need(&format!("{} length", s.name()), at + 4)?;
            let len = u32_at(at)?;
            let offset = at + 4;
            let end = offset.saturating_add(len.saturating_mul(s.point_bytes()));
            need(&format!("{} ({len} points)", s.name()), end)?;
            spans[s.index()] = Span { offset, len };
            at = end;
        }
        if at != total {
            return Err(ParamsError::TrailingBytes { extra: (total - at) as u64 });
        }
        backing.check()?;
        Ok(Self::assemble(backing, vk, spans))
    }

    /// A test setup's proving key, held as the scalars of its points
    /// (`SetupScalars`), with its verifying key: no file and no points in
    /// host memory. The CPU backend makes points from the scalars chunk by
    /// chunk; a GPU makes them once in its memory (see `setup::test_setup`).
    pub fn from_setup_scalars(vk: VerifyingKey<Bls12>, scalars: SetupScalars) -> Self {
        let lens = [scalars.h.len(), scalars.l.len(), scalars.a.len(), scalars.b.len(), scalars.b.len()];
        let spans = lens.map(|len| Span { offset: 0, len });
        Self::assemble(Backing::Setup(scalars), vk, spans)
    }

    fn assemble(backing: Backing, vk: VerifyingKey<Bls12>, spans: [Span; 5]) -> Self {
        let pvk = prepare_verifying_key(&vk);
        static NEXT_ID: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);
        let id = NEXT_ID.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        ParamsFile { id, backing, path: None, vk, pvk, spans }
    }

    /// The scalars of a test setup's points (`None` for parameters read from
    /// a file): `scalars(s)[i] * G` is point i of section s.
    pub fn setup_scalars(&self, section: Section) -> Option<&[Scalar]> {
        let Backing::Setup(sc) = &self.backing else { return None };
        Some(match section {
            Section::H => &sc.h,
            Section::L => &sc.l,
            Section::A => &sc.a,
            Section::BG1 | Section::BG2 => &sc.b,
        })
    }

    /// Whether these are a test setup's parameters (no file; never for production proofs).
    pub fn is_test_setup(&self) -> bool {
        matches!(self.backing, Backing::Setup(_))
    }

    /// A process-unique id of this instance (caches of decoded or
    /// device-resident points are keyed by it).
    pub fn id(&self) -> u64 {
        self.id
    }

    /// The file this was mapped from, if any.
    pub fn path(&self) -> Option<&Path> {
        self.path.as_deref()
    }

    /// Host bytes the parameters take: the file's size, or a test setup's scalars.
    pub fn size_bytes(&self) -> u64 {
        match &self.backing {
            Backing::Setup(sc) => sc.bytes(),
            b => b.len() as u64,
        }
    }

    pub fn vk(&self) -> &VerifyingKey<Bls12> {
        &self.vk
    }

    pub fn prepared_vk(&self) -> &PreparedVerifyingKey<Bls12> {
        &self.pvk
    }

    pub fn shape(&self) -> ParamsShape {
        let l = |s: Section| self.spans[s.index()].len;
        ParamsShape {
            num_inputs: self.vk.ic.len(),
            h_len: l(Section::H),
            l_len: l(Section::L),
            a_len: l(Section::A),
            b_g1_len: l(Section::BG1),
            b_g2_len: l(Section::BG2),
        }
    }

    /// Number of points in `section`.
    pub fn len(&self, section: Section) -> usize {
        self.spans[section.index()].len
    }

    /// The raw (uncompressed, big-endian) bytes of points `range` of
    /// `section`, for a GPU to stream, as a reader: `pread` on a file (a
    /// file cut short is an error, never a SIGBUS), once its length and
    /// modification time are found unchanged. Parameters read from a file
    /// or memory only: a test setup has no encoded form (see
    /// [`is_test_setup`](Self::is_test_setup)).
    pub fn raw(&self, section: Section, range: Range<usize>) -> Result<RawPoints<'_>, ParamsError> {
        assert!(!matches!(self.backing, Backing::Setup(_)), "a test setup's points have no file encoding");
        self.backing.check()?;
        let bytes = self.byte_range(section, range);
        Ok(RawPoints { backing: &self.backing, start: bytes.start, len: bytes.len() })
    }

    /// Whether the file these were read from should be opened again for
    /// new work, and why: it changed in place (proofs reading it fail), or
    /// its path now names another file (these stay valid). `None` for
    /// parameters not read from a file.
    pub fn stale(&self) -> Option<String> {
        match &self.backing {
            Backing::File(f) => f.stale(),
            _ => None,
        }
    }

    /// The file these were read from is as it was when opened (same length
    /// and modification time); always true for parameters not from a file.
    pub fn check_unchanged(&self) -> Result<(), ParamsError> {
        self.backing.check()
    }

    fn byte_range(&self, section: Section, range: Range<usize>) -> Range<usize> {
        let span = self.spans[section.index()];
        assert!(range.start <= range.end && range.end <= span.len, "{} range {range:?} out of {}", section.name(), span.len);
        let b = section.point_bytes();
        span.offset + range.start * b..span.offset + range.end * b
    }

    /// Decode G1 points `range` of `section` into `out` (cleared first), in
    /// parallel. Checks that each point is on the curve and not at infinity;
    /// the subgroup check is skipped, as bellperson's mapped reader does
    /// (every proof is verified, so a bad point cannot yield an accepted proof).
    /// A test setup's points are computed from their scalars instead.
    pub fn g1_points(&self, section: Section, range: Range<usize>, out: &mut Vec<G1Affine>) -> Result<(), ParamsError> {
        assert!(section != Section::BG2, "b_g2 holds G2 points");
        if let Some(sc) = self.setup_scalars(section) {
            out.clear();
            out.resize(range.len(), G1Affine::default());
            g1_table().mul_into(&sc[range], out, &|_| {});
            return Ok(());
        }
        let start = range.start;
        self.decode_into(self.byte_range(section, range), out, G1_BYTES, |chunk, i| {
            let bytes: &[u8; G1_BYTES] = chunk.try_into().expect("chunk is one point");
            let p = Option::<G1Affine>::from(G1Affine::from_uncompressed_unchecked(bytes));
            check(p, section, start + i)
        })
    }

    /// Decode G2 points `range` of the b_g2 section into `out`.
    pub fn g2_points(&self, range: Range<usize>, out: &mut Vec<G2Affine>) -> Result<(), ParamsError> {
        if let Some(sc) = self.setup_scalars(Section::BG2) {
            out.clear();
            out.resize(range.len(), G2Affine::default());
            g2_table().mul_into(&sc[range], out, &|_| {});
            return Ok(());
        }
        let start = range.start;
        self.decode_into(self.byte_range(Section::BG2, range), out, G2_BYTES, |chunk, i| {
            let bytes: &[u8; G2_BYTES] = chunk.try_into().expect("chunk is one point");
            let p = Option::<G2Affine>::from(G2Affine::from_uncompressed_unchecked(bytes));
            check(p, Section::BG2, start + i)
        })
    }

    /// Decodes the points in file bytes `bytes` into `out` (cleared first),
    /// blocks of 4096 points in parallel, each block read on its own (with
    /// `pread` for a file). A file changed before or during the reads is
    /// [`ParamsError::Changed`], whatever the bytes decoded to.
    fn decode_into<P: Send + Copy + Default>(
        &self,
        bytes: Range<usize>,
        out: &mut Vec<P>,
        point_bytes: usize,
        decode: impl Fn(&[u8], usize) -> Result<P, ParamsError> + Sync,
    ) -> Result<(), ParamsError> {
        const BLOCK: usize = 4096;
        self.backing.check()?;
        let n = bytes.len() / point_bytes;
        out.clear();
        out.resize(n, P::default());
        let decoded = out.par_chunks_mut(BLOCK).enumerate().try_for_each(|(ci, dst)| {
            let at = bytes.start + ci * BLOCK * point_bytes;
            self.backing.with_bytes(at, dst.len() * point_bytes, |raw| {
                for (j, d) in dst.iter_mut().enumerate() {
                    *d = decode(&raw[j * point_bytes..(j + 1) * point_bytes], ci * BLOCK + j)?;
                }
                Ok(())
            })
        });
        // A change wins over what its bytes decoded to.
        self.backing.check()?;
        decoded
    }
}

fn check<P: group::prime::PrimeCurveAffine>(p: Option<P>, section: Section, index: usize) -> Result<P, ParamsError> {
    match p {
        None => Err(ParamsError::InvalidPoint { what: section.name(), index, reason: "not on the curve" }),
        Some(p) if bool::from(p.is_identity()) => {
            Err(ParamsError::InvalidPoint { what: section.name(), index, reason: "the point at infinity" })
        }
        Some(p) => Ok(p),
    }
}

fn read_u32(data: &[u8], at: usize) -> u32 {
    u32::from_be_bytes(data[at..at + 4].try_into().expect("4 bytes"))
}
