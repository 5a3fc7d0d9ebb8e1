//! [`AssignmentWriter`]: where a native witness generator writes its
//! values, in the order the gadget path allocates them.

use blstrs::Scalar;
use ff::Field;

/// A cursor over a circuit's public inputs (after the constant ONE) and
/// aux assignment: each call writes the next variable, exactly as the
/// gadget path's `alloc_input` / `alloc` would.
///
/// The areas have the recorded circuit's sizes. A write past the end is
/// dropped and counted, so that [`finish`](Self::finish) can say how far
/// off the generator was; it never panics or touches memory outside the
/// areas.
///
/// Independent parts of a circuit (sectors, challenges) are written in
/// parallel through [`split_rest`](Self::split_rest), which hands out the
/// unwritten remainder as equal consecutive parts.
///
/// ```
/// use blstrs::Scalar;
/// use kiln_synth::native::AssignmentWriter;
///
/// let (mut inputs, mut aux) = (vec![Scalar::from(0u64); 1], vec![Scalar::from(0u64); 3]);
/// let mut w = AssignmentWriter::new(&mut inputs, &mut aux);
/// w.aux(Scalar::from(5u64));
/// w.input(Scalar::from(9u64));
/// // The rest: two parts of one aux value each, written independently.
/// for (k, mut part) in w.split_rest(2).unwrap().into_iter().enumerate() {
///     part.bit(k == 1);
///     part.finish().unwrap();
/// }
/// w.finish().unwrap();
/// assert_eq!(aux, [Scalar::from(5u64), Scalar::from(0u64), Scalar::from(1u64)]);
/// ```
pub struct AssignmentWriter<'a> {
    inputs: &'a mut [Scalar],
    aux: &'a mut [Scalar],
    next_input: usize,
    next_aux: usize,
}

impl<'a> AssignmentWriter<'a> {
    /// A writer filling `inputs` and `aux` from their start.
    pub fn new(inputs: &'a mut [Scalar], aux: &'a mut [Scalar]) -> Self {
        AssignmentWriter { inputs, aux, next_input: 0, next_aux: 0 }
    }

    /// Runs `write` over fresh zeroed areas of `inputs` and `aux` elements
    /// and returns them, once it has filled every slot exactly: for tests
    /// and tools that compare a native routine with a recorded gadget.
    pub fn fill_new(inputs: usize, aux: usize, write: impl FnOnce(&mut AssignmentWriter<'_>)) -> Result<(Vec<Scalar>, Vec<Scalar>), String> {
        let (mut input_area, mut aux_area) = (vec![Scalar::ZERO; inputs], vec![Scalar::ZERO; aux]);
        let mut w = AssignmentWriter::new(&mut input_area, &mut aux_area);
        write(&mut w);
        w.finish()?;
        Ok((input_area, aux_area))
    }

    /// The next aux variable.
    #[inline]
    pub fn aux(&mut self, v: Scalar) {
        if let Some(slot) = self.aux.get_mut(self.next_aux) {
            *slot = v;
        }
        self.next_aux += 1;
    }

    /// The next aux variable, a bit (an `AllocatedBit`).
    #[inline]
    pub fn bit(&mut self, b: bool) {
        self.aux(if b { Scalar::ONE } else { Scalar::ZERO });
    }

    /// The next public input.
    #[inline]
    pub fn input(&mut self, v: Scalar) {
        if let Some(slot) = self.inputs.get_mut(self.next_input) {
            *slot = v;
        }
        self.next_input += 1;
    }

    /// Variables written so far: (inputs, aux), past-the-end writes included.
    pub fn written(&self) -> (usize, usize) {
        (self.next_input, self.next_aux)
    }

    /// Hands out everything not written yet as `parts` consecutive writers
    /// of equal size (each part's inputs and aux are an equal share), and
    /// marks it written here: each part must be filled through its own
    /// writer (and checked with its own [`finish`](Self::finish)).
    /// Fails when the remainder does not divide into `parts` equal shares,
    /// or something was written past the end already.
    pub fn split_rest(&mut self, parts: usize) -> Result<Vec<AssignmentWriter<'_>>, String> {
        let (inputs, aux) = (self.inputs.len(), self.aux.len());
        if self.next_input > inputs || self.next_aux > aux {
            return Err(self.overflow_message());
        }
        let (rest_inputs, rest_aux) = (inputs - self.next_input, aux - self.next_aux);
        if parts == 0 || !rest_inputs.is_multiple_of(parts) || !rest_aux.is_multiple_of(parts) {
            return Err(format!("{rest_inputs} inputs and {rest_aux} aux variables left do not split into {parts} equal parts"));
        }
        let (each_input, each_aux) = (rest_inputs / parts, rest_aux / parts);
        let mut input_rest = &mut self.inputs[self.next_input..];
        let mut aux_rest = &mut self.aux[self.next_aux..];
        let out = (0..parts)
            .map(|_| {
                let (i, rest) = std::mem::take(&mut input_rest).split_at_mut(each_input);
                input_rest = rest;
                let (a, rest) = std::mem::take(&mut aux_rest).split_at_mut(each_aux);
                aux_rest = rest;
                AssignmentWriter::new(i, a)
            })
            .collect();
        self.next_input = inputs;
        self.next_aux = aux;
        Ok(out)
    }

