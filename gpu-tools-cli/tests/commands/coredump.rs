//! `gpu-tools coredump` as a user runs it: on dumps written by the test writer, with each option, with several
//! files, with bad arguments and with bad files.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use gpu_tools_testing::coredump_writer as writer;
use writer::expect::*;

fn run(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_gpu-tools"))
        .arg("coredump")
        .args(args)
        .output()
        .expect("run gpu-tools coredump")
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

struct TempDir(PathBuf);

impl TempDir {
    fn new(tag: &str) -> Self {
        let p = std::env::temp_dir().join(format!("gpu-tools-{tag}-{}", std::process::id()));
        std::fs::create_dir_all(&p).unwrap();
        TempDir(p)
    }
    fn file(&self, name: &str, bytes: &[u8]) -> String {
        let p = self.0.join(name);
        std::fs::write(&p, bytes).unwrap();
        p.to_string_lossy().into_owned()
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

#[test]
fn prints_the_faulting_lane_like_cuda_gdb() {
    let dir = TempDir::new("coredump-example");
    let file = dir.file("sample.cudacore", &writer::sample(writer::Layout::Current));
    let o = run(&[&file]);
    let text = stdout(&o);
    assert!(o.status.success(), "{text}{}", stderr(&o));
    print!("{text}");
    let expected = [
        "ELF ABI 7, driver 580.159, CUDA 13.0, written by \"UD\", flags 0x21".to_string(),
        format!(
            "[Faulting lane: kernel fault(int*), grid {GRID}, block (1,0,0), thread (37,0,0), device 0, sm {FAULT_SM}, \
             warp {FAULT_WARP}, lane {FAULT_LANE}]"
        ),
        "CUDA Exception: Warp Misaligned Address".to_string(),
        format!("The exception was triggered at PC {ERROR_PC:#x}  fault(int*)+0x90"),
        format!("#0  {FAULT_PC:#018x} in fault(int*)+0xa0 <<<(2,1,1),(64,1,1)>>>"),
    ];
    for line in &expected {
        assert!(
            text.lines().any(|l| l.ends_with(line.as_str())),
            "missing {line:?}"
        );
    }
    let rows: Vec<&str> = text
        .lines()
        .filter(|l| l.contains("Warp Misaligned Address") && l.contains("active"))
        .collect();
    let [row] = rows.as_slice() else {
        panic!("one lane row: {rows:?}")
    };
    let cols: Vec<&str> = row.split_whitespace().collect();
    assert_eq!(
        &cols[..9],
        [
            "0",
            "5",
            "3",
            "5",
            "active",
            &format!("{FAULT_PC:#018x}"),
            "fault(int*)+0xa0",
            "(1,0,0)",
            "(37,0,0)"
        ]
    );
}

#[test]
fn options_add_devices_kernels_warps_and_all_lanes() {
    let dir = TempDir::new("coredump-example-all");
    let file = dir.file("sample.cudacore", &writer::sample(writer::Layout::Current));
    let o = run(&["--devices", "--kernels", "--warps", "--all-lanes", &file]);
    let text = stdout(&o);
    assert!(o.status.success(), "{}", stderr(&o));
    // The device row; SMs 2 and 5 hold blocks.
    let device_row =
        format!("0 17:00.0 {DEVICE_NAME} {DEVICE_TYPE} {SM_TYPE} {SMS} 64 32 255 0x24");
    assert!(
        text.lines()
            .any(|l| l.split_whitespace().collect::<Vec<_>>().join(" ") == device_row),
        "{text}"
    );
    assert!(
        text.lines()
            .any(|l| l.contains(" Active ") && l.ends_with("0x24 fault(int*)")),
        "{text}"
    );
    assert!(text.contains(&format!("Device 0 SM {FAULT_SM}")), "{text}");
    assert!(
        text.lines().any(|l| l
            .trim_start()
            .starts_with("2        0x0000ffff           0xffff0000")),
        "{text}"
    );
    let lanes = text
        .lines()
        .filter(|l| l.contains(" active ") || l.contains(" diverg "))
        .count();
    assert_eq!(lanes, 34, "{text}");
    assert!(
        text.contains("helper()+0x30"),
        "a diverged lane in the helper: {text}"
    );
}

#[test]
fn json_holds_the_same_facts() {
    let dir = TempDir::new("coredump-example-json");
    let file = dir.file("sample.cudacore", &writer::sample(writer::Layout::Current));
    let o = run(&["--json", &file]);
    assert!(o.status.success(), "{}", stderr(&o));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).expect("JSON");
    assert_eq!(v["abi_version"], 7);
    assert_eq!(v["metadata"]["driver_version"], "580.159");
    assert_eq!(v["devices"][0]["name"], DEVICE_NAME);
    assert_eq!(v["devices"][0]["active_sms_mask"], "0x24");
    assert_eq!(v["kernels"][0]["name"], KERNEL);
    assert_eq!(v["kernels"][0]["demangled"], "fault(int*)");
    let lanes = v["lanes"].as_array().unwrap();
    assert_eq!(lanes.len(), 1);
    let l = &lanes[0];
    assert_eq!(
        (l["sm"].as_u64(), l["warp"].as_u64(), l["lane"].as_u64()),
        (Some(5), Some(3), Some(5))
    );
    assert_eq!(l["pc"], format!("{FAULT_PC:#x}"));
    assert_eq!(l["function_offset"], "0xa0");
    assert_eq!(l["error_pc"], format!("{ERROR_PC:#x}"));
    assert_eq!(l["block_idx"], serde_json::json!([1, 0, 0]));
    assert_eq!(l["thread_idx"], serde_json::json!([37, 0, 0]));
    assert_eq!(l["exception"], "Warp Misaligned Address");
    let all = run(&["--json", "--all-lanes", &file]);
    let v: serde_json::Value = serde_json::from_slice(&all.stdout).unwrap();
    assert_eq!(v["lanes"].as_array().unwrap().len(), 34);
}

#[test]
fn warps_are_refused_with_json_which_has_none() {
    let dir = TempDir::new("coredump-warps-json");
    let file = dir.file("sample.cudacore", &writer::sample(writer::Layout::Current));
    let o = run(&["--json", "--warps", &file]);
    assert_eq!(o.status.code(), Some(2), "{}", stdout(&o));
    assert!(o.stdout.is_empty());
    assert!(
        stderr(&o).contains("Usage: gpu-tools coredump"),
        "{}",
        stderr(&o)
    );
}

#[test]
fn several_files_are_printed_in_order() {
    let dir = TempDir::new("coredump-several");
    let first = dir.file("first.cudacore", &writer::sample(writer::Layout::Current));
    let second = dir.file("second.cudacore", &writer::sample(writer::Layout::Current));
    let o = run(&[&first, &second]);
    let text = stdout(&o);
    assert!(o.status.success(), "{}", stderr(&o));
    let headers: Vec<&str> = text
        .lines()
        .filter(|l| l.starts_with("CUDA core dump "))
        .collect();
    assert_eq!(headers.len(), 2, "{text}");
    assert!(headers[0].contains("first.cudacore") && headers[1].contains("second.cudacore"));
    let json = run(&["--json", &first, &second]);
    let v: serde_json::Value = serde_json::from_slice(&json.stdout).expect("one JSON document");
    let files: Vec<&str> = v
        .as_array()
        .expect("an array for several files")
        .iter()
        .map(|d| d["file"].as_str().unwrap())
        .collect();
    assert_eq!(files, [first.as_str(), second.as_str()]);
}

#[test]
fn a_bad_file_among_good_ones_is_reported_and_the_others_printed() {
    let dir = TempDir::new("coredump-mixed");
    let good = dir.file("good.cudacore", &writer::sample(writer::Layout::Current));
    let bad = dir.file("bad.cudacore", b"not a dump\n");
    let o = run(&[&bad, &good]);
    assert_eq!(o.status.code(), Some(1));
    assert!(
        stderr(&o).starts_with(&format!("gpu-tools coredump: {bad}: not an ELF file")),
        "{}",
        stderr(&o)
    );
    assert!(stdout(&o).contains("CUDA Exception: Warp Misaligned Address"));
    let json = run(&["--json", &good, &bad]);
    assert_eq!(json.status.code(), Some(1));
    let v: serde_json::Value =
        serde_json::from_slice(&json.stdout).expect("still one JSON document");
    assert_eq!(v.as_array().map(Vec::len), Some(1));
    // A file that is not there stops the command before anything is printed.
    let missing = dir
        .0
        .join("missing.cudacore")
        .to_string_lossy()
        .into_owned();
    let o = run(&[&good, &missing]);
    assert_eq!(o.status.code(), Some(1));
    assert!(stdout(&o).is_empty(), "{}", stdout(&o));
    assert!(
        stderr(&o).contains(&format!("{missing}: No such file or directory")),
        "{}",
        stderr(&o)
    );
}

#[test]
fn bad_arguments_exit_2_with_usage() {
    for args in [&[][..], &["--bogus", "x"][..]] {
        let o = run(args);
        assert_eq!(o.status.code(), Some(2), "{args:?}");
        assert!(
            stderr(&o).contains("Usage: gpu-tools coredump"),
            "{args:?}: {}",
            stderr(&o)
        );
    }
    let help = run(&["--help"]);
    assert!(help.status.success());
    assert!(stdout(&help).contains("--all-lanes"));
}

#[test]
fn bad_files_are_reported_readably() {
    let dir = TempDir::new("coredump-example-bad");
    let cases = [
        (
            dir.file("text.cudacore", b"not a dump\n"),
            "not an ELF file (a CUDA core dump is an ELF file)",
        ),
        (dir.file("empty.cudacore", b""), "not an ELF file"),
        (
            dir.file(
                "cut.cudacore",
                &writer::sample(writer::Layout::Current)[..300],
            ),
            "lies outside the file",
        ),
        (
            dir.0
                .join("missing.cudacore")
                .to_string_lossy()
                .into_owned(),
            "No such file or directory",
        ),
    ];
    for (file, message) in cases {
        let before = std::fs::read(&file).ok();
        let o = run(&[&file]);
        let err = stderr(&o);
        assert_eq!(o.status.code(), Some(1), "{file}: {err}");
        assert!(
            err.starts_with("gpu-tools coredump: ") && err.contains(message),
            "{file}: {err}"
        );
        assert!(!err.contains("CoreDumpError"), "Display, not Debug: {err}");
        assert_eq!(std::fs::read(&file).ok(), before, "{file} changed");
    }
}

#[test]
fn a_forged_sm_count_is_refused_without_allocating_for_it() {
    let dir = TempDir::new("coredump-forged-sms");
    let file = dir.file(
        "forged.cudacore",
        &writer::with_sm_count(writer::sample(writer::Layout::Current), 0, u32::MAX - 1),
    );
    // Under 256 MiB of address space: a mask sized from the count (512 MiB) cannot be allocated.
    let o = Command::new("sh")
        .arg("-c")
        .arg("ulimit -v 262144 && exec \"$0\" coredump --devices \"$1\"")
        .arg(env!("CARGO_BIN_EXE_gpu-tools"))
        .arg(&file)
        .output()
        .expect("run gpu-tools coredump under a memory limit");
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(
        err.starts_with(&format!(
            "gpu-tools coredump: {file}: section 1 (.cudbg.devtbl): device 0 claims "
        )) && err.contains(&format!(
            "but the dump holds SM-table entries for {SMS}: corrupt"
        )),
        "{err}"
    );
    assert!(stdout(&o).is_empty(), "nothing printed for the file");
}

#[test]
fn every_fixture_prints_its_exception() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/fixtures/coredump");
    let list =
        std::fs::read_to_string(dir.join("MANIFEST")).expect("the recorded fixtures' MANIFEST");
    let fixtures: Vec<&str> = list
        .lines()
        .map(str::trim)
        .filter(|l| l.ends_with(".cudacore"))
        .collect();
    assert!(!fixtures.is_empty(), "the MANIFEST lists dumps");
    for f in fixtures {
        let o = run(&[&dir.join(f).to_string_lossy()]);
        let text = stdout(&o);
        assert!(o.status.success(), "{f}: {}", stderr(&o));
        assert!(
            text.contains("CUDA Exception: Warp Misaligned Address"),
            "{f}: {text}"
        );
        println!("{f}:\n{text}");
    }
}
