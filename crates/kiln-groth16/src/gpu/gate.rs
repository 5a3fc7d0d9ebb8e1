//! How many proofs hold buffers on one device at once. A worker's `start`
//! copies a proof's witness to the device while earlier proofs still run
//! there; each proof's buffers and kernel scratch take about
//! `GpuContext::proof_working_bytes` (the room placement leaves beside the parameters),
//! so a start waits here until the proofs already admitted leave room
//! for one more. One proof is always admitted, so a device whose memory
//! holds one proof never waits on itself. Without this gate two workers
//! at 32 GiB on an 80 GB card started four proofs at once and ran out of
//! device memory.

use std::sync::Arc;

use parking_lot::{Condvar, Mutex};

use crate::error::ProveError;

/// Proofs admitted to one device, and the bytes they were admitted for.
#[derive(Default)]
pub(super) struct DeviceGate {
    state: Mutex<(usize, u64)>,
    left: Condvar,
}

/// A proof's admission; dropping it (the proof's device buffers gone) lets
/// the next one in.
pub(super) struct Admitted {
    gate: Arc<DeviceGate>,
    bytes: u64,
}

impl DeviceGate {
    /// Waits until `bytes` more fit in `capacity()` beside the proofs
    /// admitted, or none is; `capacity` is asked again after each proof
    /// leaves (parameters placed or evicted meanwhile change it).
    pub(super) fn admit(self: &Arc<Self>, bytes: u64, capacity: impl Fn() -> u64) -> Admitted {
        let mut st = self.state.lock();
        while st.0 > 0 && st.1 + bytes > capacity() {
            self.left.wait(&mut st);
        }
        self.enter(&mut st, bytes)
    }

    /// Counts an admission of `bytes` in the locked state `st`.
    fn enter(self: &Arc<Self>, st: &mut (usize, u64), bytes: u64) -> Admitted {
        st.0 += 1;
        st.1 += bytes;
        Admitted { gate: self.clone(), bytes }
    }

    /// `bytes` admitted now if they fit in `capacity()` beside what is
    /// admitted (even with nothing admitted, they must fit), else `None`:
    /// for device memory a caller can do without, never waiting.
    pub(super) fn try_admit(self: &Arc<Self>, bytes: u64, capacity: impl Fn() -> u64) -> Option<Admitted> {
        let mut st = self.state.lock();
        (st.1 + bytes <= capacity()).then(|| self.enter(&mut st, bytes))
    }

    /// Proofs admitted now.
    pub(super) fn admitted(&self) -> usize {
        self.state.lock().0
    }

    /// `e` as the pipeline should count it: device memory that ran out
    /// ([`ProveError::DeviceFull`]) while `others` other proofs were
    /// admitted is not the device's fault, and its retry is not charged;
    /// with none, the proof does not fit beside the parameters, which is
    /// an error of the device ([`ProveError::Backend`]), so retries of it
    /// stay bounded.
    pub(super) fn qualify_with(others: usize, e: ProveError) -> ProveError {
        match e {
            ProveError::DeviceFull { backend, message } if others == 0 => {
                ProveError::Backend { backend, message: format!("{message} (with no other proof on the device)") }
            }
            e => e,
        }
    }
}

impl Admitted {
    /// Whether other proofs are admitted beside this one now.
    pub(super) fn has_company(&self) -> bool {
        self.gate.admitted() > 1
    }

    /// This admission given up and taken again once no other proof is
    /// admitted: the device to itself. Giving it up first lets two proofs
    /// that both want to be alone wait for each other without a deadlock.
    pub(super) fn alone(self) -> Admitted {
        let (gate, bytes) = (self.gate.clone(), self.bytes);
        drop(self);
        let mut st = gate.state.lock();
        while st.0 > 0 {
            gate.left.wait(&mut st);
        }
        gate.enter(&mut st, bytes)
    }