    /// Checks that exactly every input and aux variable was written.
    pub fn finish(&self) -> Result<(), String> {
        if (self.next_input, self.next_aux) == (self.inputs.len(), self.aux.len()) {
            Ok(())
        } else {
            Err(self.overflow_message())
        }
    }

    fn overflow_message(&self) -> String {
        format!(
            "wrote {} inputs and {} aux variables into room for {} and {}",
            self.next_input,
            self.next_aux,
            self.inputs.len(),
            self.aux.len()
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn writes_land_in_order_and_sizes_are_checked() {
        let (mut inputs, mut aux) = (vec![Scalar::ZERO; 2], vec![Scalar::ZERO; 2]);
        let mut w = AssignmentWriter::new(&mut inputs, &mut aux);
        w.aux(Scalar::from(3u64));
        w.input(Scalar::from(4u64));
        assert!(w.finish().unwrap_err().contains("wrote 1 inputs and 1 aux variables into room for 2 and 2"));
        w.bit(true);
        w.input(Scalar::from(5u64));
        w.finish().unwrap();
        w.aux(Scalar::from(6u64));
        assert_eq!(w.written(), (2, 3));
        assert!(w.finish().is_err(), "a write past the end is an error");
        assert!(w.split_rest(1).is_err(), "nothing splits after an overflow");
        assert_eq!(aux, [Scalar::from(3u64), Scalar::ONE]);
        assert_eq!(inputs, [Scalar::from(4u64), Scalar::from(5u64)]);
    }

    #[test]
    fn the_rest_splits_into_equal_parts_or_not_at_all() {
        let (mut inputs, mut aux) = (vec![Scalar::ZERO; 4], vec![Scalar::ZERO; 7]);
        let mut w = AssignmentWriter::new(&mut inputs, &mut aux);
        w.aux(Scalar::ONE);
        assert!(w.split_rest(4).err().unwrap().contains("do not split into 4"));
        let parts = w.split_rest(2).unwrap();
        assert_eq!(parts.iter().map(|p| (p.inputs.len(), p.aux.len())).collect::<Vec<_>>(), [(2, 3), (2, 3)]);
        for (k, mut p) in parts.into_iter().enumerate() {
            for j in 0..2 {
                p.input(Scalar::from((10 * k + j) as u64));
            }
            for j in 0..3 {
                p.aux(Scalar::from((20 * k + j) as u64));
            }
            p.finish().unwrap();
        }
        w.finish().unwrap();
        assert_eq!(inputs, [0u64, 1, 10, 11].map(Scalar::from));
        assert_eq!(aux, [1u64, 0, 1, 2, 20, 21, 22].map(Scalar::from));
        // Parts with no inputs.
        let (mut inputs, mut aux) = (vec![Scalar::ZERO; 0], vec![Scalar::ZERO; 4]);
        let mut w = AssignmentWriter::new(&mut inputs, &mut aux);
        let parts = w.split_rest(4).unwrap();
        assert_eq!(parts.iter().map(|p| (p.inputs.len(), p.aux.len())).collect::<Vec<_>>(), [(0, 1); 4]);
    }
}
