//! Native witness generation: the values a circuit's gadgets allocate,
//! computed directly and written in the gadgets' order through an
//! [`AssignmentWriter`], without running the gadget code (no closures per
//! variable, no linear combinations).
//!
//! Each piece here reproduces one gadget's allocations exactly (the
//! proptests run the real gadget in a recording constraint system and
//! compare the vectors bit for bit). A proof kind composes them into a
//! generator for its circuit and hands it to
//! [`SynthContext::synthesize_native`](crate::SynthContext::synthesize_native),
//! which checks the result against the circuit's recorded R1CS before
//! anything is proved, so a wrong generator costs a slower partition, never
//! a wrong proof.

pub mod bits;
pub mod merkle;
pub mod poseidon;
pub mod sha256;
mod writer;

pub use writer::AssignmentWriter;

#[cfg(test)]
mod gadget_tests;
