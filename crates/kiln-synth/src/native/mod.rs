//! Native witness generation: the aux values of bellperson gadgets computed
//! directly, in the order the gadgets allocate them.

pub mod sha256;
