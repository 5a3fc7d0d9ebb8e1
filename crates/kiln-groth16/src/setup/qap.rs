//! The QAP evaluated at tau: for every variable i, `A_i(tau) = sum_j
//! A[j][i] * L_j(tau)` over the constraints j (likewise B and C), where
//! `L_j` is the Lagrange basis of the evaluation domain. A parameter
//! generator needs nothing else from the circuit.
//!
//! Two ways through the circuit: [`evaluate`] runs it once on one thread;
//! [`evaluate_segmented`] runs a [`SegmentedCircuit`]'s prefix once and its
//! segments on every core, each writing its own variables' evaluations in
//! place (a 32 GiB PoRep partition is 18 segments of ~7 M constraints).

use bellpepper_core::{Circuit, ConstraintSystem, Index, LinearCombination, SynthesisError, Variable};
use blstrs::Scalar;
use ff::{Field, PrimeField};
use kiln_synth::SegmentedCircuit;
use rayon::prelude::*;

/// `A_i(tau)`, `B_i(tau)`, `C_i(tau)` for every variable: inputs first
/// (ONE is input 0), then aux, as the A/B queries lay them out. The
/// per-input constraints `input * 0 = 0` that Groth16 appends are included.
pub struct Qap {
    pub num_inputs: usize,
    pub num_aux: usize,
    /// The evaluation domain (a power of two).
    pub domain: usize,
    pub at: Vec<Scalar>,
    pub bt: Vec<Scalar>,
    pub ct: Vec<Scalar>,
    /// `Z(tau) = tau^domain - 1`.
    pub z_tau: Scalar,
}

/// Sizes of one run of (part of) a circuit.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct Sizes {
    inputs: usize,
    aux: usize,
    constraints: usize,
}

/// Asked, once the circuit's sizes are counted and before anything of
/// their size is allocated, for the host bytes the evaluation and the
/// scalars made from it will need at most ([`peak_bytes`]); an error stops
/// the evaluation.
pub type Admit<'a> = &'a mut dyn FnMut(u64) -> Result<(), String>;

/// Host bytes of a QAP of this size plus the scalars made from it, at
/// most: three evaluations per variable and the Lagrange basis, then the
/// L, A and B scalars (one per variable at most each) and H's (the domain)
/// while the evaluations are consumed.
pub fn peak_bytes(num_variables: usize, domain: usize) -> u64 {
    let fr = std::mem::size_of::<Scalar>() as u64;
    (4 * num_variables as u64 + 2 * domain as u64) * fr
}

fn admit_sizes(admit: Admit<'_>, s: Sizes) -> Result<(), SynthesisError> {
    admit(peak_bytes(s.inputs + s.aux, domain_of(s))).map_err(|e| SynthesisError::IoError(std::io::Error::other(e)))
}

/// The QAP of `circuit` at `tau`, on one thread.
pub fn evaluate<C: Circuit<Scalar> + Clone>(circuit: C, tau: Scalar, admit: Admit<'_>) -> Result<Qap, SynthesisError> {
    let sizes = count(|cs| circuit.clone().synthesize(cs))?;
    admit_sizes(admit, sizes)?;
    let mut qap = Qap::zeroed(Sizes::default(), tau);
    qap.domain = domain_of(sizes);
    qap.z_tau = tau.pow_vartime([qap.domain as u64]) - Scalar::ONE;
    let lagrange = lagrange_at(tau, qap.domain);
    let mut cs = QapCs::new(&lagrange, Placement::Whole { num_inputs: sizes.inputs }, sizes.inputs + sizes.aux);
    cs.alloc_input(|| "ONE", || Ok(Scalar::ONE))?;
    circuit.synthesize(&mut cs)?;
    cs.expect(sizes)?;
    // The accumulators are laid out as the QAP is: take them as they are.
    let [at, bt, ct] = cs.acc;
    (qap.num_inputs, qap.num_aux, qap.at, qap.bt, qap.ct) = (sizes.inputs, sizes.aux, at, bt, ct);
    qap.add_input_constraints(&lagrange, sizes.constraints);
    Ok(qap)
}

