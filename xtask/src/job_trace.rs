//! `cargo run -p xtask -- job-trace DIR`: writes the synthetic multi-rank job of the test support
//! ([`gpu_tools_testing::job::JobSpec::fixture`]: 8 ranks on 4 hosts, rank 5 slow, the hosts' clocks apart) as
//! one trace file per host, `DIR/h0.gputrace` ... `DIR/h3.gputrace`: the committed fixture
//! `tests/fixtures/traces/job-8rank/`, which the tests compare with a fresh generation byte for byte.

use std::path::Path;

use gpu_tools_testing::job::JobSpec;

pub const USAGE: &str = "cargo run -p xtask -- job-trace DIR";

pub fn run(dir: &Path) -> std::io::Result<()> {
    std::fs::create_dir_all(dir)?;
    let spec = JobSpec::fixture();
    for h in 0..spec.hosts {
        let path = dir.join(format!("{}.gputrace", JobSpec::host_name(h)));
        std::fs::write(&path, spec.host_file(h))?;
        println!("{}", path.display());
    }
    Ok(())
}
