//! What `stats` and `export` say of the files of one job read together: a rank traced twice is refused (its time
//! would count twice), and what the merge lacks (ranks without a trace, hosts whose windows do not overlap) is
//! warned about on stderr, per rank range and per host ([`Job::gaps`]).

use std::path::PathBuf;

use gpu_tools::trace::report::{CollectiveAlignment, DuplicateRank, Job};

use crate::failure::Failure;

/// A rank traced twice, as an exit-1 failure naming both files.
pub fn traced_twice(paths: &[PathBuf], twice: &DuplicateRank) -> Failure {
    let place = |(key, pid, host): &((u32, u32), u32, String)| {
        let path = paths
            .get(key.0 as usize)
            .map_or_else(String::new, |p| p.display().to_string());
        format!("{path} (stream {}, pid {pid}, host {host})", key.1)
    };
    Failure::new(
        1,
        format!(
            "rank {} is traced twice: in {} and in {}; its time would count twice (give each rank's trace once)",
            twice.rank,
            place(&twice.first),
            place(&twice.second)
        ),
    )
}

/// Says on stderr, as `command`, each gap of the merged job: the missing ranks, the hosts whose windows do not
/// overlap.
pub fn warn_gaps(command: &str, job: &Job, alignment: &CollectiveAlignment) {
    for gap in job.gaps(alignment) {
        eprintln!("gpu-tools {command}: warning: {gap}");
    }
}