/// The QAP of a segmented circuit at `tau`: the prefix once, the segments
/// in parallel. Every segment must have the first one's sizes (a segment
/// that differs is an error, as the circuit's contract is broken).
pub fn evaluate_segmented<S: SegmentedCircuit>(circuit: &S, tau: Scalar, admit: Admit<'_>) -> Result<Qap, SynthesisError> {
    let k = circuit.segments();
    let prefix = count(|cs| circuit.synthesize_part(cs, None))?;
    let first = if k == 0 { prefix } else { count(|cs| circuit.synthesize_part(cs, Some(0)))? };
    let seg = Sizes {
        inputs: first.inputs - prefix.inputs,
        aux: first.aux - prefix.aux,
        constraints: first.constraints - prefix.constraints,
    };
    let whole = Sizes {
        inputs: prefix.inputs + k * seg.inputs,
        aux: prefix.aux + k * seg.aux,
        constraints: prefix.constraints + k * seg.constraints,
    };
    admit_sizes(admit, whole)?;
    let mut qap = Qap::zeroed(whole, tau);
    let lagrange = lagrange_at(tau, qap.domain);

    let mut cs = QapCs::new(&lagrange, Placement::Whole { num_inputs: prefix.inputs }, prefix.inputs + prefix.aux);
    cs.alloc_input(|| "ONE", || Ok(Scalar::ONE))?;
    circuit.synthesize_part(&mut cs, None)?;
    cs.expect(prefix)?;
    let mut prefix_acc = cs.acc;

    // Each segment writes its own variables in place and returns what it
    // adds to the prefix's variables (shared, so summed afterwards).
    let ni = whole.inputs;
    let [at, bt, ct] = [&mut qap.at, &mut qap.bt, &mut qap.ct].map(|v| {
        let (inputs, aux) = v.split_at_mut(ni);
        let ins = segment_slices(inputs, prefix.inputs, seg.inputs, k);
        let auxs = segment_slices(aux, prefix.aux, seg.aux, k);
        ins.into_iter().zip(auxs).collect::<Vec<_>>()
    });
    let places: Vec<_> = at.into_iter().zip(bt).zip(ct).map(|((a, b), c)| [a, b, c]).collect();
    let shared: Vec<[Vec<Scalar>; 3]> = places
        .into_par_iter()
        .enumerate()
        .map(|(j, place)| -> Result<[Vec<Scalar>; 3], SynthesisError> {
            let mut cs = QapCs::new(&lagrange, Placement::Segment { prefix, seg, index: j, place }, prefix.inputs + prefix.aux);
            cs.alloc_input(|| "ONE", || Ok(Scalar::ONE))?;
            circuit.synthesize_part(&mut cs, Some(j))?;
            cs.expect(first)?;
            Ok(cs.acc)
        })
        .collect::<Result<_, _>>()?;
    for add in shared {
        for (dst, src) in prefix_acc.iter_mut().zip(add) {
            dst.iter_mut().zip(src).for_each(|(d, s)| *d += s);
        }
    }
    qap.absorb_prefix(&prefix_acc, prefix);
    qap.add_input_constraints(&lagrange, whole.constraints);
    Ok(qap)
}

/// `k` consecutive slices of `len` from `start` (k empty ones when len is 0).
fn segment_slices(v: &mut [Scalar], start: usize, len: usize, k: usize) -> Vec<&mut [Scalar]> {
    if len == 0 {
        return (0..k).map(|_| <&mut [Scalar]>::default()).collect();
    }
    v[start..start + len * k].chunks_mut(len).collect()
}

impl Qap {
    fn zeroed(s: Sizes, tau: Scalar) -> Self {
        let domain = domain_of(s);
        let n = s.inputs + s.aux;
        Qap {
            num_inputs: s.inputs,
            num_aux: s.aux,
            domain,
            at: vec![Scalar::ZERO; n],
            bt: vec![Scalar::ZERO; n],
            ct: vec![Scalar::ZERO; n],
            z_tau: tau.pow_vartime([domain as u64]) - Scalar::ONE,
        }
    }

    /// Adds a run's accumulators over the first `s.inputs` inputs and
    /// `s.aux` aux variables (inputs then aux, as [`QapCs::acc`] holds them).
    fn absorb_prefix(&mut self, acc: &[Vec<Scalar>; 3], s: Sizes) {
        let ni = self.num_inputs;
        for (dst, src) in [&mut self.at, &mut self.bt, &mut self.ct].into_iter().zip(acc) {
            let src = |i: usize| src.get(i).copied().unwrap_or(Scalar::ZERO);
            dst[..s.inputs].iter_mut().zip(0..).for_each(|(d, i)| *d += src(i));
            dst[ni..ni + s.aux].iter_mut().zip(s.inputs..).for_each(|(d, i)| *d += src(i));
        }
    }

    /// Groth16's `input_i * 0 = 0`, constraint `constraints + i`.
    fn add_input_constraints(&mut self, lagrange: &[Scalar], constraints: usize) {
        for i in 0..self.num_inputs {
            self.at[i] += lagrange[constraints + i];
        }
    }
}

