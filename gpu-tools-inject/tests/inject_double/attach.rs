//! An attach to a running program (the `attach_child`): its window's kernels and none from before, late and
//! unfinished records left out, graph launches, the program as it was after the detach, and a second attach.

use std::io::{BufRead, BufReader, Write};

use gpu_tools::trace::*;
use gpu_tools_injection::control::Control;
use gpu_tools_injection::message::Message;

use crate::common;
use crate::support::{
    CONCURRENT_KERNEL, SCENARIO, attach, attached_child, end, exit_child, kernels, library,
    message, scratch, step_kernels,
};

/// The child of the attach test: a stand-in CUDA program that never loaded the library. Its CUPTI subscriber slot is
/// held by "another profiler", as torch.profiler holds it. It waits for lines on stdin: `kernels A B` makes the
/// CUPTI double emit kernels with correlation ids A..=B, timed now, and prints how many CUPTI recorded (`old A B`:
/// the same, timed long before any attach); `subscriber` prints
/// the subscriber CUPTI names and how often anyone subscribed; `exit` ends it.
#[test]
#[ignore = "the child process of attach_traces_a_running_program_and_leaves_it_as_it_was"]
fn attach_child() {
    if std::env::var(SCENARIO).as_deref() != Ok("attach") {
        return;
    }
    let d = common::double();
    d.other_subscriber(Some(c"torch.profiler"));
    println!("READY");
    std::io::stdout().flush().unwrap();
    for line in std::io::stdin().lines() {
        let line = line.unwrap();
        let words: Vec<&str> = line.split_whitespace().collect();
        match words.as_slice() {
            [what @ ("kernels" | "old"), a, b] => {
                let (a, b): (u32, u32) = (a.parse().unwrap(), b.parse().unwrap());
                // Kernels of now, on CUPTI's clock (the tracer's once it runs), or of long before the attach.
                let base = if *what == "old" { 1000 } else { d.now() };
                let recorded = step_kernels(d, base, a, b);
                println!("recorded {recorded}");
            }
            ["unfinished", a, b] => {
                // Kernels still queued when a forced flush hands them over: CUPTI gives them no times.
                let (a, b): (u32, u32) = (a.parse().unwrap(), b.parse().unwrap());
                let recorded = (a..=b)
                    .filter(|&c| {
                        d.kernel(
                            CONCURRENT_KERNEL,
                            0,
                            0,
                            (0, 1, 7),
                            c,
                            c"_Z4stepv",
                            (1, 1, 1),
                            (32, 1, 1),
                        ) == 1
                    })
                    .count();
                println!("recorded {recorded}");
            }
            ["graph", a, b, g] => {
                // Launches A..=B of graph G, three kernel nodes each (one correlation id per launch).
                let (a, b, g): (u32, u32, u32) =
                    (a.parse().unwrap(), b.parse().unwrap(), g.parse().unwrap());
                d.set_kernel_graph(g, 1);
                let base = d.now();
                let mut recorded = 0;
                for c in a..=b {
                    for node in 0..3u64 {
                        let start = base + u64::from(c - a) * 1000 + node * 300;
                        recorded += usize::from(
                            d.kernel(
                                CONCURRENT_KERNEL,
                                start,
                                start + 200,
                                (0, 1, 7),
                                c,
                                c"_Z4nodev",
                                (1, 1, 1),
                                (32, 1, 1),
                            ) == 1,
                        );
                    }
                }
                d.set_kernel_graph(0, 0);
                println!("recorded {recorded}");
            }
            ["subscriber"] => {
                let s = d.stats();
                println!(
                    "subscriber {:?}, {} subscribed, {} unsubscribed",
                    d.subscriber_name(),
                    s.subscribed,
                    s.unsubscribes
                )
            }
            ["threadids"] => println!("threadids {}", d.thread_id_type()),
            ["exit"] => return,
            other => panic!("unknown command {other:?}"),
        }
        std::io::stdout().flush().unwrap();
    }
}

