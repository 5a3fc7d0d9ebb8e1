//! The engine's jobs by request id, and what is remembered of ended ones:
//! for `finished_job_retention_secs`, and only while the memory kept for
//! requests has room (the oldest ended job is forgotten first when a new
//! request needs it).

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::jobs::Job;

#[derive(Default)]
pub(crate) struct Registry {
    by_id: HashMap<String, Arc<Job>>,
    next_seq: u64,
    /// Ended jobs, in the order they ended: (when, id, seq). An id may have
    /// been taken over by a resubmission since; the seq tells.
    ended: VecDeque<(Instant, Arc<str>, u64)>,
}

impl Registry {
    pub(crate) fn get(&self, id: &str) -> Option<&Arc<Job>> {
        self.by_id.get(id)
    }

    pub(crate) fn jobs(&self) -> impl Iterator<Item = &Arc<Job>> {
        self.by_id.values()
    }

    /// The next submission number.
    pub(crate) fn next_seq(&mut self) -> u64 {
        let seq = self.next_seq;
        self.next_seq += 1;
        seq
    }

    /// Keeps `job` under its id (replacing an ended job of that id).
    pub(crate) fn insert(&mut self, job: Arc<Job>) {
        self.by_id.insert(job.id.to_string(), job);
    }

    /// `job` has ended: it is remembered from now, oldest first.
    pub(crate) fn ended(&mut self, job: &Job) {
        self.ended.push_back((Instant::now(), job.id.clone(), job.seq));
    }

    /// Forgets jobs that ended more than `retention` ago.
    pub(crate) fn prune(&mut self, retention: Duration) {
        while self.ended.front().is_some_and(|(at, _, _)| at.elapsed() >= retention) {
            self.forget_oldest_ended();
        }
    }

    /// Forgets the job that ended first; false when no ended job is left.
    pub(crate) fn forget_oldest_ended(&mut self) -> bool {
        let Some((_, id, seq)) = self.ended.pop_front() else { return false };
        if self.by_id.get(&*id).is_some_and(|j| j.seq == seq) {
            self.by_id.remove(&*id);
        }
        true
    }
}