/// The smallest power of two holding the constraints and one per input.
fn domain_of(s: Sizes) -> usize {
    (s.constraints + s.inputs).max(1).next_power_of_two()
}

/// `L_j(tau) = (tau^m - 1)/m * w^j / (tau - w^j)` for the domain of size m.
pub fn lagrange_at(tau: Scalar, m: usize) -> Vec<Scalar> {
    let log_m = m.trailing_zeros();
    let mut omega = Scalar::ROOT_OF_UNITY;
    for _ in log_m..Scalar::S {
        omega = omega.square();
    }
    let z_tau = tau.pow_vartime([m as u64]) - Scalar::ONE;
    let omegas = crate::ntt::powers(omega, m);
    let mut lagrange: Vec<Scalar> = omegas.par_iter().map(|w| tau - w).collect();
    batch_invert(&mut lagrange);
    let scale = z_tau * Scalar::from(m as u64).invert().unwrap();
    lagrange.par_iter_mut().zip(omegas.par_iter()).for_each(|(l, w)| *l *= scale * w);
    lagrange
}

/// Montgomery's batch inversion, in parallel chunks (no element is zero:
/// tau is not in the domain with overwhelming probability).
pub(crate) fn batch_invert(v: &mut [Scalar]) {
    v.par_chunks_mut(1 << 12).for_each(|chunk| {
        let mut prefix = Vec::with_capacity(chunk.len());
        let mut acc = Scalar::ONE;
        for x in chunk.iter() {
            prefix.push(acc);
            acc *= x;
        }
        let mut inv = acc.invert().unwrap();
        for (x, p) in chunk.iter_mut().zip(prefix).rev() {
            let next = inv * *x;
            *x = inv * p;
            inv = next;
        }
    });
}

/// Counts a run's inputs (ONE included), aux variables and constraints
/// without building a linear combination.
fn count(run: impl FnOnce(&mut CountCs) -> Result<(), SynthesisError>) -> Result<Sizes, SynthesisError> {
    let mut cs = CountCs(Sizes { inputs: 1, ..Sizes::default() });
    run(&mut cs)?;
    Ok(cs.0)
}

struct CountCs(Sizes);

impl ConstraintSystem<Scalar> for CountCs {
    type Root = Self;

    fn alloc<F, A, AR>(&mut self, _: A, _: F) -> Result<Variable, SynthesisError>
    where
        F: FnOnce() -> Result<Scalar, SynthesisError>,
        A: FnOnce() -> AR,
        AR: Into<String>,
    {
        self.0.aux += 1;
        Ok(Variable::new_unchecked(Index::Aux(self.0.aux - 1)))
    }

    fn alloc_input<F, A, AR>(&mut self, _: A, _: F) -> Result<Variable, SynthesisError>
    where
        F: FnOnce() -> Result<Scalar, SynthesisError>,
        A: FnOnce() -> AR,
        AR: Into<String>,
    {
        self.0.inputs += 1;
        Ok(Variable::new_unchecked(Index::Input(self.0.inputs - 1)))
    }

    fn enforce<A, AR, LA, LB, LC>(&mut self, _: A, _: LA, _: LB, _: LC)
    where
        A: FnOnce() -> AR,
        AR: Into<String>,
        LA: FnOnce(LinearCombination<Scalar>) -> LinearCombination<Scalar>,
        LB: FnOnce(LinearCombination<Scalar>) -> LinearCombination<Scalar>,
        LC: FnOnce(LinearCombination<Scalar>) -> LinearCombination<Scalar>,
    {
        self.0.constraints += 1;
    }

    fn push_namespace<NR, N>(&mut self, _: N)
    where
        NR: Into<String>,
        N: FnOnce() -> NR,
    {
    }

    fn pop_namespace(&mut self) {}

    fn get_root(&mut self) -> &mut Self::Root {
        self
    }
}

/// Where a run's variables and constraints go.
enum Placement<'p> {
    /// The run is the whole circuit, or the prefix: its variables are
    /// accumulated in `QapCs::acc` (its inputs, then its aux) and its
    /// constraint j is constraint j. `num_inputs`: the run's inputs.
    Whole { num_inputs: usize },
    /// Segment `index`'s run (the prefix again, then the segment): the
    /// prefix's constraints are skipped (the prefix run evaluated them),
    /// additions to prefix variables go to `acc`, the segment's own
    /// variables to `place` ([A, B, C] of (its inputs, its aux)).
    Segment { prefix: Sizes, seg: Sizes, index: usize, place: [(&'p mut [Scalar], &'p mut [Scalar]); 3] },
}