#[test]
fn attach_traces_a_running_program_and_leaves_it_as_it_was() {
    library();
    let (dir, socket) = scratch("attach");
    let mut child = attached_child("attach::attach_child", "attach")
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let mut answer = |command: &str| -> String {
        writeln!(stdin, "{command}").unwrap();
        loop {
            let line = lines.next().expect("the child answers").unwrap();
            // The harness's own lines ("running 1 test", ...) are not answers.
            if line.starts_with("recorded ")
                || line.starts_with("subscriber ")
                || line.starts_with("threadids ")
            {
                return line;
            }
        }
    };
    // Wait for READY (the doubles loaded).
    assert_eq!(
        answer("kernels 0 0"),
        "recorded 0",
        "nothing traces before the attach"
    );

    let (first, mut control, reader, header) = attach(child.id(), &socket);
    assert_eq!(first.entry_result, 0, "the attach thread started");
    assert!(!first.already_loaded);
    // Attached, the library leaves the program's thread id setting (its own profiler may rely on it) as it was,
    // and the header says the records hold CUPTI's own ids.
    assert_eq!(answer("threadids"), "threadids 0");
    assert_eq!(header.map(|h| h.thread_ids), Some(ThreadIds::Vendor));
    assert_eq!(answer("kernels 1 20"), "recorded 20");
    // Records CUPTI delivers late, of work that ended before the attach, are not the window's.
    assert_eq!(answer("old 900 902"), "recorded 3");
    // Records of kernels that had not run when the flush came (no end time) are not the window's either.
    assert_eq!(answer("unfinished 950 951"), "recorded 2");
    // Graph mode (the default), attached: three launches of graph 7, each from its three kernels' records.
    assert_eq!(answer("graph 100 102 7"), "recorded 9");
    control.write_all(&[Control::Stop.byte()]).unwrap();
    let records = reader.join().unwrap();
    let k = kernels(&records);
    assert_eq!(
        k.iter().map(|k| k.correlation).collect::<Vec<_>>(),
        (1..=20).collect::<Vec<_>>(),
        "every kernel of the attached time, once, and none from before it"
    );
    assert!(
        records.iter().any(|r| matches!(r, Record::Notice(n)
            if n.text.starts_with("3 records of work that ended before the attach left out"))),
        "{records:#?}"
    );
    assert!(
        records
            .iter()
            .any(|r| message(r) == Some(Message::UnfinishedLeftOut { records: 2 })),
        "the unfinished records are counted apart"
    );
    let launches: Vec<_> = records
        .iter()
        .filter_map(|r| match r {
            Record::GraphLaunch(g) => Some(g),
            _ => None,
        })
        .collect();
    assert_eq!(
        launches
            .iter()
            .map(|g| (g.graph_id, g.correlation, g.end - g.start))
            .collect::<Vec<_>>(),
        vec![(7, 100, 800), (7, 101, 800), (7, 102, 800)],
        "one launch record each, from its first node's start to its last node's end"
    );
    assert!(
        records.iter().any(|r| matches!(r, Record::Notice(n)
            if n.text.starts_with("graph mode, attached: 3 graph launches built from the records of their 9 kernels"))),
        "{records:#?}"
    );
    let e = end(&records).expect("the stream ends after the stop byte");
    assert_eq!(e.reason, EndReason::Stopped);
    assert_eq!(
        e.records + 1,
        records.len() as u64,
        "every record sent arrived"
    );
    assert!(
        records
            .iter()
            .any(|r| matches!(message(r), Some(Message::Attached { .. }))),
        "{records:#?}"
    );
    // Detached: CUPTI records nothing any more, and the library never took (or tried to take) a callback
    // subscriber: the program's own profiler keeps the one it holds.
    assert_eq!(answer("kernels 21 25"), "recorded 0");
    assert_eq!(
        answer("subscriber"),
        "subscriber \"\", 0 subscribed, 0 unsubscribed"
    );

    // A second attach to the same process: the library is there, dormant; a new session starts.
    let (second, mut control, reader, _) = attach(child.id(), &socket);
    assert_eq!(second.entry_result, 0);
    assert!(second.already_loaded);
    assert_eq!(answer("kernels 26 30"), "recorded 5");
    control.write_all(&[Control::Stop.byte()]).unwrap();
    let records = reader.join().unwrap();
    assert_eq!(
        kernels(&records)
            .iter()
            .map(|k| k.correlation)
            .collect::<Vec<_>>(),
        (26..=30).collect::<Vec<_>>()
    );
    assert_eq!(end(&records).map(|e| e.reason), Some(EndReason::Stopped));
    assert_eq!(answer("kernels 31 31"), "recorded 0");

    exit_child(stdin, &mut child);
    let _ = std::fs::remove_dir_all(&dir);
}
