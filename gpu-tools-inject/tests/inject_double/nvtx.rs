//! An attach that records a running program's NVTX (modules that called NVTX before it and modules that did not)
//! and puts it back at the stop.

use std::io::{BufRead, BufReader, Write};

use gpu_tools::trace::*;
use gpu_tools_injection::control::Control;
use gpu_tools_injection::env;

use crate::common;
use crate::support::{SCENARIO, attach_recording, attached_child, end, exit_child, library};

/// The child of the NVTX attach test: a program with two modules that carry NVTX v3 (copies of the NVTX module
/// double, `called` and `fresh`), started without a tool. `called` makes its first NVTX call before any attach
/// (so its NVTX is a no-op for good); `fresh` makes none. Lines on stdin: `push M NAME`, `pop M`, `mark M NAME`
/// (NVTX calls in module M, answered `pushed N`, `popped N`, `marked`), `state M` (its init state and how many
/// function slots are not NULL), `calls` (the CUPTI double's NVTX calls and the modules it took), `exit`.
#[test]
#[ignore = "the child process of attach_records_the_nvtx_of_a_running_program_and_puts_it_back"]
fn attach_nvtx_child() {
    use gpu_tools_testing::nvtx_module::NvtxModule;
    if std::env::var(SCENARIO).as_deref() != Ok("attach-nvtx") {
        return;
    }
    let d = common::double();
    let dir = std::env::temp_dir().join(format!("inject_double-nvtx-child-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let fresh_path = dir.join("libnvtx_fresh.so");
    std::fs::copy(common::double_path("nvtx_module"), &fresh_path).unwrap();
    let called = NvtxModule::open(&common::double_path("nvtx_module")).unwrap();
    let fresh = NvtxModule::open(&fresh_path).unwrap();
    assert_eq!(
        called.push(c"before the attach"),
        gpu_tools_testing::nvtx_module::NO_PUSH_POP_TRACKING
    );
    called.pop();
    println!("READY");
    std::io::stdout().flush().unwrap();
    for line in std::io::stdin().lines() {
        let line = line.unwrap();
        let words: Vec<&str> = line.split_whitespace().collect();
        let module = |m: &str| match m {
            "called" => &called,
            "fresh" => &fresh,
            other => panic!("no module {other}"),
        };
        let text = |t: &str| std::ffi::CString::new(t).unwrap();
        match words.as_slice() {
            ["push", m, name] => println!("pushed {}", module(m).push(&text(name))),
            ["pop", m] => println!("popped {}", module(m).pop()),
            ["mark", m, name] => {
                module(m).mark(&text(name));
                println!("marked");
            }
            ["state", m] => println!(
                "state {} {}",
                module(m).init_state(),
                module(m).live_slots()
            ),
            ["calls"] => {
                let (calls, inits) = d.nvtx_counts();
                println!("calls {calls} {inits}");
            }
            ["exit"] => break,
            other => panic!("unknown command {other:?}"),
        }
        std::io::stdout().flush().unwrap();
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// The NVTX records of a stream: kind, name and id of each marker.
fn markers(records: &[Record]) -> Vec<(MarkerKind, String, u32)> {
    records
        .iter()
        .filter_map(|r| match r {
            Record::Marker(m) => Some((m.kind, m.name.clone(), m.id)),
            _ => None,
        })
        .collect()
}

#[test]
fn attach_records_the_nvtx_of_a_running_program_and_puts_it_back() {
    library();
    let dir =
        std::env::temp_dir().join(format!("inject_double-attach-nvtx-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let socket = dir.join("s");
    let mut child = attached_child("nvtx::attach_nvtx_child", "attach-nvtx")
        .env_remove(env::NVTX_INJECTION)
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let mut answer = |command: &str| -> String {
        writeln!(stdin, "{command}").unwrap();
        loop {
            let line = lines.next().expect("the child answers").unwrap();
            if ["pushed ", "popped ", "marked", "state ", "calls "]
                .iter()
                .any(|p| line.starts_with(p))
            {
                return line;
            }
        }
    };
    // Before the attach: `called` initialised without a tool (every call a no-op), `fresh` not yet.
    assert_eq!(answer("state called"), "state 2 0");
    assert_eq!(answer("state fresh"), "state 0 64");

    let kinds = [env::TraceKind::Kernel, env::TraceKind::Nvtx];
    let (first, mut control, reader, _) = attach_recording(child.id(), &socket, &kinds);
    assert_eq!(first.entry_result, 0, "the attach thread started");
    // Routed: CUPTI took three functions of each module; `fresh` was initialised as its first call would have.
    assert_eq!(answer("state called"), "state 2 3");
    assert_eq!(answer("state fresh"), "state 2 3");
    assert_eq!(answer("push called step"), "pushed 0");
    assert_eq!(answer("mark fresh tick"), "marked");
    assert_eq!(answer("push fresh inner"), "pushed 1");
    assert_eq!(answer("pop fresh"), "popped 1");
    assert_eq!(answer("pop called"), "popped 0");
    control.write_all(&[Control::Stop.byte()]).unwrap();
    let records = reader.join().unwrap();
    let m = markers(&records);
    let names: Vec<(MarkerKind, &str)> = m.iter().map(|(k, n, _)| (*k, n.as_str())).collect();
    assert_eq!(
        names,
        vec![
            (MarkerKind::Start, "step"),
            (MarkerKind::Instant, "tick"),
            (MarkerKind::Start, "inner"),
            (MarkerKind::End, ""),
            (MarkerKind::End, ""),
        ],
        "exactly the NVTX calls of the window, none from before it: {records:#?}"
    );
    assert_eq!(
        (m[3].2, m[4].2),
        (m[2].2, m[0].2),
        "each end pairs with its start"
    );
    assert!(
        records
            .iter()
            .all(|r| !matches!(r, Record::Marker(k) if k.process != child.id())),
        "the program's markers"
    );
    assert!(
        records.iter().any(|r| matches!(r, Record::Notice(n)
            if n.text.starts_with("NVTX is recorded from")
                && n.text.contains("libnvtx_module.so, ")
                && n.text.contains("libnvtx_fresh.so (no NVTX call before the attach)"))),
        "the notice names both modules: {records:#?}"
    );
    assert_eq!(end(&records).map(|e| e.reason), Some(EndReason::Stopped));
    // After the stop: every slot is NULL again, and calls reach CUPTI no more.
    assert_eq!(answer("state called"), "state 2 0");
    assert_eq!(answer("state fresh"), "state 2 0");
    assert_eq!(answer("push called after"), "pushed -2");
    assert_eq!(answer("mark fresh after"), "marked");
    assert_eq!(answer("calls"), "calls 5 2");

    // A second attach routes the same modules again (through the same getters), and puts them back again.
    let (second, mut control, reader, _) = attach_recording(child.id(), &socket, &kinds);
    assert_eq!(second.entry_result, 0);
    assert!(second.already_loaded);
    assert_eq!(answer("push fresh again"), "pushed 0");
    assert_eq!(answer("pop fresh"), "popped 0");
    control.write_all(&[Control::Stop.byte()]).unwrap();
    let records = reader.join().unwrap();
    let names: Vec<(MarkerKind, String)> = markers(&records)
        .into_iter()
        .map(|(k, n, _)| (k, n))
        .collect();
    assert_eq!(
        names,
        vec![
            (MarkerKind::Start, "again".into()),
            (MarkerKind::End, String::new())
        ]
    );
    assert!(
        records.iter().any(|r| matches!(r, Record::Notice(n)
            if n.text.starts_with("NVTX is recorded from")
                && n.text.contains("libnvtx_fresh.so")
                && !n.text.contains("no NVTX call before"))),
        "{records:#?}"
    );
    assert_eq!(answer("state fresh"), "state 2 0");
    assert_eq!(answer("calls"), "calls 7 4");

    exit_child(stdin, &mut child);
    let _ = std::fs::remove_dir_all(&dir);
}
