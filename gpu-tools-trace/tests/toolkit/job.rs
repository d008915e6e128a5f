//! The job-wide report (`stragglers`) and the alignment on collectives, on synthetic multi-host jobs
//! (`gpu_tools_testing::job`) and the committed 8-rank fixture.

use gpu_tools_testing::job::JobSpec;
use gpu_tools_trace::report::{Analysis, Format, STRAGGLERS, Table, write_tables};

fn stragglers(files: &[Vec<u8>]) -> Table {
    let mut a = Analysis::for_reports(&[STRAGGLERS]);
    for (i, f) in files.iter().enumerate() {
        let errors = a.read(i as u32, &f[..]);
        assert!(errors.is_empty(), "{errors:?}");
    }
    a.report(STRAGGLERS).expect("collected")
}

fn files(spec: &JobSpec) -> Vec<Vec<u8>> {
    (0..spec.hosts).map(|h| spec.host_file(h)).collect()
}

#[test]
fn explore() {
    let t = stragglers(&files(&JobSpec::fixture()));
    let mut out = Vec::new();
    write_tables(&[t], Format::Text, &mut out).unwrap();
    println!("{}", String::from_utf8(out).unwrap());
    let mut spec = JobSpec::fixture();
    spec.nvtx = true;
    let t = stragglers(&files(&spec));
    let mut out = Vec::new();
    write_tables(&[t], Format::Text, &mut out).unwrap();
    println!("{}", String::from_utf8(out).unwrap());
}