/// Accumulates each variable's A, B, C evaluations at tau.
struct QapCs<'l, 'p> {
    lagrange: &'l [Scalar],
    placement: Placement<'p>,
    run: Sizes,
    /// [A, B, C] over the run's prefix variables (all of a whole run's).
    acc: [Vec<Scalar>; 3],
}

impl<'l, 'p> QapCs<'l, 'p> {
    /// `acc_len`: the variables of the run (or of its prefix) accumulated in `acc`.
    fn new(lagrange: &'l [Scalar], placement: Placement<'p>, acc_len: usize) -> Self {
        let acc = [(); 3].map(|_| vec![Scalar::ZERO; acc_len]);
        QapCs { lagrange, placement, run: Sizes::default(), acc }
    }

    /// The run must have had exactly the sizes counted for it.
    fn expect(&self, s: Sizes) -> Result<(), SynthesisError> {
        if self.run == s {
            return Ok(());
        }
        let which = match self.placement {
            Placement::Whole { .. } => "the circuit".to_string(),
            Placement::Segment { index, .. } => format!("segment {index}"),
        };
        Err(SynthesisError::IoError(std::io::Error::other(format!(
            "{which} changed shape between two passes: {:?} then {:?} (its structure depends on something other than itself)",
            s, self.run
        ))))
    }

    /// Adds `li * coeff` to each variable of `lc` (a variable beyond the
    /// run's place is left out here and reported by [`expect`](Self::expect)).
    fn add(&mut self, which: usize, lc: &LinearCombination<Scalar>, li: Scalar) {
        for (var, coeff) in lc.iter() {
            let slot = match &mut self.placement {
                Placement::Whole { num_inputs } => {
                    let idx = match var.get_unchecked() {
                        Index::Input(i) => i,
                        Index::Aux(i) => *num_inputs + i,
                    };
                    self.acc[which].get_mut(idx)
                }
                Placement::Segment { prefix, place, .. } => match var.get_unchecked() {
                    Index::Input(i) if i < prefix.inputs => self.acc[which].get_mut(i),
                    Index::Aux(i) if i < prefix.aux => self.acc[which].get_mut(prefix.inputs + i),
                    Index::Input(i) => place[which].0.get_mut(i - prefix.inputs),
                    Index::Aux(i) => place[which].1.get_mut(i - prefix.aux),
                },
            };
            if let Some(slot) = slot {
                *slot += li * coeff;
            }
        }
    }
}

impl ConstraintSystem<Scalar> for QapCs<'_, '_> {
    type Root = Self;

    fn alloc<F, A, AR>(&mut self, _: A, _: F) -> Result<Variable, SynthesisError>
    where
        F: FnOnce() -> Result<Scalar, SynthesisError>,
        A: FnOnce() -> AR,
        AR: Into<String>,
    {
        self.run.aux += 1;
        Ok(Variable::new_unchecked(Index::Aux(self.run.aux - 1)))
    }

    fn alloc_input<F, A, AR>(&mut self, _: A, _: F) -> Result<Variable, SynthesisError>
    where
        F: FnOnce() -> Result<Scalar, SynthesisError>,
        A: FnOnce() -> AR,
        AR: Into<String>,
    {
        self.run.inputs += 1;
        Ok(Variable::new_unchecked(Index::Input(self.run.inputs - 1)))
    }

    fn enforce<A, AR, LA, LB, LC>(&mut self, _: A, a: LA, b: LB, c: LC)
    where
        A: FnOnce() -> AR,
        AR: Into<String>,
        LA: FnOnce(LinearCombination<Scalar>) -> LinearCombination<Scalar>,
        LB: FnOnce(LinearCombination<Scalar>) -> LinearCombination<Scalar>,
        LC: FnOnce(LinearCombination<Scalar>) -> LinearCombination<Scalar>,
    {
        let j = self.run.constraints;
        self.run.constraints += 1;
        let global = match &self.placement {
            Placement::Whole { .. } => j,
            // The prefix's own constraints: evaluated by the prefix run.
            Placement::Segment { prefix, .. } if j < prefix.constraints => return,
            Placement::Segment { prefix, seg, index, .. } => prefix.constraints + index * seg.constraints + (j - prefix.constraints),
        };
        let li = self.lagrange.get(global).copied().unwrap_or(Scalar::ZERO);
        self.add(0, &a(LinearCombination::zero()), li);
        self.add(1, &b(LinearCombination::zero()), li);
        self.add(2, &c(LinearCombination::zero()), li);
    }

    fn push_namespace<NR, N>(&mut self, _: N)
    where
        NR: Into<String>,
        N: FnOnce() -> NR,
    {
    }

    fn pop_namespace(&mut self) {}

    fn get_root(&mut self) -> &mut Self::Root {
        self
    }
}
