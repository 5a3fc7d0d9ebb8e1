//! What a reservation is for. The budget only counts bytes per class; it never
//! behaves differently by class (the budget knows nothing of what it budgets).

use serde::Serialize;

/// The purpose of a reservation, used only for the counters in
/// [`BudgetSnapshot`](crate::BudgetSnapshot).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum MemoryClass {
    /// Structured reference strings (Groth16 parameters) resident in host memory.
    Srs,
    /// Page-locked pool buffers that are checked out (in use by a job).
    PinnedInUse,
    /// Page-locked pool buffers parked in the pool, ready for the next checkout.
    PinnedIdle,
    /// Circuit synthesis working set (witness, constraint evaluation scratch).
    Synthesis,
    /// Host-side staging for GPU work that is not in pinned pool buffers.
    GpuStaging,
    /// Compiled circuits (constraint matrices) kept to speed up synthesis;
    /// a cache, like idle parameters: evictable, not tied to a job.
    CompiledCircuits,
    /// Anything else.
    Other,
}

impl MemoryClass {
    /// Every class, in the order of [`ClassBytes`]'s fields.
    pub const ALL: [MemoryClass; 7] = [
        MemoryClass::Srs,
        MemoryClass::PinnedInUse,
        MemoryClass::PinnedIdle,
        MemoryClass::Synthesis,
        MemoryClass::GpuStaging,
        MemoryClass::CompiledCircuits,
        MemoryClass::Other,
    ];

    pub(crate) const COUNT: usize = Self::ALL.len();

    pub(crate) fn index(self) -> usize {
        self as usize
    }

    /// A stable lowercase name, for metric labels.
    pub fn name(self) -> &'static str {
        match self {
            MemoryClass::Srs => "srs",
            MemoryClass::PinnedInUse => "pinned_in_use",
            MemoryClass::PinnedIdle => "pinned_idle",
            MemoryClass::Synthesis => "synthesis",
            MemoryClass::GpuStaging => "gpu_staging",
            MemoryClass::CompiledCircuits => "compiled_circuits",
            MemoryClass::Other => "other",
        }
    }
}

impl std::fmt::Display for MemoryClass {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// Bytes per [`MemoryClass`]; every class is always present, so the JSON shape
/// of `/status` does not change with load.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct ClassBytes {
    /// [`MemoryClass::Srs`]
    pub srs: u64,
    /// [`MemoryClass::PinnedInUse`]
    pub pinned_in_use: u64,
    /// [`MemoryClass::PinnedIdle`]
    pub pinned_idle: u64,
    /// [`MemoryClass::Synthesis`]
    pub synthesis: u64,
    /// [`MemoryClass::GpuStaging`]
    pub gpu_staging: u64,
    /// [`MemoryClass::CompiledCircuits`]
    pub compiled_circuits: u64,
    /// [`MemoryClass::Other`]
    pub other: u64,
}

impl ClassBytes {
    pub(crate) fn from_array(bytes: [u64; MemoryClass::COUNT]) -> Self {
        let [srs, pinned_in_use, pinned_idle, synthesis, gpu_staging, compiled_circuits, other] = bytes;
        ClassBytes {
            srs,
            pinned_in_use,
            pinned_idle,
            synthesis,
            gpu_staging,
            compiled_circuits,
            other,
        }
    }

    /// The bytes of one class.
    pub fn get(&self, class: MemoryClass) -> u64 {
        match class {
            MemoryClass::Srs => self.srs,
            MemoryClass::PinnedInUse => self.pinned_in_use,
            MemoryClass::PinnedIdle => self.pinned_idle,
            MemoryClass::Synthesis => self.synthesis,
            MemoryClass::GpuStaging => self.gpu_staging,
            MemoryClass::CompiledCircuits => self.compiled_circuits,
            MemoryClass::Other => self.other,
        }
    }

    /// `(class, bytes)` for every class, for metric exporters.
    pub fn iter(&self) -> impl Iterator<Item = (MemoryClass, u64)> + '_ {
        MemoryClass::ALL.into_iter().map(|c| (c, self.get(c)))
    }

    /// The sum over all classes.
    pub fn sum(&self) -> u64 {
        self.iter().map(|(_, b)| b).sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn index_matches_all_order_and_get() {
        let mut arr = [0u64; MemoryClass::COUNT];
        for (i, c) in MemoryClass::ALL.iter().enumerate() {
            assert_eq!(c.index(), i);
            arr[i] = 10 + i as u64;
        }
        let cb = ClassBytes::from_array(arr);
        for c in MemoryClass::ALL {
            assert_eq!(cb.get(c), 10 + c.index() as u64, "{c}");
        }
        assert_eq!(cb.sum(), (10..10 + MemoryClass::COUNT as u64).sum::<u64>());
    }
}