    /// `e` as the pipeline should count it (see [`DeviceGate::qualify_with`]).
    pub(super) fn qualify(&self, e: ProveError) -> ProveError {
        DeviceGate::qualify_with(self.gate.admitted() - 1, e)
    }
}

impl Drop for Admitted {
    fn drop(&mut self) {
        let mut st = self.gate.state.lock();
        st.0 -= 1;
        st.1 -= self.bytes;
        drop(st);
        self.gate.left.notify_all();
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::time::Duration;

    use super::*;

    /// Never more admitted than fit (one always fits), and every waiter
    /// gets in once the others leave.
    #[test]
    fn admits_what_fits_and_always_one() {
        let gate = Arc::new(DeviceGate::default());
        let one = gate.admit(100, || 50);
        assert_eq!(gate.admitted(), 1, "one proof larger than the capacity still runs");
        drop(one);
        let (inside, most) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
        std::thread::scope(|s| {
            for _ in 0..8 {
                let (gate, inside, most) = (&gate, &inside, &most);
                s.spawn(move || {
                    for _ in 0..20 {
                        let _a = gate.admit(30, || 100);
                        let now = inside.fetch_add(1, Ordering::SeqCst) + 1;
                        most.fetch_max(now, Ordering::SeqCst);
                        std::thread::sleep(Duration::from_micros(200));
                        inside.fetch_sub(1, Ordering::SeqCst);
                    }
                });
            }
        });
        let most = most.load(Ordering::SeqCst);
        assert!((2..=3).contains(&most), "at most three of 30 fit in 100, and eight threads overlap: {most}");
        assert_eq!(gate.admitted(), 0);
    }

    /// A reservation is taken only when it fits beside what is admitted,
    /// and it counts against later admissions until dropped.
    #[test]
    fn try_admit_takes_only_what_fits() {
        let gate = Arc::new(DeviceGate::default());
        assert!(gate.try_admit(101, || 100).is_none(), "too large even alone");
        let proof = gate.admit(60, || 100);
        assert!(gate.try_admit(41, || 100).is_none());
        let reserved = gate.try_admit(40, || 100).expect("fits beside the proof");
        assert_eq!(gate.admitted(), 2);
        assert!(gate.try_admit(1, || 100).is_none(), "full");
        drop((proof, reserved));
        assert_eq!(gate.admitted(), 0);
        assert!(gate.try_admit(100, || 100).is_some());
    }

    /// A device that ran out of memory beside other proofs is not at
    /// fault; alone, it is. Proofs that want the device to themselves get
    /// it one at a time, even when two of them ask at once.
    #[test]
    fn running_out_beside_others_is_not_the_devices_fault() {
        let full = || ProveError::DeviceFull { backend: "gpu", message: "CUDA_ERROR_OUT_OF_MEMORY".into() };
        let gate = Arc::new(DeviceGate::default());
        let first = gate.admit(10, || 100);
        assert!(!first.has_company());
        assert!(matches!(first.qualify(full()), ProveError::Backend { message, .. } if message.contains("no other proof")));
        let second = gate.admit(10, || 100);
        assert!(first.has_company() && second.has_company());
        assert!(matches!(second.qualify(full()), ProveError::DeviceFull { .. }));
        assert!(matches!(second.qualify(ProveError::Memory("x".into())), ProveError::Memory(_)), "other errors pass");
        let (inside, most) = (AtomicUsize::new(0), AtomicUsize::new(0));
        std::thread::scope(|s| {
            for a in [first, second] {
                let (inside, most) = (&inside, &most);
                s.spawn(move || {
                    let alone = a.alone();
                    assert!(!alone.has_company());
                    most.fetch_max(inside.fetch_add(1, Ordering::SeqCst) + 1, Ordering::SeqCst);
                    std::thread::sleep(Duration::from_millis(20));
                    inside.fetch_sub(1, Ordering::SeqCst);
                });
            }
        });
        assert_eq!(most.load(Ordering::SeqCst), 1, "one at a time");
        assert_eq!(gate.admitted(), 0);
    }
}
